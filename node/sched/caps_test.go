package sched

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"github.com/cshare/cshare/runtime"
)

// TestPlanCapsDefaultShare: a job that asks for nothing on a machine with
// memory_limit 1024, 2 cores and max_concurrent_jobs 4 gets a quarter of
// each; an asker takes what it asks, and the others share what is left.
func TestPlanCapsDefaultShare(t *testing.T) {
	b := budget{cores: 2000, memMB: 1024, slots: 4}
	got := planCaps(b, []need{{job: "a"}, {job: "a"}, {job: "a"}, {job: "a"}})
	if want := (caps{cores: 500, memMB: 256}); got["a"] != want {
		t.Errorf("four instances asking nothing: %+v, want %+v", got["a"], want)
	}
	got = planCaps(b, []need{{job: "big", memMB: 640, cores: 1000}, {job: "a"}, {job: "a"}})
	if got["big"] != (caps{cores: 1000, memMB: 640}) || got["a"] != (caps{cores: 500, memMB: 192}) {
		t.Errorf("an asker of 640 MB beside two that ask nothing: %+v", got)
	}
	if got := planCaps(budget{slots: 4}, []need{{job: "a"}}); got["a"] != (caps{}) {
		t.Errorf("a machine without limits: %+v, want none", got["a"])
	}
	var sp runtime.Spec
	applyCaps(&sp, caps{cores: 1, memMB: 1})
	if sp.NanoCPUs != runtime.MinNanoCPUs || sp.MemoryBytes != runtime.MinMemoryBytes {
		t.Errorf("caps below the runtime's floors: %d nano-CPUs, %d bytes; want the floors", sp.NanoCPUs, sp.MemoryBytes)
	}
}

// TestPlanCapsNeverExceedTheBudget: whatever the plan puts on a machine
// (at most its slots, what the askers ask within the budget, as placement
// guarantees, with at least one unit left for each instance that asks for
// nothing), every instance has a cap where the machine has a limit, and
// the caps add up to at most the budget; and admit never lets the runs
// going on exceed it.
func TestPlanCapsNeverExceedTheBudget(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := budget{cores: rapid.Int64Range(0, 64000).Draw(t, "cores"), memMB: rapid.Int64Range(0, 1<<20).Draw(t, "mem"),
			slots: rapid.IntRange(1, 64).Draw(t, "slots")}
		n := rapid.IntRange(0, b.slots).Draw(t, "instances")
		var insts []need
		var askC, askM, restC, restM int64
		for i := 0; i < n; i++ {
			nd := need{job: fmt.Sprintf("j%d", rapid.IntRange(0, 5).Draw(t, "job"))}
			// One job asks the same for each of its instances.
			seen := false
			for _, o := range insts {
				if o.job == nd.job {
					nd, seen = o, true
				}
			}
			if !seen && rapid.Bool().Draw(t, "asks") {
				nd.cores = rapid.Int64Range(0, max(b.cores/2, 1)).Draw(t, "ask cores")
				nd.memMB = rapid.Int64Range(0, max(b.memMB/2, 1)).Draw(t, "ask mem")
			}
			insts = append(insts, nd)
			if nd.cores > 0 {
				askC += nd.cores
			} else {
				restC++
			}
			if nd.memMB > 0 {
				askM += nd.memMB
			} else {
				restM++
			}
		}
		if (b.cores > 0 && askC+restC > b.cores) || (b.memMB > 0 && askM+restM > b.memMB) {
			t.Skip("placement would not put these here")
		}
		cs := planCaps(b, insts)
		var inUse []caps
		var sc, sm int64
		for _, nd := range insts {
			c := cs[nd.job]
			if (b.cores > 0 && c.cores <= 0) || (b.memMB > 0 && c.memMB <= 0) {
				t.Fatalf("job %s uncapped on a limited machine: %+v", nd.job, c)
			}
			if !b.fits(inUse, c) {
				t.Fatalf("the plan's own caps do not fit: %+v beside %v in %+v", c, inUse, b)
			}
			inUse = append(inUse, c)
			sc += c.cores
			sm += c.memMB
		}
		if (b.cores > 0 && sc > b.cores) || (b.memMB > 0 && sm > b.memMB) {
			t.Fatalf("caps add up to %d cores, %d MB, above the budget %+v", sc, sm, b)
		}
	})
}
