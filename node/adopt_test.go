package node

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cshare/cshare/ledger/store"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/runtime"
)

// runningGPUs lists the runs of job still running on mn's fake driver,
// with the GPUs each was started with ("" for none).
func runningGPUs(mn *meshNode, job string) map[runtime.RunID]string {
	out := map[runtime.RunID]string{}
	for _, id := range mn.drv.Running() {
		if s, ok := mn.drv.Spec(id); ok && s.Job == job {
			out[id] = strings.Join(s.GPUUUIDs, ",")
		}
	}
	return out
}

// oneRun waits for job to have exactly one run on mn holding one GPU, and
// returns it and its GPU.
func oneRun(t *testing.T, mn *meshNode, job string) (runtime.RunID, string) {
	t.Helper()
	var id runtime.RunID
	var gpu string
	eventually(t, 30*time.Second, "one run of job "+job+" holding one GPU", func() string {
		runs := runningGPUs(mn, job)
		if len(runs) != 1 {
			return fmt.Sprintf("runs %v", runs)
		}
		for k, v := range runs {
			id, gpu = k, v
		}
		if gpu == "" || strings.Contains(gpu, ",") {
			return fmt.Sprintf("run %s holds GPUs %q", id, gpu)
		}
		return ""
	})
	return id, gpu
}

// TestAdoptedRunKeepsItsGPU: a node with two (recorded) GPUs runs an item
// of a one-GPU job, stops as in a crash (the run goes on) and restarts;
// the instance it adopts keeps the run's GPU. A second one-GPU job then
// gets the other GPU, never the held one, and the first job's next item
// runs on the GPU left to it.
func TestAdoptedRunKeepsItsGPU(t *testing.T) {
	m := newMesh(t, meshConfig{n: 1, interval: 200 * time.Millisecond, slots: 2, runFor: runtime.FakeManual, recordGPUs: 2})
	m.formOrg()
	m.waitAllStatus(30*time.Second, StatusAvailable, m.ids()...)
	mn := m.nodes[0]
	one := ptr(int64(1))
	a := submit(t, mn.Node, api.JobSubmit{Name: "a", CPUs: 1, MaxCPUs: one, GPUs: 1, RangeStart: one, RangeEnd: ptr(int64(2))})
	runA, gpuA := oneRun(t, mn, a.ID)

	m.stop(0)
	if runs := runningGPUs(mn, a.ID); runs[runA] != gpuA {
		t.Fatalf("the run did not outlive its node: %v", runs)
	}
	m.restart(0)
	eventually(t, 30*time.Second, "the restarted node adopts the run", func() string {
		if localInstances(mn.Node)[a.ID] != 1 {
			return fmt.Sprintf("instances %v", localInstances(mn.Node))
		}
		return ""
	})

	b := submit(t, mn.Node, api.JobSubmit{Name: "b", CPUs: 1, MaxCPUs: one, GPUs: 1, RangeStart: one, RangeEnd: one})
	_, gpuB := oneRun(t, mn, b.ID)
	if gpuB == gpuA {
		t.Fatalf("job b's run got %s, which job a's adopted run still holds", gpuB)
	}
	if err := mn.drv.Complete(runA, 0); err != nil {
		t.Fatal(err)
	}
	// Item 2 runs on the GPU b does not hold, whichever instance runs it.
	eventually(t, 30*time.Second, "job a's next item on a GPU", func() string {
		runs := runningGPUs(mn, a.ID)
		if len(runs) != 1 {
			return fmt.Sprintf("runs %v", runs)
		}
		for id, g := range runs {
			if g != gpuA {
				t.Fatalf("job a's next run %s holds GPUs %q, want %s (b holds %s)", id, g, gpuA, gpuB)
			}
		}
		return ""
	})
}

// TestAdoptionRecordsRunOfEndedJob: a node stops while it runs the only
// item of a job (the run goes on, as after a SIGTERM restart); the other
// machine runs the item once the first is offline, and the job ends. The
// stopped node's ledger learns of the end before it starts again (as a
// node that is shutting down still stores what gossip brings), and its
// run finishes meanwhile. The restarted node adopts the run and records
// it: job items list both runs, the other machine's counted. (Adoption
// dropped a run of an ended job unrecorded, and the nemesis found a real
// run the ledger did not know.)
func TestAdoptionRecordsRunOfEndedJob(t *testing.T) {
	m := newMesh(t, meshConfig{n: 2, interval: 200 * time.Millisecond, slots: 1, runFor: runtime.FakeManual})
	m.formOrg()
	m.waitAllStatus(30*time.Second, StatusAvailable, m.ids()...)
	one := ptr(int64(1))
	j := submit(t, m.nodes[0].Node, api.JobSubmit{Name: "one", CPUs: 1, MaxCPUs: one, RangeStart: one, RangeEnd: one})
	var a int
	var runA runtime.RunID
	eventually(t, 30*time.Second, "one run of the job", func() string {
		for i, mn := range m.nodes {
			for id := range runningGPUs(mn, j.ID) {
				a, runA = i, id
				return ""
			}
		}
		return "no run"
	})
	b := 1 - a
	m.stop(a)
	var runB runtime.RunID
	eventually(t, 60*time.Second, "the other machine runs the item", func() string {
		for id := range runningGPUs(m.nodes[b], j.ID) {
			runB = id
			return ""
		}
		return "no run on " + m.nodes[b].name
	})
	if err := m.nodes[b].drv.Complete(runB, 0); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the job ends", func() string {
		info, err := jobAny(m.nodes[b].Node, j.ID)
		if err != nil || info.State != "done" {
			return fmt.Sprintf("job %+v, %v", info.State, err)
		}
		return ""
	})
	// The stopped node's store gets the ledger as it is now.
	lg, unlock := m.nodes[b].rep.ReadLog()
	var blocks []store.Block
	for _, e := range lg.Entries() {
		blocks = append(blocks, store.Block{CID: e.CID(), Data: e.Bytes()})
	}
	unlock()
	st, err := store.Open(filepath.Join(m.nodes[a].opts.DataDir, "ledger"), testLogger("store"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutBlocks(blocks); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.nodes[a].drv.Complete(runA, 0); err != nil { // while its node is down
		t.Fatal(err)
	}
	m.restart(a)
	idA, idB := m.nodes[a].ID().String(), m.nodes[b].ID().String()
	eventually(t, 30*time.Second, "both runs in job items on both nodes", func() string {
		for _, mn := range m.nodes {
			items, err := jobItemsAny(mn.Node, j.ID)
			if err != nil || len(items) != 1 {
				return fmt.Sprintf("%s: items %+v, %v", mn.name, items, err)
			}
			var got []string
			for _, r := range items[0].Runs {
				got = append(got, fmt.Sprintf("%s counted=%t", r.Machine, r.Counted))
			}
			want := []string{idB + " counted=true", idA + " counted=false"}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				return fmt.Sprintf("%s: runs %v, want %v", mn.name, got, want)
			}
		}
		return ""
	})
}
