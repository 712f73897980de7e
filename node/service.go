package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/internal/userkey"
	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/jobspec"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/node/marketsvc"
	"github.com/cshare/cshare/p2p"
)

var _ api.Service = (*Node)(nil)

func randomID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func errNoOrg() error { return api.NoOrg() }

// refused turns a fold verdict into an API error.
func refused(err error) error { return api.Refused(err) }

func (n *Node) needOrg() error {
	if n.orgID() == "" {
		return errNoOrg()
	}
	return nil
}

func (n *Node) needAdmin(what string) error {
	if err := n.needOrg(); err != nil {
		return err
	}
	var ok bool
	n.snapshot(func(st *ledger.State) { ok = st.IsAdmin(n.personIn(st)) })
	if !ok {
		return n.refuse("only the owner and admins may " + what)
	}
	return nil
}

// Status implements api.Service.
func (n *Node) Status(ctx context.Context) (api.NodeStatus, error) {
	up := n.now().Sub(n.started).Truncate(time.Second)
	s := api.NodeStatus{ID: n.id.String(), Uptime: up.String(), UptimeSeconds: int64(up.Seconds()), Version: Version,
		API: n.apiAddr, Addrs: n.host.Addrs(), DataDir: n.opts.DataDir, PeerIDs: []string{}, Heads: []string{}}
	for _, p := range n.host.Peers() {
		s.PeerIDs = append(s.PeerIDs, p.String())
	}
	s.Peers = len(s.PeerIDs)
	s.Reconnecting = s.Peers == 0 && n.reconnecting()
	lg, unlock := n.rep.ReadLog()
	st := lg.State()
	heads, _ := lg.Heads()
	for _, h := range heads {
		s.Heads = append(s.Heads, h.String())
	}
	s.Entries = lg.Len()
	s.Org, s.OrgName = st.Org, st.Name
	if st.Org != "" {
		s.StateHash = st.Hash() // as org show gives it: converged nodes agree
	} else {
		s.Left = n.lastLeft()
	}
	if st.Org != "" {
		s.Person = n.personIn(st)
		s.PersonName = personName(st, s.Person)
	}
	s.Role = st.Role(s.Person)
	s.Name = n.machineName()
	if m := st.Machines[s.ID]; m != nil {
		s.Name = m.Name
	}
	unlock()
	if s.Person == "" {
		// In no org yet: the person key's, if this data dir has one.
		if k, err := userkey.Load(n.opts.DataDir); err == nil {
			s.Person, s.PersonName = k.ID, k.Name
		}
	}
	s.Status = n.machineStatus(s.ID, n.now())
	if s.Org == "" {
		s.Status = "no org"
	}
	s.PlanHash, s.PlanAgree, s.PlanPeers = n.planAgreement()
	if n.gate.closed.Load() {
		_, since, _ := n.gate.state()
		s.CatchingUp, s.CatchingUpSince = true, api.FormatTime(since)
	}
	return s, nil
}

func (n *Node) machineName() string {
	if n.opts.Name != "" {
		return n.opts.Name
	}
	if n.cfg.Name != "" {
		return n.cfg.Name
	}
	// A host name that is no valid machine name (too long, say) is not
	// used: the ledger then names the machine by its short ID.
	h, _ := os.Hostname()
	if text.CheckName("name", h) != nil {
		return ""
	}
	return h
}

// Stop implements api.Service.
func (n *Node) Stop(ctx context.Context) error {
	select {
	case <-n.stopped:
	default:
		close(n.stopped)
	}
	return nil
}

// CreateOrg implements api.Service.
func (n *Node) CreateOrg(ctx context.Context, req api.OrgCreate) (api.KeyResult, error) {
	if org := n.orgID(); org != "" {
		return api.KeyResult{}, api.Errorf(http.StatusConflict, "this node is already in org %s; a node belongs to one org", org)
	}
	req.Name = strings.TrimSpace(req.Name)
	if err := text.CheckName("name", req.Name); err != nil {
		return api.KeyResult{}, badReq(err)
	}
	if err := text.CheckDescription("description", req.Description); err != nil {
		return api.KeyResult{}, badReq(err)
	}
	if err := checkUserName(req.UserName); err != nil {
		return api.KeyResult{}, err
	}
	key, psigner, err := n.personKey(req.UserName)
	if err != nil {
		return api.KeyResult{}, err
	}
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	owner := psigner.SignDelegation(key.Name, n.idStr, ledger.GenesisOrg(nonce))
	g := ledger.Genesis{Name: req.Name, Description: req.Description, MachineName: n.machineName(),
		OrgKeyID: randomID(), Settings: ledger.DefaultSettings(), Nonce: nonce, Owner: &owner}
	e, err := n.write(ctx, ledger.KindGenesis, g)
	if err != nil {
		return api.KeyResult{}, refused(err)
	}
	if err := n.joinTopics(e.CID().String()); err != nil {
		return api.KeyResult{}, err
	}
	n.afterJoin(ctx)
	return n.OrgKey(ctx, false)
}

// afterJoin publishes this machine's hardware and limits and a heartbeat.
func (n *Node) afterJoin(ctx context.Context) {
	n.publishMachineUpdate(ctx)
	n.beat(ctx)
	n.spawn(n.learnMachines)
}

// Org implements api.Service.
func (n *Node) Org(ctx context.Context) (api.OrgInfo, error) {
	if err := n.needOrg(); err != nil {
		return api.OrgInfo{}, err
	}
	var o api.OrgInfo
	lg, unlock := n.rep.ReadLog()
	defer unlock()
	st := lg.State()
	o = api.OrgInfo{ID: st.Org, Name: st.Name, Description: st.Description, Owner: st.Owner, OwnerName: personName(st, st.Owner), StateHash: st.Hash(),
		Entries: lg.Len(), Settings: st.Settings, Members: len(st.Members), Machines: len(st.Machines),
		Created: api.FormatTime(time.UnixMilli(st.Created))}
	heads, _ := lg.Heads()
	for _, h := range heads {
		o.Heads = append(o.Heads, h.String())
	}
	return o, nil
}

// OrgKey implements api.Service: the org key is rebuilt from the current key
// ID and signed by this node, which must be an admin.
func (n *Node) OrgKey(ctx context.Context, rotate bool) (api.KeyResult, error) {
	if err := n.needAdmin("print or rotate the org key"); err != nil {
		return api.KeyResult{}, err
	}
	if rotate {
		if _, err := n.write(ctx, ledger.KindOrgKey, ledger.OrgKey{KeyID: randomID()}); err != nil {
			return api.KeyResult{}, refused(err)
		}
	}
	var org, keyID string
	n.snapshot(func(st *ledger.State) { org, keyID = st.Org, st.OrgKeyID })
	c := n.signer.SignCapability(ledger.Capability{Org: org, Kind: ledger.CapOrgKey, ID: keyID, Role: ledger.RoleMember})
	return api.KeyResult{Org: org, Key: ledger.Token{Cap: c, Addrs: n.bootstrapAddrs()}.Encode(), Role: ledger.RoleMember}, nil
}

func (n *Node) bootstrapAddrs() []string {
	addrs := n.host.Addrs()
	sort.SliceStable(addrs, func(i, j int) bool {
		// Prefer non-loopback addresses: they work from other machines.
		li, lj := strings.Contains(addrs[i], "/127.0.0.1/") || strings.Contains(addrs[i], "/::1/"), strings.Contains(addrs[j], "/127.0.0.1/") || strings.Contains(addrs[j], "/::1/")
		return !li && lj
	})
	if len(addrs) > 8 {
		addrs = addrs[:8]
	}
	return addrs
}

// Invite implements api.Service.
func (n *Node) Invite(ctx context.Context, req api.InviteRequest) (api.KeyResult, error) {
	if err := n.needAdmin("issue invites"); err != nil {
		return api.KeyResult{}, err
	}
	if req.Role == "" {
		req.Role = ledger.RoleMember
	}
	if req.Role != ledger.RoleMember && req.Role != ledger.RoleAdmin {
		return api.KeyResult{}, api.FieldErrorf(http.StatusBadRequest, "role", "role: %q is not a role an invite can grant; allowed: member, admin", api.Ellipsize(req.Role))
	}
	if req.Uses < 0 || req.Uses > 1_000_000 {
		return api.KeyResult{}, api.FieldErrorf(http.StatusBadRequest, "uses", "uses: %d is %s; allowed: 0 (unlimited) to 1000000", req.Uses,
			map[bool]string{true: "below the minimum 0", false: "above the maximum 1000000"}[req.Uses < 0])
	}
	var expires int64
	switch req.Expires {
	case "":
		req.Expires = "72h"
		fallthrough
	default:
		if req.Expires == "0" || req.Expires == "never" {
			break
		}
		d, err := time.ParseDuration(req.Expires)
		if err != nil || d <= 0 {
			return api.KeyResult{}, api.FieldErrorf(http.StatusBadRequest, "expires", "expires: %q is not a positive duration; allowed: a duration like 72h or 30m, or 0 for never", api.Ellipsize(req.Expires))
		}
		expires = n.now().Add(d).UnixMilli()
	}
	org := n.orgID()
	c := n.signer.SignCapability(ledger.Capability{Org: org, Kind: ledger.CapInvite, ID: randomID(), Role: req.Role, Expires: expires, Uses: req.Uses})
	res := api.KeyResult{Org: org, Key: ledger.Token{Cap: c, Addrs: n.bootstrapAddrs()}.Encode(), Role: req.Role, Uses: req.Uses}
	if expires != 0 {
		res.Expires = api.FormatTime(time.UnixMilli(expires))
	}
	return res, nil
}

// SetSettings implements api.Service.
func (n *Node) SetSettings(ctx context.Context, req api.SettingsRequest) (api.OrgInfo, error) {
	if err := n.needAdmin("change org settings"); err != nil {
		return api.OrgInfo{}, err
	}
	if len(req.Set) == 0 {
		return api.OrgInfo{}, api.Errorf(http.StatusBadRequest, "nothing to set; give KEY=VALUE, e.g. smartshare.mode=jobs")
	}
	var u ledger.OrgUpdate
	var cur ledger.Settings
	n.snapshot(func(st *ledger.State) { cur = st.Settings })
	for _, k := range slices.Sorted(maps.Keys(req.Set)) {
		v := req.Set[k]
		switch k {
		case "name":
			s := strings.TrimSpace(v)
			if err := text.CheckName("name", s); err != nil {
				return api.OrgInfo{}, badReq(err)
			}
			u.Name = &s
		case "description":
			s := v
			if err := text.CheckDescription("description", s); err != nil {
				return api.OrgInfo{}, badReq(err)
			}
			u.Description = &s
		case "require_machine_approval":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return api.OrgInfo{}, api.FieldErrorf(http.StatusBadRequest, k, "require_machine_approval: %q is not true or false; allowed: true, false", api.Ellipsize(v))
			}
			u.RequireMachineApproval = &b
		case "smartshare.mode":
			s := v
			u.SmartShareMode = &s
			cur.SmartShare.Mode = v
		case "smartshare.preempt_policy":
			s := v
			u.PreemptPolicy = &s
			cur.SmartShare.PreemptPolicy = v
		case "smartshare.default_max_cpus", "smartshare.max_cpus_limit":
			x, err := jobspec.ParseMaxCPUs(v)
			if err != nil {
				return api.OrgInfo{}, badReq(jobspec.Rename(err, k))
			}
			if k == "smartshare.default_max_cpus" {
				u.DefaultMaxCPUs, cur.SmartShare.DefaultMaxCPUs = &x, x
			} else {
				u.MaxCPUsLimit, cur.SmartShare.MaxCPUsLimit = &x, x
			}
		case "market.delete_after":
			d, err := marketsvc.ParseDeleteAfter(v)
			if err != nil {
				return api.OrgInfo{}, err
			}
			u.MarketDeleteAfter = &d
		default:
			return api.OrgInfo{}, api.FieldErrorf(http.StatusBadRequest, k, "unknown setting %q; allowed: name, description, require_machine_approval, smartshare.mode, smartshare.preempt_policy, smartshare.default_max_cpus, smartshare.max_cpus_limit, market.delete_after", api.Ellipsize(k))
		}
	}
	if err := ledger.ValidateSettings(cur.SmartShare); err != nil {
		field, _, _ := strings.Cut(err.Error(), ": ") // ValidateSettings names the setting first
		return api.OrgInfo{}, api.FieldErrorf(http.StatusBadRequest, field, "%v", err)
	}
	if _, err := n.write(ctx, ledger.KindOrgUpdate, u); err != nil {
		return api.OrgInfo{}, refused(err)
	}
	return n.Org(ctx)
}

// Join implements api.Service: dial the bootstrap peers in the key, fetch and
// check the ledger against the org ID, and write machine.register.
func (n *Node) Join(ctx context.Context, req api.JoinRequest) (api.JoinResult, error) {
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
	key, psigner, err := n.personKey(req.UserName)
	if err != nil {
		return api.JoinResult{}, err
	}
	// A machine that joins again an org it was removed from fetches a
	// ledger that says so: not a reason to leave (see holdExit).
	release := n.holdExit()
	defer release()
	org := tok.Cap.Org
	if cur := n.orgID(); cur != "" && cur != org {
		return api.JoinResult{}, api.Errorf(http.StatusConflict, "this node is already in org %s; a node belongs to one org", cur)
	}
	if err := n.alreadyJoined(org); err != nil {
		return api.JoinResult{}, err
	}
	// An early, friendly check on this machine's clock; the witness checks
	// on its own (witness.go), and only that binds.
	if tok.Cap.Expires != 0 && n.now().UnixMilli() > tok.Cap.Expires {
		return api.JoinResult{}, api.Errorf(http.StatusBadRequest, "org key: this invite expired at %s; ask an admin for a new one", api.FormatTime(time.UnixMilli(tok.Cap.Expires)))
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := n.host.Connect(cctx, tok.Addrs); err != nil {
		return api.JoinResult{}, api.Errorf(http.StatusBadGateway, "could not reach any bootstrap address in the org key (%v); is the issuing node running and reachable? (a machine that refused three keys from a joiner refuses it for a minute)", err)
	}
	var peers []peer.ID
	for _, a := range tok.Addrs {
		if id, err := peerOf(a); err == nil && id != n.id {
			peers = append(peers, id)
			n.rememberPeer(id.String(), []string{a})
		}
	}
	// The closed org: each bootstrap machine serves the ledger only once
	// this machine proves it holds the key (p2p.AdmitProtocol).
	peers, err = n.admitAt(ctx, peers, tok.Cap)
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
		if err := n.rep.CatchUp(fctx, p, org); err != nil {
			lastErr = err
			continue
		}
		synced = p
		break
	}
	if synced == "" {
		return api.JoinResult{}, api.Errorf(http.StatusBadGateway, "could not fetch the org's ledger: %v", lastErr)
	}
	if got := n.orgID(); got != org {
		return api.JoinResult{}, api.Errorf(http.StatusBadGateway, "the bootstrap peer's ledger does not match org ID %s", org)
	}
	n.mu.RLock()
	topicsJoined := n.org != nil
	n.mu.RUnlock()
	if !topicsJoined {
		if err := n.joinTopics(org); err != nil {
			return api.JoinResult{}, err
		}
	}
	// Dry run against a copy of the state, so a refused key leaves no entry.
	name := strings.TrimSpace(req.Name)
	if name == "" {
		name = n.machineName()
	}
	reg := ledger.MachineRegister{Name: name, Cap: tok.Cap}
	deleg := psigner.SignDelegation(key.Name, n.idStr, org) // this machine acts for key's person in org
	reg.Delegation = &deleg
	if ledger.NeedsWitness(tok.Cap) {
		if reg.Witness, err = n.witnessFor(ctx, tok.Cap, peers); err != nil {
			return api.JoinResult{}, err
		}
	}
	if err := n.dryRun(ledger.KindMachineReg, reg); err != nil {
		return api.JoinResult{}, refused(err)
	}
	e, err := n.write(ctx, ledger.KindMachineReg, reg)
	if err != nil {
		return api.JoinResult{}, refused(err)
	}
	heads := []cidT{e.CID()}
	for _, p := range peers {
		actx, c := context.WithTimeout(ctx, 10*time.Second)
		_ = p2p.AnnounceHeads(actx, n.host.LibP2P(), p, org, heads)
		c()
	}
	n.afterJoin(ctx)
	res := api.JoinResult{Org: org, Machine: n.id.String()}
	n.snapshot(func(st *ledger.State) {
		res.OrgName = st.Name
		if m := st.Machines[n.id.String()]; m != nil {
			res.Status = m.Status
		}
		res.Role = st.Role(n.personIn(st))
	})
	return res, nil
}

// admitAt proves this machine's hold of c to each of peers and returns
// those that admitted it; it fails with one line when none did: the first
// refusal (it says why and what to do), or why none could be asked.
func (n *Node) admitAt(ctx context.Context, peers []peer.ID, c ledger.Capability) ([]peer.ID, error) {
	var ok []peer.ID
	var refusal, lastErr error
	for _, p := range peers {
		actx, cancel := context.WithTimeout(ctx, witnessAskTimeout)
		err := n.host.Admit(actx, p, c.Org, c)
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
			n.log.Info("admission failed", "peer", p.String(), "err", err)
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
func (n *Node) alreadyJoined(org string) error {
	if n.orgID() != org {
		return nil
	}
	me := n.id.String()
	var msg string
	n.snapshot(func(st *ledger.State) {
		m := st.Machines[me]
		if m == nil || m.Status == ledger.MachineRemoved || m.Status == ledger.MachineRejected {
			return
		}
		name := st.Name
		if name == "" {
			name = org
		}
		msg = fmt.Sprintf("this machine is already in org %s (machine %s)", name, m.Status)
		if role := st.Role(n.personIn(st)); role != "" {
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

// dryRun applies a would-be entry of this node to a copy of the state.
func (n *Node) dryRun(kind string, payload any) error { return n.rep.DryRun(kind, payload) }
