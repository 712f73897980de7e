package replica

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/cshare/cshare/ledger"
)

// TestGateStopsACappedMachine: a machine's chain of 200 entries without
// effect, sent by the machine itself in one answer, is taken up to the
// entry that caps it and the rest refused; the same chain passed on by
// another peer is taken whole, and then the first replica takes the rest
// from that peer: both end on one ledger and one State.
func TestGateStopsACappedMachine(t *testing.T) {
	var d drops
	a, f, gen, reg, chain := floodSetup(t, Config{Dropped: d.add}, 200)
	base := a.Len()

	a.add(f.ID(), chain)
	if got, want := a.Len(), base+ledger.IneffectiveBudget+1; got != want || !a.Capped(f.ID()) {
		t.Fatalf("from the machine itself: %d entries (capped %v), want %d", got, a.Capped(f.ID()), want)
	}
	if got := d.get(DropCapped); got != 200-ledger.IneffectiveBudget-1 {
		t.Fatalf("dropped as capped: %d", got)
	}
	if len(a.waiting) != 0 || len(a.sentBy) != 0 {
		t.Fatalf("left waiting: %d, marked: %d", len(a.waiting), len(a.sentBy))
	}

	b := open(t, t.TempDir(), newSigner(t), Config{})
	if err := b.Import([]*ledger.Entry{gen, reg}); err != nil {
		t.Fatal(err)
	}
	b.add(a.signer.ID(), chain) // passed on by a peer that took it before the cap
	if b.Len() != base+200 || !b.Capped(f.ID()) {
		t.Fatalf("passed on: %d entries (capped %v), want %d", b.Len(), b.Capped(f.ID()), base+200)
	}
	a.add(b.signer.ID(), chain[ledger.IneffectiveBudget+1:])
	if a.Len() != b.Len() || a.StateHash() != b.StateHash() {
		t.Fatalf("after the exchange: %d entries, state %s; the other %d, %s", a.Len(), a.StateHash(), b.Len(), b.StateHash())
	}
}

// TestGateCountsWhatOthersPassOn: the machine pushes the tail of its
// chain itself while this replica lacks the head (the tail waits for its
// parents); another peer then passes on the head in one answer. The part
// that folds them together ends where the machine's budget runs out, so
// the tail it sent itself is refused.
func TestGateCountsWhatOthersPassOn(t *testing.T) {
	var d drops
	a, f, _, _, chain := floodSetup(t, Config{Dropped: d.add}, 100)
	peerB := newSigner(t)
	base := a.Len()
	for _, e := range chain[ledger.IneffectiveBudget+1:] {
		a.add(f.ID(), []*ledger.Entry{e}) // pushed by the machine: they wait
	}
	if a.Len() != base {
		t.Fatalf("orphans folded: %d", a.Len()-base)
	}
	a.add(peerB.ID(), chain[:ledger.IneffectiveBudget+1]) // passed on
	if got, want := a.Len(), base+ledger.IneffectiveBudget+1; got != want || !a.Capped(f.ID()) {
		t.Fatalf("%d entries (capped %v), want %d", got, a.Capped(f.ID()), want)
	}
	if got := d.get(DropCapped); got != 100-ledger.IneffectiveBudget-1 {
		t.Fatalf("dropped as capped: %d", got)
	}
}

// floodSetup opens a replica of a new org where machine f is registered,
// and signs a chain of n entries without effect by f on its registration.
// It returns the replica's genesis and f's registration with the chain.
func floodSetup(t *testing.T, cfg Config, n int) (a *Replica, f *ledger.Signer, gen, reg *ledger.Entry, chain []*ledger.Entry) {
	t.Helper()
	a = open(t, t.TempDir(), newSigner(t), cfg)
	gen, err := a.Write(context.Background(), ledger.KindGenesis, ledger.Genesis{Name: "acme", OrgKeyID: "k0", Settings: ledger.DefaultSettings()})
	if err != nil {
		t.Fatal(err)
	}
	f = newSigner(t)
	now := time.Now().UnixMilli()
	heads, clock := a.Heads()
	key := a.signer.SignCapability(ledger.Capability{Org: a.Org(), Kind: ledger.CapOrgKey, ID: "k0", Role: ledger.RoleMember})
	reg, err = f.Sign(a.Org(), ledger.KindMachineReg, ledger.MachineRegister{Cap: key}, heads, clock, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Import([]*ledger.Entry{reg}); err != nil || !a.Has(reg.CID()) {
		t.Fatalf("the machine's registration: %v", err)
	}
	parent := reg
	for i := range n {
		e, err := f.Sign(a.Org(), ledger.KindMachineReject, ledger.MachineRef{Machine: fmt.Sprintf("nobody-%d", i)}, []cid.Cid{parent.CID()}, parent.Clock, now)
		if err != nil {
			t.Fatal(err)
		}
		chain = append(chain, e)
		parent = e
	}
	return a, f, gen, reg, chain
}
