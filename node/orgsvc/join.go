package orgsvc

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/p2p"
)

// Join implements api.OrgAPI: dial the bootstrap peers in the key, fetch and
// check the ledger against the org ID, and write machine.register.
func (s *Service) Join(ctx context.Context, req api.JoinRequest) (api.JoinResult, error) {
	tok, err := ledger.ParseToken(req.OrgKey)
	if err != nil {
		return api.JoinResult{}, api.Errorf(http.StatusBadRequest, "org key: %s", strings.TrimPrefix(err.Error(), "ledger: "))
	}
	req.Name = strings.TrimSpace(req.Name)
	if req.Name != "" {
		if err := text.CheckName("name", req.Name); err != nil {
			return api.JoinResult{}, badReq(err)
		}
	}
	if err := checkUserName(req.UserName); err != nil {
		return api.JoinResult{}, err
	}
	// The person this machine will act for: this data dir's.
	key, psigner, err := s.personKey(req.UserName)
	if err != nil {
		return api.JoinResult{}, err
	}
	// A machine that joins again an org it was removed from fetches a
	// ledger that says so: not a reason to leave (see holdExit).
	release := s.leaving.holdExit()
	defer release()
	org := tok.Cap.Org
	if cur := s.orgID(); cur != "" && cur != org {
		return api.JoinResult{}, api.Errorf(http.StatusConflict, "this node is already in org %s; a node belongs to one org", cur)
	}
	if err := s.alreadyJoined(org); err != nil {
		return api.JoinResult{}, err
	}
	// An early, friendly check on this machine's clock; the witness checks
	// on its own (witness.go), and only that binds.
	if tok.Cap.Expires != 0 && s.now().UnixMilli() > tok.Cap.Expires {
		return api.JoinResult{}, api.Errorf(http.StatusBadRequest, "org key: this invite expired at %s; ask an admin for a new one", api.FormatTime(time.UnixMilli(tok.Cap.Expires)))
	}
	if err := api.CheckBootstrap("bootstrap", req.Bootstrap); err != nil {
		return api.JoinResult{}, api.FieldErrorf(http.StatusBadRequest, "bootstrap", "%v", err)
	}
	addrs := append(slices.Clone(tok.Addrs), req.Bootstrap...) // the key's, then the request's
	for _, a := range s.d.Bootstrap {                          // and the node's --bootstrap
		if !slices.Contains(addrs, a) {
			addrs = append(addrs, a)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := s.d.Host.Connect(cctx, addrs); err != nil {
		return api.JoinResult{}, api.Errorf(http.StatusBadGateway, "could not reach any bootstrap address in the org key or --bootstrap (%v); is the issuing node running and reachable? (a machine that refused three keys from a joiner refuses it for a minute)", err)
	}
	var peers []peer.ID
	for _, a := range addrs {
		if id, err := peerOf(a); err == nil && id != s.d.Machine {
			peers = append(peers, id)
			s.d.Peers.RememberPeer(id.String(), []string{a})
		}
	}
	// The closed org: each bootstrap machine serves the ledger only once
	// this machine proves it holds the key (p2p.AdmitProtocol).
	peers, err = s.admitAt(ctx, peers, tok.Cap)
	if err != nil {
		return api.JoinResult{}, err
	}
	var synced peer.ID
	var lastErr error
	// Catching up with a large ledger takes longer than dialling: at some
	// 20,000 entries a second, a million-entry ledger needs about a minute.
	fctx, fcancel := context.WithTimeout(ctx, 10*time.Minute)
	defer fcancel()
	for _, p := range peers {
		if err := s.d.Ledger.CatchUp(fctx, p, org); err != nil {
			lastErr = err
			continue
		}
		synced = p
		break
	}
	if synced == "" {
		return api.JoinResult{}, api.Errorf(http.StatusBadGateway, "could not fetch the org's ledger: %v", lastErr)
	}
	if got := s.orgID(); got != org {
		return api.JoinResult{}, api.Errorf(http.StatusBadGateway, "the bootstrap peer's ledger does not match org ID %s", org)
	}
	if !s.d.Topics.TopicsJoined() {
		if err := s.d.Topics.JoinTopics(org); err != nil {
			return api.JoinResult{}, err
		}
	}
	// Dry run against a copy of the state, so a refused key leaves no entry.
	name := strings.TrimSpace(req.Name)
	if name == "" {
		name = s.d.Machines.MachineName()
	}
	reg := ledger.MachineRegister{Name: name, Cap: tok.Cap}
	deleg := psigner.SignDelegation(key.Name, s.idStr, org) // this machine acts for key's person in org
	reg.Delegation = &deleg
	if ledger.NeedsWitness(tok.Cap) {
		if reg.Witness, err = s.witnessFor(ctx, tok.Cap, peers); err != nil {
			return api.JoinResult{}, err
		}
	}
	if err := s.d.Ledger.DryRun(ledger.KindMachineReg, reg); err != nil {
		return api.JoinResult{}, refused(err)
	}
	e, err := s.write(ctx, ledger.KindMachineReg, reg)
	if err != nil {
		return api.JoinResult{}, refused(err)
	}
	heads := []cid.Cid{e.CID()}
	for _, p := range peers {
		actx, c := context.WithTimeout(ctx, 10*time.Second)
		_ = p2p.AnnounceHeads(actx, s.d.Host.LibP2P(), p, org, heads)
		c()
	}
	s.d.Topics.AfterJoin(ctx)
	res := api.JoinResult{Org: org, Machine: s.idStr}
	s.snapshot(func(st *ledger.State) {
		res.OrgName = st.Name
		if m := st.Machines[s.idStr]; m != nil {
			res.Status = m.Status
		}
		res.Role = st.Role(s.PersonIn(st))
	})
	return res, nil
}

// admitAt proves this machine's hold of c to each of peers and returns
// those that admitted it; it fails with one line when none did: the first
// refusal (it says why and what to do), or why none could be asked.
func (s *Service) admitAt(ctx context.Context, peers []peer.ID, c ledger.Capability) ([]peer.ID, error) {
	var ok []peer.ID
	var refusal, lastErr error
	for _, p := range peers {
		actx, cancel := context.WithTimeout(ctx, witnessAskTimeout)
		err := s.d.Host.Admit(actx, p, c.Org, c)
		cancel()
		switch {
		case err == nil:
			ok = append(ok, p)
		case errors.Is(err, p2p.ErrAdmitRefused):
			if refusal == nil {
				refusal = err
			}
		default:
			lastErr = err
		}
		if err != nil {
			s.d.Log.Info("admission failed", "peer", p.String(), "err", err)
		}
	}
	switch {
	case len(ok) > 0:
		return ok, nil
	case refusal != nil:
		return nil, api.Errorf(http.StatusForbidden, "%s: refused by the org's machines: %s", capName(c), strings.TrimPrefix(strings.TrimPrefix(refusal.Error(), p2p.ErrAdmitRefused.Error()), ": "))
	case lastErr != nil:
		return nil, api.Errorf(http.StatusBadGateway, "%s: no machine of the org could check it (%v); is the issuing node running and reachable? (a machine that refused three keys from a joiner refuses it for a minute)", capName(c), lastErr)
	}
	return nil, api.Errorf(http.StatusBadGateway, "%s: it names no machine to join through; ask an admin for a new one", capName(c))
}

// alreadyJoined refuses a join of an org this machine is already in (its
// own org key, say, which would otherwise only fail to dial itself), saying
// how it stands.
func (s *Service) alreadyJoined(org string) error {
	if s.orgID() != org {
		return nil
	}
	me := s.idStr
	var msg string
	s.snapshot(func(st *ledger.State) {
		m := st.Machines[me]
		if m == nil || m.Status == ledger.MachineRemoved || m.Status == ledger.MachineRejected {
			return
		}
		name := st.Name
		if name == "" {
			name = org
		}
		msg = fmt.Sprintf("this machine is already in org %s (machine %s)", name, m.Status)
		if role := st.Role(s.PersonIn(st)); role != "" {
			msg = fmt.Sprintf("this machine is already a member of org %s, as %s (machine %s)", name, role, m.Status)
		}
		msg += "; there is nothing to join (see cshare node status)"
		if m.Status == ledger.MachinePending {
			msg += "; an admin approves it with: cshare machine approve " + me
		}
	})
	if msg == "" {
		return nil
	}
	return api.Errorf(http.StatusConflict, "%s", msg)
}

func peerOf(addr string) (peer.ID, error) {
	m, err := ma.NewMultiaddr(addr)
	if err != nil {
		return "", err
	}
	ai, err := peer.AddrInfoFromP2pAddr(m)
	if err != nil {
		return "", err
	}
	return ai.ID, nil
}
