package ledger

import (
	"math/rand/v2"
	"sync"
	"testing"

	"pgregory.net/rapid"
)

// snapWatch checks the snapshots of a Log while it folds on: each one is
// deep-copied when it is published, and read in full (encoded, which walks
// every field the hash covers) on another goroutine while later batches
// are folded, then once more at the end. A change the fold makes in place
// to an object a snapshot shares is a data race under -race, and a
// mismatch without it.
type snapWatch struct {
	wg    sync.WaitGroup
	mu    sync.Mutex
	bad   []string
	snaps []*State
	want  []string
}

func (w *snapWatch) publish(l *Log) {
	snap := l.Snapshot()
	if !snap.Frozen() {
		w.fail("Snapshot is not frozen")
	}
	want := snap.Clone().Hash() // the deep copy made at publication
	w.snaps, w.want = append(w.snaps, snap), append(w.want, want)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		if got := snap.Hash(); got != want {
			w.fail("a snapshot changed while the log folded on")
		}
	}()
}

func (w *snapWatch) fail(msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.bad = append(w.bad, msg)
}

// check waits for the readers and checks every snapshot once more.
func (w *snapWatch) check(t *rapid.T) {
	w.wg.Wait()
	for i, s := range w.snaps {
		if s.Hash() != w.want[i] {
			w.fail("a snapshot changed after it was published")
		}
	}
	if len(w.bad) > 0 {
		t.Fatalf("%d failures, the first: %s", len(w.bad), w.bad[0])
	}
}

// foldWatched folds es into a fresh Log (small checkpoint intervals, so
// late entries re-fold from checkpoints) in a random topological order, in
// random batches, publishing a snapshot after each batch; the result must
// be the state of folding es in one batch.
func foldWatched(t *rapid.T, es []*Entry) {
	rng := rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "seed"), 11))
	ref := NewLog()
	if _, err := ref.AddBatch(es); err != nil {
		t.Fatalf("batch load: %v", err)
	}
	l := newLog(rapid.IntRange(1, 6).Draw(t, "cpEvery"), 3)
	var w snapWatch
	w.publish(l)
	order := topoOrder(es, rng)
	for len(order) > 0 {
		k := min(len(order), 1+rng.IntN(4))
		if _, err := l.AddBatch(order[:k]); err != nil {
			t.Fatalf("add: %v", err)
		}
		order = order[k:]
		w.publish(l)
		if rng.IntN(3) == 0 {
			// A DryRun's fork of the snapshot folds the next entry too,
			// without touching the snapshot or the log's State.
			if len(order) > 0 {
				_ = Apply(l.Snapshot().Fork(), order[0])
			}
		}
	}
	w.check(t)
	if l.State().Hash() != ref.State().Hash() {
		t.Fatalf("folded in batches with snapshots: state differs from the batch load")
	}
}

// TestSnapshotsImmutable: random DAGs of every kind (the generators of
// TestPropertyDeliveryOrder and of the numbers properties) are folded
// while snapshots taken before are read on other goroutines; no snapshot
// ever changes (run with -race).
func TestSnapshotsImmutable(t *testing.T) {
	t.Run("dag", func(t *testing.T) {
		var actors []*actor
		for i := 0; i < 6; i++ {
			actors = append(actors, newActor(t, byte(1+i)))
		}
		rapid.Check(t, func(rt *rapid.T) {
			g := newDagGen(t, rt, actors)
			for n := rapid.IntRange(5, 40).Draw(rt, "steps"); n > 0; n-- {
				g.step()
			}
			foldWatched(rt, g.all)
		})
	})
	t.Run("market", func(t *testing.T) {
		joiners := []*actor{newActor(t, 70), newActor(t, 71), newActor(t, 72)}
		gens := []func(*rapid.T, *propBase) []step{genOrgUpdate, genMachineRegister(joiners), genMachineUpdate, genJobSubmit,
			genJobModify, genJobResults, genDatasetAdd, genContractRequest, genContractExtend, genContractTimes}
		b := newPropBase(t)
		heads := b.w.heads()
		rapid.Check(t, func(rt *rapid.T) {
			es := append([]*Entry(nil), b.entries...)
			var all []*Entry
			for range rapid.IntRange(1, 4).Draw(rt, "chains") {
				// Each chain on the base's heads or on an entry of an
				// earlier chain.
				parents := heads
				if len(all) > 0 && rapid.Bool().Draw(rt, "on_earlier") {
					parents = []*Entry{all[rapid.IntRange(0, len(all)-1).Draw(rt, "parent")]}
				}
				var chain []*Entry
				for _, s := range gens[rapid.IntRange(0, len(gens)-1).Draw(rt, "kind")](rt, b) {
					e := sign(t, s.a, b.w.org, s.kind, s.p(chain), s.at, parents...)
					chain = append(chain, e)
					parents = []*Entry{e}
				}
				all = append(all, chain...)
			}
			foldWatched(rt, append(es, all...))
		})
	})
}
