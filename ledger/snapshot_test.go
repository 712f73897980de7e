package ledger

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"pgregory.net/rapid"
)

// frozenState is a snapshot and its encoding when it was taken.
type frozenState struct {
	st  *State
	enc []byte
	at  string
}

func freeze(t interface{ Fatalf(string, ...any) }, l *Log, at string) frozenState {
	st := l.Snapshot()
	b, err := encMode.Marshal(st)
	if err != nil {
		t.Fatalf("%s: encode: %v", at, err)
	}
	return frozenState{st: st, enc: b, at: at}
}

// check: the snapshot still encodes to the bytes it did when taken.
func (f frozenState) check(t interface{ Fatalf(string, ...any) }, now string) {
	b, err := encMode.Marshal(f.st)
	if err != nil {
		t.Fatalf("snapshot of %s: encode: %v", f.at, err)
	}
	if !bytes.Equal(b, f.enc) {
		t.Fatalf("the snapshot taken %s changed by %s (%d bytes, were %d)", f.at, now, len(b), len(f.enc))
	}
}

// TestSnapshotsImmutable: a random DAG (dagGen: every kind it writes,
// concurrent branches, late entries that re-fold, revocations) is fed to a
// Log in random batches, a snapshot taken after each; after all of them,
// and after a second writer folded the rest onto a thawed old snapshot
// (as DryRun does), every snapshot encodes to the bytes it had when
// taken, and the Log's State is the one a Log nobody snapshots folds.
// The fold scenarios (TestFoldScenarios) check the same for every kind,
// a snapshot before each entry.
func TestSnapshotsImmutable(t *testing.T) {
	var actors []*actor
	for i := 0; i < 6; i++ {
		actors = append(actors, newActor(t, byte(1+i)))
	}
	rapid.Check(t, func(rt *rapid.T) {
		g := newDagGen(t, rt, actors)
		for n := rapid.IntRange(5, 60).Draw(rt, "steps"); n > 0; n-- {
			g.step()
		}
		rng := rand.New(rand.NewPCG(rapid.Uint64().Draw(rt, "seed"), 11))
		ref := NewLog()
		if _, err := ref.AddBatch(g.all); err != nil {
			rt.Fatalf("reference: %v", err)
		}

		l := newLog(1+rng.IntN(5), 2+rng.IntN(3))
		var snaps []frozenState
		order := topoOrder(g.all, rng)
		var rest []*Entry // what the second writer folds
		for b := 0; len(order) > 0; b++ {
			n := min(len(order), 1+rng.IntN(6))
			if _, err := l.AddBatch(order[:n]); err != nil {
				rt.Fatalf("batch %d: %v", b, err)
			}
			order = order[n:]
			snaps = append(snaps, freeze(rt, l, fmt.Sprintf("after batch %d", b)))
			if rest == nil && rng.IntN(3) == 0 {
				rest = append([]*Entry{}, order...)
			}
		}
		// A second writer on a thawed copy of an earlier snapshot, as
		// DryRun's: it changes neither that snapshot nor the Log's.
		if k := len(snaps) / 2; len(rest) > 0 {
			st := snaps[k].st.Thaw()
			for _, e := range rest {
				_ = Apply(st, e)
			}
		}
		for _, f := range snaps {
			f.check(rt, "the later folds")
		}
		if got, want := l.State().Hash(), ref.State().Hash(); got != want {
			rt.Fatalf("a Log snapshotted after each batch folds to another State than one never snapshotted")
		}
	})
}
