package ledger

import (
	"errors"
	"testing"

	"github.com/cshare/cshare/market"
)

// market is a world with a host (the owner's machine, with two GPUs) and
// two renters, alice and bob, members with machines of their own.
type marketWorld struct {
	*world
	alice, bob *actor
	offer      SignedOffer
}

func newMarket(t *testing.T) *marketWorld {
	w := &marketWorld{world: newWorld(t)}
	w.ok(w.owner, KindMachineUpdate, MachineUpdate{Hardware: Hardware{CPUs: 16, MemoryMB: 65536, DiskMB: 1 << 20, GPUs: []GPU{
		{Index: 0, Name: "RTX 4090", MemoryMB: 24576}, {Index: 1, Name: "RTX 4090", MemoryMB: 24576}}}})
	w.alice, w.bob = w.member(20, RoleMember), w.member(21, RoleMember)
	w.offer = w.owner.s.SignOffer(w.org, market.Offer{
		GPUs: []market.GPU{{Index: 0, Name: "RTX 4090", MemoryMB: 24576}, {Index: 1, Name: "RTX 4090", MemoryMB: 24576}},
		CPUs: 16, MemoryMB: 65536, DiskMB: 102400, Price: 2_000_000, Created: w.now, Until: w.now + 100*market.Hour,
	})
	return w
}

func (w *marketWorld) request(a *actor, gpus int64) string {
	w.t.Helper()
	e := w.ok(a, KindContractRequest, ContractRequest{Offer: w.offer, Ask: market.Ask{GPUs: gpus, Duration: 10 * market.Hour},
		Spec: ContractSpec{Image: "cshare-test:latest", Cmd: []string{"sleep", "infinity"}}})
	return ContractIDFor(e)
}

func (w *marketWorld) state(id string) string {
	st := w.log.State()
	return st.Contracts[id].State(w.now, st.MarketPolicy())
}

func TestContractLifecycle(t *testing.T) {
	w := newMarket(t)
	a := w.request(w.alice, 2)
	b := w.request(w.bob, 1) // the first in ledger order has both GPUs
	st := w.log.State()
	if w.state(a) != market.StateRequested || w.state(b) != market.StateRejected {
		t.Fatalf("a %s, b %s: want requested, rejected", w.state(a), w.state(b))
	}
	if c := st.Contracts[a]; c.Renter != w.alice.id || c.Host != w.owner.id || c.Machine != w.alice.id || c.Offer.ID != w.offer.Offer.ID {
		t.Fatalf("contract %+v", c)
	}
	if why := st.Contracts[b].Why(w.now, st.MarketPolicy()); why != "1 GPUs asked, 0 free (held: GPU 0 by "+a+", GPU 1 by "+a+")" {
		t.Fatalf("reason %q", why)
	}

	// Only the host machine accepts; only the renter stops and starts;
	// only the host extends; the renter or the host removes.
	w.denied(ErrNotAuthority, w.alice, KindContractAccept, ContractRef{Contract: a})
	w.ok(w.owner, KindContractAccept, ContractRef{Contract: a})
	w.denied(ErrMalformed, w.owner, KindContractAccept, ContractRef{Contract: a})
	if w.state(a) != market.StateRunning {
		t.Fatalf("a is %s after accept", w.state(a))
	}
	if r := ContractReservations(w.log.State(), w.now); len(r) != 1 || r[0].Machine != w.owner.id || r[0].Slots != 16 || len(r[0].GPUs) != 2 {
		t.Fatalf("reservations %+v", r)
	}
	w.denied(ErrNotAuthority, w.bob, KindContractStop, ContractRef{Contract: a})
	w.denied(ErrNotAuthority, w.owner, KindContractStop, ContractRef{Contract: a})
	w.ok(w.alice, KindContractStop, ContractRef{Contract: a})
	w.denied(ErrMalformed, w.alice, KindContractStop, ContractRef{Contract: a})
	if r := ContractReservations(w.log.State(), w.now); len(r) != 0 {
		t.Fatalf("a stopped contract reserves %+v", r)
	}
	w.ok(w.alice, KindContractStart, ContractRef{Contract: a})
	end := w.log.State().Contracts[a].End
	w.denied(ErrNotAuthority, w.alice, KindContractExtend, ContractExtend{Contract: a, Duration: market.Hour})
	w.ok(w.owner, KindContractExtend, ContractExtend{Contract: a, Duration: market.Hour})
	if got := w.log.State().Contracts[a].End; got != end+market.Hour {
		t.Fatalf("end %d after extend, want %d", got, end+market.Hour)
	}
	w.denied(ErrNotAuthority, w.bob, KindContractRm, ContractRef{Contract: a})
	w.ok(w.alice, KindContractRm, ContractRef{Contract: a})
	if w.state(a) != market.StateDeleted {
		t.Fatalf("a is %s after rm", w.state(a))
	}
	// Unknown contracts and a reject of a deleted one have no effect.
	w.denied(ErrMalformed, w.owner, KindContractReject, ContractReject{Contract: a, Reason: "no"})
	w.denied(ErrMalformed, w.alice, KindContractStop, ContractRef{Contract: "cnope"})

	// Now bob's request fits, and the host rejects it with a reason.
	b2 := w.request(w.bob, 1)
	w.ok(w.owner, KindContractReject, ContractReject{Contract: b2, Reason: "maintenance\x1b[31m"})
	st = w.log.State()
	if why := st.Contracts[b2].Why(w.now, st.MarketPolicy()); why != "maintenance [31m" {
		t.Fatalf("reason %q: control characters must not reach the state", why)
	}
}

func TestContractRequestChecks(t *testing.T) {
	w := newMarket(t)
	req := func(so SignedOffer, spec ContractSpec) ContractRequest {
		return ContractRequest{Offer: so, Ask: market.Ask{GPUs: 1}, Spec: spec}
	}
	spec := ContractSpec{Image: "img"}
	// An offer changed after signing, signed by another machine than it
	// names, or made for another org, is no offer.
	forged := w.offer
	forged.Offer.Price = 1
	w.denied(ErrBadSignature, w.alice, KindContractRequest, req(forged, spec))
	byAlice := w.alice.s.SignOffer(w.org, w.offer.Offer)
	byAlice.Offer.Machine = w.owner.id
	w.denied(ErrBadSignature, w.alice, KindContractRequest, req(byAlice, spec))
	w.denied(ErrMalformed, w.alice, KindContractRequest, req(w.owner.s.SignOffer("other-org", w.offer.Offer), spec))
	// What the contract runs is checked.
	w.denied(ErrMalformed, w.alice, KindContractRequest, req(w.offer, ContractSpec{}))
	w.denied(ErrMalformed, w.alice, KindContractRequest, req(w.offer, ContractSpec{Image: "img", Env: map[string]string{"CSHARE_X": "1"}}))
	// An offer for hardware the machine does not have is rejected with
	// the reason; so is an offer by a machine that is not approved.
	big := w.offer.Offer
	big.GPUs = append(big.GPUs, market.GPU{Index: 2, Name: "RTX 4090", MemoryMB: 24576})
	id := ContractIDFor(w.ok(w.alice, KindContractRequest, req(w.owner.s.SignOffer(w.org, big), spec)))
	st := w.log.State()
	if why := st.Contracts[id].Why(w.now, st.MarketPolicy()); why != "market: bad offer: gpus: the machine has no device 2" {
		t.Fatalf("reason %q", why)
	}
	stranger := newActor(t, 60)
	id = ContractIDFor(w.ok(w.alice, KindContractRequest, req(stranger.s.SignOffer(w.org, w.offer.Offer), spec)))
	if c := w.log.State().Contracts[id]; !c.Rejected {
		t.Fatalf("an offer by a stranger's machine: %s", w.state(id))
	}
	// market.delete_after is an org setting, for admins.
	w.denied(ErrNotAuthority, w.alice, KindOrgUpdate, OrgUpdate{MarketDeleteAfter: i64(market.Hour)})
	w.denied(ErrMalformed, w.owner, KindOrgUpdate, OrgUpdate{MarketDeleteAfter: i64(-1)})
	w.ok(w.owner, KindOrgUpdate, OrgUpdate{MarketDeleteAfter: i64(market.Hour)})
	if p := w.log.State().MarketPolicy(); p.DeleteAfter != market.Hour {
		t.Fatalf("policy %+v", p)
	}
}

// TestContractRaceDeterministic: two renters request the same GPUs
// concurrently (neither saw the other); every order of arrival folds to
// the same State, with the first in ledger order the winner.
func TestContractRaceDeterministic(t *testing.T) {
	w := newMarket(t)
	heads := w.heads()
	ra := w.on(w.alice, KindContractRequest, ContractRequest{Offer: w.offer, Ask: market.Ask{GPUs: 2}, Spec: ContractSpec{Image: "a"}}, heads...)
	rb := w.on(w.bob, KindContractRequest, ContractRequest{Offer: w.offer, Ask: market.Ask{GPUs: 1}, Spec: ContractSpec{Image: "b"}}, heads...)
	base := w.log.Entries()
	l1 := replay(t, append(append([]*Entry{}, base...), ra, rb))
	l2 := replay(t, append(append([]*Entry{}, base...), rb, ra))
	s1, s2 := l1.State(), l2.State()
	if s1.Hash() != s2.Hash() {
		t.Fatal("the order of arrival changed the state")
	}
	first, second := ContractIDFor(ra), ContractIDFor(rb)
	if rb.Key().Less(ra.Key()) {
		first, second = second, first
	}
	p := s1.MarketPolicy()
	if s1.Contracts[first].State(w.now, p) != market.StateRequested || s1.Contracts[second].State(w.now, p) != market.StateRejected {
		t.Fatalf("first %s, second %s", s1.Contracts[first].State(w.now, p), s1.Contracts[second].State(w.now, p))
	}
}

func TestSignedOfferVerify(t *testing.T) {
	w := newMarket(t)
	o, err := w.offer.Verify(w.org)
	if err != nil || o.ID != w.offer.Offer.ID || o.Machine != w.owner.id || len(o.ID) != 16 {
		t.Fatalf("verify: %+v %v", o, err)
	}
	bad := w.offer
	bad.Offer.CPUs = 0
	if _, err := bad.Verify(w.org); !errors.Is(err, ErrMalformed) {
		t.Fatalf("an offer with 0 CPUs: %v", err)
	}
}
