package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/runtime"
)

// TestRunThatEndedBeforeItsStopCounts: an instance told to stop at once
// just as its run exits 0 on its own (the kill came too late: `make chaos`
// saw it) records the run's result, not a stop: the item is done, and not
// run again.
func TestRunThatEndedBeforeItsStopCounts(t *testing.T) {
	m := newMesh(t, meshConfig{n: 1, interval: 200 * time.Millisecond, slots: 1, runFor: runtime.FakeManual})
	m.formOrg()
	m.waitAllStatus(30*time.Second, StatusAvailable, m.ids()...)
	mn := m.nodes[0]
	one := ptr(int64(1))
	j := submit(t, mn.Node, api.JobSubmit{Name: "late-stop", CPUs: 1, MaxCPUs: one, RangeStart: one, RangeEnd: one})
	var run runtime.RunID
	eventually(t, 30*time.Second, "the item's run under way", func() string {
		if run = mn.sched.Probe().CurrentRun(j.ID); run == "" {
			return "no run yet"
		}
		return ""
	})
	// The run exits 0, and the stop lands before the instance looks: it
	// cannot see the stop before the run ended, as in the race.
	if _, err := mn.sched.Probe().StopWhile(run, func() error { return mn.drv.Complete(run, 0) }); err != nil {
		t.Fatal(err)
	}

	eventually(t, 30*time.Second, "the item done by its one run", func() string {
		items, err := mn.jobs.JobItems(ctxT(t), j.ID)
		if err != nil {
			return err.Error()
		}
		if n := mn.drv.Started(); n != 1 {
			t.Fatalf("the item ran again (%d runs): job items %+v", n, items)
		}
		if len(items) != 1 || items[0].Status != "done" || len(items[0].Runs) != 1 || !items[0].Runs[0].Counted || items[0].Runs[0].Stopped {
			return fmt.Sprintf("job items %+v", items)
		}
		return ""
	})
}
