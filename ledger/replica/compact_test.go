package replica

import (
	"context"
	"testing"

	"github.com/ipfs/go-cid"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/store"
)

// TestCompactAndReopen: a replica compacted to a barrier holds only the
// entries from it on, reaches the same State as one holding everything,
// links a late entry whose parent is below its start, serves the whole
// ledger to a new replica from its store, opens again at the barrier
// (without reading what is below it), and finishes a move cut short.
func TestCompactAndReopen(t *testing.T) {
	ctx := context.Background()
	owner := newSigner(t)
	dir := t.TempDir()
	src := open(t, dir, owner, Config{})
	org := genesis(t, src)
	old := writeN(t, src, 40)
	if _, err := src.WriteCheckpoint(ctx); err != nil {
		t.Fatal(err)
	}
	writeN(t, src, 30)
	if _, err := src.WriteCheckpoint(ctx); err != nil {
		t.Fatal(err)
	}
	writeN(t, src, 10)

	full := open(t, t.TempDir(), newSigner(t), Config{})
	lg, unlock := src.ReadLog()
	all := lg.Entries()
	unlock()
	if err := full.Import(all); err != nil {
		t.Fatal(err)
	}
	if err := src.CompactTo(3); err == nil {
		t.Fatal("compacted to a barrier the chain does not have")
	}
	if err := src.CompactTo(1); err != nil {
		t.Fatal(err)
	}
	if s, top := src.Start(); s != 1 || top != 2 || src.Len() >= len(all)-40 {
		t.Fatalf("after CompactTo(1): start %d top %d, %d entries of %d", s, top, src.Len(), len(all))
	}
	if err := src.Compact(); err != nil {
		t.Fatal(err)
	}
	if s, _ := src.Start(); s != 2 || src.Len() > 12 || src.StateHash() != full.StateHash() {
		t.Fatalf("after Compact: start %d, %d entries, same state %v", s, src.Len(), src.StateHash() == full.StateHash())
	}
	if !src.st.InHistory(old[3].CID()) || src.st.InHistory(all[len(all)-1].CID()) {
		t.Fatal("the history holds the wrong entries")
	}

	// A late entry on a parent far below the start links and folds as on
	// the replica that holds everything.
	p := old[5]
	late, err := owner.Sign(org, ledger.KindOrgKey, ledger.OrgKey{KeyID: "late"}, []cid.Cid{p.CID()}, p.Clock, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*Replica{src, full} {
		if err := r.Import([]*ledger.Entry{late}); err != nil {
			t.Fatal(err)
		}
		if !r.Has(late.CID()) {
			t.Fatal("the late entry was not added")
		}
	}
	if src.StateHash() != full.StateHash() || src.Snapshot().State.OrgKeyID != full.Snapshot().State.OrgKeyID {
		t.Fatal("the late entry folds differently on the compacted replica")
	}
	// An entry below the start sent again is not added again.
	if err := src.Import([]*ledger.Entry{old[7]}); err != nil || src.Has(old[7].CID()) {
		t.Fatalf("an entry below the start was added again: %v", err)
	}

	// A new replica fetches the whole ledger from the compacted one.
	fresh := open(t, t.TempDir(), newSigner(t), Config{Fetch: serve(src)})
	if err := fresh.CatchUp(ctx, "", org); err != nil {
		t.Fatal(err)
	}
	if fresh.StateHash() != full.StateHash() || fresh.Len() != full.Len() {
		t.Fatalf("fetched from the compacted replica: %d entries of %d, same state %v", fresh.Len(), full.Len(), fresh.StateHash() == full.StateHash())
	}

	// Open starts at the stored barrier; entries below it left among the
	// blocks (a move cut short) go to the history.
	hash, n := src.StateHash(), src.Len()
	src.Close()
	if err := src.st.PutBlocks([]store.Block{{CID: old[9].CID(), Data: old[9].Bytes()}}); err != nil {
		t.Fatal(err)
	}
	_ = src.st.Close()
	st, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	again, err := Open(st, owner, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if again.StateHash() != hash || again.Len() != n {
		t.Fatalf("reopened: %d entries (want %d), same state %v", again.Len(), n, again.StateHash() == hash)
	}
	if s, _ := again.Start(); s != 2 {
		t.Fatalf("reopened at depth %d, want 2", s)
	}
	blocks := 0
	_ = st.ForEachBlock(func(cid.Cid, []byte) error { blocks++; return nil })
	if blocks > n+2 || !st.InHistory(old[9].CID()) {
		t.Fatalf("after reopening: %d blocks outside the history (the Log holds %d)", blocks, n)
	}
	writeN(t, again, 1)
}

// TestJoinedReplicaSyncs: a replica that joined at a checkpoint fetches
// from a peer holding all of history, whose answer reaches below the
// checkpoint (the fetch asks a margin below the heads): it drops what
// sorts below its start and converges without walking further down. It
// then compacts to the next checkpoint and opens again there.
func TestJoinedReplicaSyncs(t *testing.T) {
	ctx := context.Background()
	src := open(t, t.TempDir(), newSigner(t), Config{})
	org := genesis(t, src)
	writeN(t, src, 200)
	if _, err := src.WriteCheckpoint(ctx); err != nil {
		t.Fatal(err)
	}
	writeN(t, src, 3)
	o, ok := src.offer()
	if !ok {
		t.Fatal("no offer")
	}
	d := &drops{}
	jdir := t.TempDir()
	j := open(t, jdir, newSigner(t), Config{Fetch: serve(src), Dropped: d.add})
	if err := j.JoinAt(org, o); err != nil {
		t.Fatal(err)
	}
	n := j.Len()
	writeN(t, src, 5)
	if err := j.CatchUp(ctx, "", org); err != nil {
		t.Fatal(err)
	}
	if j.StateHash() != src.StateHash() || j.Len() != n+5 {
		t.Fatalf("after the fetch: %d entries (want %d), same state %v", j.Len(), n+5, j.StateHash() == src.StateHash())
	}
	// Without recognising them, it walked down to the genesis and
	// dropped all of history as entries that do not link.
	if k := d.get(DropInvalid); k != 0 {
		t.Fatalf("%d entries dropped as invalid", k)
	}

	if _, err := src.WriteCheckpoint(ctx); err != nil {
		t.Fatal(err)
	}
	writeN(t, src, 2)
	if err := j.CatchUp(ctx, "", org); err != nil {
		t.Fatal(err)
	}
	if err := j.CompactTo(2); err != nil {
		t.Fatal(err)
	}
	hash, n := j.StateHash(), j.Len()
	j.Close()
	_ = j.st.Close()
	again := open(t, jdir, newSigner(t), Config{})
	if s, _ := again.Start(); s != 2 || again.StateHash() != hash || again.Len() != n || again.StateHash() != src.StateHash() {
		t.Fatalf("reopened: start %d, %d entries (want %d), same state %v", s, again.Len(), n, again.StateHash() == hash)
	}
}

// TestChainMovesBelowStart: two replicas split after a common checkpoint
// and each writes checkpoints of its own; one compacts onto its side's
// chain. When they meet, the other side's chain is deeper and leaves the
// compacted replica's start below it: that replica folds all of its
// history again from its store, and both reach one state; it compacts
// onto the new chain and opens again there.
func TestChainMovesBelowStart(t *testing.T) {
	ctx := context.Background()
	owner := newSigner(t)
	adir := t.TempDir()
	a := open(t, adir, owner, Config{})
	genesis(t, a)
	writeN(t, a, 20)
	if _, err := a.WriteCheckpoint(ctx); err != nil {
		t.Fatal(err)
	}
	writeN(t, a, 5)
	b := open(t, t.TempDir(), owner, Config{})
	if err := b.Import(entriesOf(a)); err != nil {
		t.Fatal(err)
	}
	// Apart: a writes one checkpoint more and compacts onto it; b two.
	writeN(t, a, 10)
	if _, err := a.WriteCheckpoint(ctx); err != nil {
		t.Fatal(err)
	}
	writeN(t, a, 3)
	if err := a.CompactTo(2); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		writeN(t, b, 10)
		if _, err := b.WriteCheckpoint(ctx); err != nil {
			t.Fatal(err)
		}
	}
	writeN(t, b, 3)
	// They meet.
	if err := a.Import(entriesOf(b)); err != nil {
		t.Fatal(err)
	}
	if err := b.Import(entriesOf(a)); err != nil {
		t.Fatal(err)
	}
	if a.StateHash() != b.StateHash() {
		t.Fatal("after meeting: two states")
	}
	if s, top := a.Start(); s != 0 || top != 3 {
		t.Fatalf("a starts at barrier %d of %d, want 0 of 3 (all of history again)", s, top)
	}
	if err := a.CompactTo(2); err != nil {
		t.Fatal(err)
	}
	hash := a.StateHash()
	a.Close()
	_ = a.st.Close()
	again := open(t, adir, owner, Config{})
	if s, _ := again.Start(); s != 2 || again.StateHash() != hash || hash != b.StateHash() {
		t.Fatalf("reopened: start %d, same state %v", s, again.StateHash() == hash)
	}
}

// entriesOf is every entry r's Log holds.
func entriesOf(r *Replica) []*ledger.Entry {
	lg, unlock := r.ReadLog()
	defer unlock()
	return lg.Entries()
}
