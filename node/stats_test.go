package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/runtime"
)

// TestWhatRunsNow: job show lists, for each instance, the CPU and memory
// its run uses as the driver samples them, this machine's from its own
// instances and another's from its heartbeat; machine show sums a
// machine's; a run killed at its memory cap says so, in job items (the
// run) and job show (its instance).
func TestWhatRunsNow(t *testing.T) {
	m := newMesh(t, meshConfig{n: 2, interval: 200 * time.Millisecond, slots: 1, runFor: runtime.FakeManual})
	m.formOrg()
	m.waitAllStatus(30*time.Second, StatusAvailable, m.ids()...)
	n0, id1 := m.nodes[0].Node, m.nodes[1].ID().String()
	// The fake driver reports a run's CPU cap as its use, and its memory
	// reservation (what the job asks for) as its memory.
	j := submit(t, n0, api.JobSubmit{Name: "busy", CPUs: 2, CoresMilli: 500, MemoryMB: 64, RangeStart: ptr[int64](1), RangeEnd: ptr[int64](3), Retries: 1})
	eventually(t, 30*time.Second, "both instances' use in job show", func() string {
		ji := jobState(t, n0, j.ID)
		ok := 0
		for _, in := range ji.Instances {
			if in.CPUPercent == 50 && in.MemoryBytes == 64<<20 && in.State == "running" {
				ok++
			}
		}
		if ok != 2 {
			return fmt.Sprintf("instances %+v", ji.Instances)
		}
		return ""
	})
	eventually(t, 30*time.Second, "machine show's use, of another machine and of its own", func() string {
		for _, id := range []string{id1, m.nodes[0].ID().String()} {
			mi, err := n0.orgs.Machine(ctxT(t), id)
			if err != nil {
				return err.Error()
			}
			if u := mi.Usage; u == nil || u.Instances != 1 || u.CPUPercent != 50 || u.MemoryBytes != 64<<20 {
				return fmt.Sprintf("%s usage %+v", id, mi.Usage)
			}
		}
		return ""
	})

	// n1's run is killed at its memory cap.
	runs := m.nodes[1].drv.Running()
	if len(runs) != 1 {
		t.Fatalf("n1 runs %v, want one", runs)
	}
	sp, _ := m.nodes[1].drv.Spec(runs[0])
	if err := m.nodes[1].drv.Finish(runs[0], runtime.ExitStatus{Code: 137, OOMKilled: true}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the run oom_killed in job items and its instance in job show", func() string {
		items, err := jobItemsAny(n0, j.ID)
		if err != nil {
			return err.Error()
		}
		oomRun := false
		for _, it := range items {
			for _, r := range it.Runs {
				oomRun = oomRun || (it.Item == int64(sp.Item) && r.OOMKilled && r.Machine == id1)
			}
		}
		oomInst := false
		for _, in := range jobState(t, n0, j.ID).Instances {
			oomInst = oomInst || (in.Machine == id1 && in.OOMKilled)
		}
		if !oomRun || !oomInst {
			return fmt.Sprintf("run %v, instance %v", oomRun, oomInst)
		}
		return ""
	})
	if ji := jobState(t, n0, j.ID); ji.Items.Failed != 0 {
		t.Errorf("an item killed once with retries 1 failed for good: %+v", ji.Items)
	}
}
