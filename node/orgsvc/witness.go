package orgsvc

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/p2p"
)

// Witnessed redemptions (issue 17): an invite, or an org key with an expiry
// or a count of uses (ledger.NeedsWitness), admits a machine only with a
// witness, an approved machine's countersignature "machine J presented this
// capability at my time T". The fold checks T against the expiry and counts
// uses in ledger order, so a joiner that back-dates its register or ignores
// the count gains nothing. This file is both sides: a node witnesses for
// joiners (p2p.WitnessProtocol), and Join asks for a witness.

// Witness limits.
const (
	// witnessHold is how long a witnessed redemption counts as a use on
	// the witness before its register arrives (a joiner that got a witness
	// and vanished frees the use again after it).
	witnessHold = 2 * time.Minute
	// maxHeld caps the redemptions held at once (over every capability).
	maxHeld = 4096
	// witnessAskTimeout bounds one witness request during a join.
	witnessAskTimeout = 15 * time.Second
)

// witnessBook is the redemptions this node witnessed whose registers it has
// not seen yet: two joiners that ask the same machine at once for the last
// use of an invite do not both get a witness.
type witnessBook struct {
	mu   sync.Mutex
	held map[string]map[string]time.Time // cap use key -> joiner -> witnessed at (node clock)
}

// capUseKey is the key of State.CapUses for c (as the fold counts).
func capUseKey(c ledger.Capability) string { return c.Kind + "/" + c.ID }

// capName is how a refusal names the capability.
func capName(c ledger.Capability) string {
	if c.Kind == ledger.CapInvite {
		return "invite"
	}
	return "org key"
}

// witnessSource serves p2p.WitnessProtocol and p2p.AdmitProtocol for the
// service.
type witnessSource Service

// WitnessSource is what the node serves on p2p.WitnessProtocol and
// p2p.AdmitProtocol.
func (s *Service) WitnessSource() interface {
	p2p.WitnessSource
	p2p.AdmitSource
} {
	return (*witnessSource)(s)
}

// Witness implements p2p.WitnessSource: it countersigns joiner's redemption
// of c if this machine is an approved machine of org, c is signed by an
// admin, is current (an org key), has not expired on this machine's clock
// and has uses left. A refusal is one line saying what to do.
func (w *witnessSource) Witness(org string, c ledger.Capability, joiner peer.ID) (ledger.Witness, error) {
	s := (*Service)(w)
	now := s.now()
	j := joiner.String()
	var refusal error
	s.snapshot(func(st *ledger.State) {
		me := st.Machines[s.idStr]
		if refusal = redeemableHere(st, s.idStr, org, c, now); refusal == nil {
			registered := func(id string) bool {
				m := st.Machines[id]
				return m != nil && (m.Status == ledger.MachineApproved || m.Status == ledger.MachinePending)
			}
			refusal = s.witnessed.hold(c, j, st.CapUses[capUseKey(c)], now, me.Name, registered)
		}
	})
	if refusal != nil {
		s.d.Log.Info("refused to witness a redemption", "joiner", j, "kind", c.Kind, "cap", c.ID, "why", refusal)
		return ledger.Witness{}, refusal
	}
	s.d.Log.Info("witnessed a redemption", "joiner", j, "kind", c.Kind, "cap", c.ID)
	return s.d.Signer.SignWitness(c, j, now.UnixMilli()), nil
}

// Admit implements p2p.AdmitSource: a joiner that presents c may fetch
// the ledger to join org if this machine is an approved machine of org and
// c could be redeemed now (as Witness checks it, uses held aside). A
// rotated org key, an expired or spent invite, or one not signed by an
// admin is refused, with a one-line reason.
func (w *witnessSource) Admit(org string, c ledger.Capability, joiner peer.ID) error {
	s := (*Service)(w)
	now := s.now()
	var refusal error
	s.snapshot(func(st *ledger.State) { refusal = redeemableHere(st, s.idStr, org, c, now) })
	if refusal != nil {
		s.d.Log.Info("refused a joiner", "joiner", joiner.String(), "kind", c.Kind, "cap", c.ID, "why", refusal)
	}
	return refusal
}

// checkRedeemable is why c cannot be redeemed now in st, on the clock of
// machine name ("" if it can, uses aside from those held).
func checkRedeemable(st *ledger.State, c ledger.Capability, name string, now time.Time) string {
	what := capName(c)
	if !c.Verify() {
		return fmt.Sprintf("the %s's signature does not verify; copy the whole %s again", what, what)
	}
	id, err := issuerID(c)
	if err != nil {
		return fmt.Sprintf("the %s's issuer key is not an Ed25519 key; ask an admin for a new %s", what, what)
	}
	// The issuer is a machine; its person must be an admin, through an
	// approved machine (as the fold has it).
	if im := st.Machines[id]; im == nil || im.Status != ledger.MachineApproved || !st.IsAdmin(im.Owner) {
		return fmt.Sprintf("the %s was issued by machine %s, which is not an approved machine of an admin in machine %s's ledger; ask a current admin for a new %s", what, id, name, what)
	}
	switch c.Kind {
	case ledger.CapOrgKey:
		if c.ID != st.OrgKeyID {
			return "this org key was rotated; ask an admin for the current one (cshare org key)"
		}
		if c.Role != ledger.RoleMember {
			return fmt.Sprintf("an org key admits members only, not %q; ask an admin for an invite", c.Role)
		}
	case ledger.CapInvite:
		if c.Role != ledger.RoleMember && c.Role != ledger.RoleAdmin {
			return fmt.Sprintf("an invite grants member or admin, not %q; ask an admin for a new invite", c.Role)
		}
	}
	if c.Expires != 0 && now.UnixMilli() > c.Expires {
		return fmt.Sprintf("this %s expired at %s (clock of machine %s); ask an admin for a new one", what, api.FormatTime(time.UnixMilli(c.Expires)), name)
	}
	if c.Uses != 0 && st.CapUses[capUseKey(c)] >= c.Uses {
		return fmt.Sprintf("this %s has been used %d of %d times; ask an admin for a new one", what, st.CapUses[capUseKey(c)], c.Uses)
	}
	return ""
}

// issuerID is the machine ID of c's issuer.
func issuerID(c ledger.Capability) (string, error) {
	k, err := crypto.UnmarshalEd25519PublicKey(c.Issuer)
	if err != nil {
		return "", err
	}
	id, err := peer.IDFromPublicKey(k)
	if err != nil {
		return "", err
	}
	return id.String(), nil
}

// hold counts joiner's redemption of c as a use until its register arrives
// (registered says so) or witnessHold passes, refusing when used (the
// ledger's count) and the other joiners' held redemptions leave no use for
// it. Asking again renews joiner's own hold. Witness calls it under the
// replica's read lock; the book's lock is never held while taking another.
func (b *witnessBook) hold(c ledger.Capability, joiner string, used int64, now time.Time, name string, registered func(string) bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held == nil {
		b.held = map[string]map[string]time.Time{}
	}
	total := 0
	for k, js := range b.held {
		for j, at := range js {
			if now.Sub(at) > witnessHold || at.After(now.Add(witnessHold)) || registered(j) {
				delete(js, j)
			}
		}
		if len(js) == 0 {
			delete(b.held, k)
		}
		total += len(js)
	}
	if c.Uses == 0 {
		return nil // unlimited: nothing to hold
	}
	key := capUseKey(c)
	js := b.held[key]
	others := int64(len(js))
	if _, ok := js[joiner]; ok {
		others--
	}
	if used+others >= c.Uses {
		return fmt.Errorf("this %s has been used %d of %d times and machine %s is witnessing %d more redemption(s) of it now; try again in %s or ask an admin for a new one",
			capName(c), used, c.Uses, name, others, witnessHold)
	}
	if _, ok := js[joiner]; !ok && total >= maxHeld {
		return fmt.Errorf("machine %s is witnessing %d redemptions now; try again in %s", name, total, witnessHold)
	}
	if js == nil {
		js = map[string]time.Time{}
		b.held[key] = js
	}
	js[joiner] = now
	return nil
}

// witnessFor asks for a witness of this machine's redemption of c, during
// a join: the bootstrap peers of the key first, then any other connected
// approved machine of the org. It fails with one line: the refusal of the
// first machine that refused (they say why and what to do), or that no
// machine could be asked.
func (s *Service) witnessFor(ctx context.Context, c ledger.Capability, bootstrap []peer.ID) (*ledger.Witness, error) {
	asked := map[peer.ID]bool{s.d.Machine: true}
	var order []peer.ID
	for _, p := range bootstrap {
		if !asked[p] {
			asked[p] = true
			order = append(order, p)
		}
	}
	for _, p := range s.d.Host.Peers() {
		if !asked[p] && s.d.Ledger.IsApproved(p) {
			asked[p] = true
			order = append(order, p)
		}
	}
	var refusal, lastErr error
	for _, p := range order {
		actx, cancel := context.WithTimeout(ctx, witnessAskTimeout)
		w, err := p2p.RequestWitness(actx, s.d.Host.LibP2P(), p, c.Org, c)
		cancel()
		if err == nil {
			return &w, nil
		}
		s.d.Log.Info("witness request failed", "peer", p.String(), "err", err)
		if errors.Is(err, p2p.ErrWitnessRefused) && refusal == nil {
			refusal = err
		}
		lastErr = err
	}
	what := capName(c)
	switch {
	case refusal != nil:
		return nil, api.Errorf(http.StatusForbidden, "%s: refused by the org's machines: %s", what, strings.TrimPrefix(strings.TrimPrefix(refusal.Error(), p2p.ErrWitnessRefused.Error()), ": "))
	case lastErr != nil:
		return nil, api.Errorf(http.StatusBadGateway, "%s: no machine of the org could witness this redemption (%v); try again when the issuing machine is running and reachable", what, lastErr)
	default:
		return nil, api.Errorf(http.StatusBadGateway, "%s: no approved machine of the org is connected to witness this redemption; try again when the issuing machine is running and reachable", what)
	}
}

// redeemableHere is why machine self may not vouch for c in org at now
// (witness or admission), or nil: it must be an approved machine of org,
// the org not deleted, and c redeemable on this machine's clock.
func redeemableHere(st *ledger.State, self, org string, c ledger.Capability, now time.Time) error {
	me := st.Machines[self]
	switch {
	case st.Org == "" || st.Org != org:
		return fmt.Errorf("machine %s is not in org %s; ask a machine of that org", self, org)
	case me == nil || me.Status != ledger.MachineApproved:
		return fmt.Errorf("machine %s is not an approved machine of org %s; ask another machine of the org", self, org)
	case st.Deleted:
		return fmt.Errorf("org %s was deleted; there is nothing to join", st.Name)
	}
	if why := checkRedeemable(st, c, me.Name, now); why != "" {
		return errors.New(why)
	}
	return nil
}
