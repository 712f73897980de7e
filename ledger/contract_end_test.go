package ledger

import (
	"testing"

	"github.com/cshare/cshare/market"
)

// ended checks that contract id ended at the time of entry e, for why:
// deleted (or, never accepted, rejected), its end no later than e's time,
// its cost frozen there; a request holds no GPU.
func (w *marketWorld) ended(id string, e *Entry, why string) {
	w.t.Helper()
	st := w.log.State()
	c := st.Contracts[id]
	p := st.MarketPolicy()
	later := e.Time + 30*market.Day
	if c.Accepted {
		if s := c.State(e.Time, p); s != market.StateDeleted {
			w.t.Fatalf("contract %s is %s after %s", id, s, e.Kind)
		}
		if c.End > e.Time || c.RemovedAt != e.Time {
			w.t.Fatalf("contract %s ends at %d (removed at %d), after the %s at %d", id, c.End, c.RemovedAt, e.Kind, e.Time)
		}
		if c.Cost(later) != c.Cost(e.Time) {
			w.t.Fatalf("contract %s still bills after the %s: %+v, then %+v", id, e.Kind, c.Cost(e.Time), c.Cost(later))
		}
	} else if s := c.State(e.Time, p); s != market.StateRejected || len(c.Alloc.GPUs) != 0 {
		w.t.Fatalf("request %s is %s holding GPUs %v after %s", id, s, c.Alloc.GPUs, e.Kind)
	}
	if got := c.Why(e.Time, p); got != why {
		w.t.Fatalf("contract %s: reason %q, want %q", id, got, why)
	}
}

// TestRenterLeavingEndsContracts: a renter who leaves the org can no
// longer stop their contracts, so the fold ends them at the leave, as it
// cancels their jobs: the running one is deleted and stops billing, the
// request is rejected and holds no GPU, and the GPUs can be rented again.
func TestRenterLeavingEndsContracts(t *testing.T) {
	w := newMarket(t)
	run := w.running(w.alice, 1)
	req := w.request(w.alice, 1)
	w.now += market.Hour
	leave := w.ok(w.alice, KindMemberRemove, MemberRef{Member: w.alice.id})
	w.ended(run, leave, "its renter is no longer a member")
	w.ended(req, leave, "its renter is no longer a member")
	if c := w.log.State().Contracts[run]; c.End != leave.Time || c.Cost(leave.Time).Total != 2_000_000*(c.End-c.Start)/market.Hour {
		t.Fatalf("$2 an hour from %d to the leave at %d costs %+v, ending at %d", c.Start, leave.Time, c.Cost(leave.Time), c.End)
	}
	both := w.request(w.bob, 2)
	if s := w.state(both); s != market.StateRequested {
		st := w.log.State()
		t.Fatalf("bob's request for both GPUs after alice left: %s (%s)", s, st.Contracts[both].Why(w.now, st.MarketPolicy()))
	}
}

// TestRenterRemovedEndsContracts: an admin's removal of a renter ends
// their contracts alike; another renter's contract on the same host runs
// on.
func TestRenterRemovedEndsContracts(t *testing.T) {
	w := newMarket(t)
	run := w.running(w.alice, 1)
	bobs := w.running(w.bob, 1)
	w.now += market.Hour
	rm := w.ok(w.owner, KindMemberRemove, MemberRef{Member: w.alice.id})
	w.ended(run, rm, "its renter is no longer a member")
	if s := w.state(bobs); s != market.StateRunning {
		t.Fatalf("bob's contract is %s after alice's removal", s)
	}
	// A contract already removed keeps its own removal.
	w.ok(w.bob, KindContractRm, ContractRef{Contract: bobs})
	gone := *w.log.State().Contracts[bobs]
	w.ok(w.owner, KindMemberRemove, MemberRef{Member: w.bob.id})
	if c := w.log.State().Contracts[bobs]; c.RemovedAt != gone.RemovedAt || c.End != gone.End || c.Reason != "" {
		t.Fatalf("a deleted contract was ended again: %+v, was %+v", c.Contract, gone.Contract)
	}
}

// TestHostLeavingEndsContracts: when the host person leaves, their
// machines are gone, and so are the contracts they host.
func TestHostLeavingEndsContracts(t *testing.T) {
	w := newMarket(t)
	w.ok(w.alice, KindMachineUpdate, MachineUpdate{Hardware: Hardware{CPUs: 8, MemoryMB: 8192, DiskMB: 1 << 16}})
	so := w.alice.s.SignOffer(w.org, market.Offer{CPUs: 8, MemoryMB: 8192, Price: 1_000_000, Created: w.now, Until: w.now + 10*market.Day})
	e := w.ok(w.bob, KindContractRequest, ContractRequest{Offer: so, Ask: market.Ask{CPUs: 2}, Spec: ContractSpec{Image: "img"}})
	id := ContractIDFor(e)
	w.ok(w.alice, KindContractAccept, ContractRef{Contract: id})
	w.now += market.Hour
	leave := w.ok(w.alice, KindMemberRemove, MemberRef{Member: w.alice.id})
	w.ended(id, leave, "its host is no longer a member")
}

// TestOrgDeleteEndsContracts: org delete ends every contract, whoever
// rents or hosts it, at the delete's time; so does the removal of the
// host machine, which can run none of them any more.
func TestOrgDeleteEndsContracts(t *testing.T) {
	for _, tc := range []struct {
		kind string
		p    func(w *marketWorld) any
		why  string
	}{
		{KindOrgDelete, func(*marketWorld) any { return OrgDelete{Name: "acme"} }, "the org was deleted"},
		{KindMachineRemove, func(w *marketWorld) any { return MachineRef{Machine: w.owner.id} }, "its host machine was removed from the org"},
	} {
		w := newMarket(t)
		a := w.running(w.alice, 1)
		b := w.request(w.bob, 1)
		w.now += market.Hour
		e := w.ok(w.owner, tc.kind, tc.p(w))
		w.ended(a, e, tc.why)
		w.ended(b, e, tc.why)
	}
}

// TestRejectedRequestHoldsNoGPU: a request the host rejects holds no GPU
// from then on: its record names none, and no later request or start is
// told that it holds one.
func TestRejectedRequestHoldsNoGPU(t *testing.T) {
	w := newMarket(t)
	a := w.request(w.alice, 2)
	w.ok(w.owner, KindContractReject, ContractReject{Contract: a, Reason: "maintenance"})
	st := w.log.State()
	if c := st.Contracts[a]; len(c.Alloc.GPUs) != 0 || c.Alloc.CPUs != 0 {
		t.Fatalf("the rejected request holds GPUs %v", c.Alloc.GPUs)
	}
	b := w.request(w.bob, 2)
	if s := w.state(b); s != market.StateRequested {
		t.Fatalf("bob's request after the rejection: %s", s)
	}
	c := w.request(w.alice, 1)
	st = w.log.State()
	if why := st.Contracts[c].Why(w.now, st.MarketPolicy()); why != "1 GPUs asked, 0 free (held: GPU 0 by "+b+", GPU 1 by "+b+")" {
		t.Fatalf("reason %q names another holder than %s", why, b)
	}
}
