package ledger

import (
	"testing"
)

// TestStateHashPerFold: Log.StateHash is State().Hash() after every add:
// entries folded onto the same State, and a late entry that sorts before
// folded ones and re-folds from a checkpoint (a new State); it changes when
// the State does.
func TestStateHashPerFold(t *testing.T) {
	w := newWorld(t)
	m := w.member(3, RoleMember)
	for i := int64(1); i <= 5; i++ {
		w.submit(m, i, 0)
	}
	// A late entry: the owner's, on genesis alone, so it sorts second.
	late := w.on(w.owner, KindJobSubmit, JobSpec{Driver: "exec", Cmd: []string{"true"}, RangeStart: 1, RangeEnd: 9,
		Priority: 5, CPUs: 1, Nonce: []byte("late")}, w.gen)
	w.mustAdd(late)
	all := w.log.Entries()
	var order []*Entry
	for _, e := range all {
		if e != late {
			order = append(order, e)
		}
	}
	order = append(order, late)
	l := newLog(2, 3) // a checkpoint every 2 entries
	prev := ""
	for i, e := range order {
		before := l.State()
		if ae, err := l.Add(e); err != nil || ae != nil {
			t.Fatalf("add %d (%s): %v, %v", i, e.Kind, ae, err)
		}
		got, want := l.StateHash(), l.State().Hash()
		if got != want {
			t.Fatalf("after %d entries: StateHash %.12s, State().Hash() %.12s", l.Len(), got, want)
		}
		if got == prev || l.StateHash() != got {
			t.Fatalf("after %d entries: StateHash %.12s (before %.12s)", l.Len(), got, prev)
		}
		if e == late && l.State() == before {
			t.Fatal("the late entry did not re-fold into a new State: the test checks less than it says")
		}
		prev = got
	}
	if l.StateHash() != w.log.StateHash() {
		t.Fatalf("hash %.12s, want %.12s", l.StateHash(), w.log.StateHash())
	}
}

// TestSnapshotHashShared: a published State (Log.Snapshot) is encoded
// once for its hash, however many readers ask it and the Log's StateHash
// too (a checkpoint); the fold after it hashes its new State anew, and
// the snapshot keeps its own.
func TestSnapshotHashShared(t *testing.T) {
	w := newWorld(t)
	m := w.member(3, RoleMember)
	w.submit(m, 1, 0)
	snap := w.log.Snapshot()
	before := Hashes()
	h := snap.SnapshotHash()
	for range 5 {
		if snap.SnapshotHash() != h || w.log.StateHash() != h {
			t.Fatal("the hash of one snapshot changed")
		}
	}
	if n := Hashes() - before; n != 1 {
		t.Fatalf("11 asks of one snapshot's hash encoded it %d times, want 1", n)
	}
	if h != snap.Hash() {
		t.Fatalf("kept hash %.12s, State.Hash %.12s", h, snap.Hash())
	}
	w.submit(m, 2, 0)
	if w.log.State() == snap || w.log.StateHash() == h || w.log.StateHash() != w.log.State().Hash() || snap.SnapshotHash() != h {
		t.Fatalf("after a fold: the Log's hash %.12s (State %.12s), the snapshot's %.12s (was %.12s)",
			w.log.StateHash(), w.log.State().Hash(), snap.SnapshotHash(), h)
	}
}

// BenchmarkStateHash: the hash of a State of 20,000 folded entries, encoded
// (State.Hash) and kept per fold (Log.StateHash), as node status and org
// show ask for it.
func BenchmarkStateHash(b *testing.B) {
	setup, raws := benchLedger(b, 20_000)
	l := NewLog()
	for _, e := range setup {
		if _, err := l.Add(e); err != nil {
			b.Fatal(err)
		}
	}
	es, _ := DecodeBatch(raws)
	if _, err := l.AddBatch(es); err != nil {
		b.Fatal(err)
	}
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = l.State().Hash()
		}
	})
	b.Run("per-fold", func(b *testing.B) {
		l.StateHash() // the first call after the fold encodes
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			_ = l.StateHash()
		}
	})
}
