package ledger

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"pgregory.net/rapid"
)

// TestPropertyArchiveOrder: finished jobs leave the State at checkpoints
// (and jobs.retain drops old ones) the same way whatever the delivery:
// one batch, one by one, shuffled chunks, each replica's own history, and
// a Log started at the top barrier all reach one State hash; and every
// job that left a State went to its sink.
func TestPropertyArchiveOrder(t *testing.T) {
	var actors []*actor
	for i := 0; i < 6; i++ {
		actors = append(actors, newActor(t, byte(1+i)))
	}
	stats := map[string]int{}
	rapid.Check(t, func(rt *rapid.T) {
		g := newDagGen(t, rt, actors)
		for n := rapid.IntRange(10, 80).Draw(rt, "steps"); n > 0; n-- {
			switch rapid.IntRange(0, 13).Draw(rt, "archop") {
			case 4, 5: // a job, finished at once by a machine that saw it
				r := g.pick("finisher")
				n := int64(rapid.IntRange(1, 3).Draw(rt, "items"))
				e := g.write(r, KindJobSubmit, JobSpec{Driver: "exec", Cmd: []string{"x"}, RangeStart: 1, RangeEnd: n,
					Priority: 5, CPUs: 1, Nonce: []byte{byte(g.now), byte(g.now >> 8)}}, nil)
				var res []ItemResult
				for i := int64(1); i <= n; i++ {
					res = append(res, ItemResult{Item: i, Code: int64(rapid.IntRange(0, 3).Draw(rt, "code") / 3), Started: g.now, DurationMS: 5})
				}
				g.write(r, KindJobResults, JobResults{Job: JobIDFor(e), Results: res}, nil)
			case 0: // jobs.retain, by whoever: only an admin's takes effect
				r := g.pick("setter")
				ms := rapid.SampledFrom([]int64{0, MinJobsRetainMS, 2 * MinJobsRetainMS}).Draw(rt, "retain")
				g.write(r, KindOrgUpdate, OrgUpdate{JobsRetainMS: &ms}, nil)
			case 1: // time passes: jobs get old
				g.now += rapid.Int64Range(1, 3*MinJobsRetainMS).Draw(rt, "jump")
			case 2, 3: // a checkpoint on the writer's heads, mostly the owner's
				r := g.pick("cp")
				if rapid.Bool().Draw(rt, "byowner") {
					r = g.reps[0]
				}
				st := r.view.State()
				var prev string
				if top := r.view.Top(); top.Entry != nil {
					prev = top.Entry.CID().String()
				}
				g.write(r, KindCheckpoint, Checkpoint{Prev: prev, Entries: st.Applied + st.Ineffective, Hash: r.view.StateHash()}, nil)
			default:
				g.step()
			}
		}
		rng := rand.New(rand.NewPCG(rapid.Uint64().Draw(rt, "seed"), 11))
		ref := NewLog()
		if _, err := ref.AddBatch(g.all); err != nil {
			rt.Fatalf("batch: %v", err)
		}
		want := ref.StateHash()
		same := func(name string, l *Log) {
			if got := l.StateHash(); got != want {
				rt.Fatalf("%s: state hash %s, the batch load %s", name, got, want)
			}
		}
		for k := 0; k < 2; k++ {
			l := newLog(1+rng.IntN(5), 2+rng.IntN(3))
			order := topoOrder(g.all, rng)
			for len(order) > 0 {
				n := min(len(order), 1+rng.IntN(6))
				if _, err := l.AddBatch(order[:n]); err != nil {
					rt.Fatalf("chunk: %v", err)
				}
				order = order[n:]
			}
			same(fmt.Sprintf("chunks #%d", k), l)
		}
		g.converge(same)
		checkBarriers(rt, ref, stats)
		// What left the State went to the sink: every job the State
		// summarises was handed over whole (its items), every job handed
		// over is summarised or gone.
		left := map[string]LeftJob{}
		for _, l := range ref.State().TakeLeft() {
			left[l.Job.ID] = l
			if l.Dropped {
				stats["dropped"]++
			} else if l.Job.Archived != nil || l.Job.Items.Len() == 0 {
				rt.Fatalf("job %s left without its items", l.Job.ID)
			}
		}
		for id, j := range ref.State().Jobs {
			if j.Archived == nil {
				continue
			}
			stats["archived"]++
			l, ok := left[id]
			if !ok || l.Dropped || int64(l.Job.Items.Len()) != j.Archived.Items || l.Job.Done != j.Done {
				rt.Fatalf("job %s is summarised but was not handed over whole: %+v", id, l)
			}
		}
		stats["runs"]++
	})
	t.Logf("over all runs: %v", stats)
	if stats["archived"] == 0 || stats["dropped"] == 0 {
		t.Fatalf("the generator neither archived nor dropped a job: %v", stats)
	}
}

// converge gives every replica, built incrementally along the way, what
// it lacks, and checks it with same.
func (g *dagGen) converge(same func(name string, l *Log)) {
	for i, r := range g.reps {
		var missing []*Entry
		for _, e := range g.all {
			if !r.view.Has(e.CID()) {
				missing = append(missing, e)
			}
		}
		if _, err := r.view.AddBatch(missing); err != nil {
			g.rt.Fatalf("replica %d: %v", i, err)
		}
		same(fmt.Sprintf("replica %d", i), r.view)
	}
}
