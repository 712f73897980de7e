package node

// Attacks by a member machine on the mesh, each asserting no effect on the
// others' work. Forged and replayed entries and heartbeats on a live mesh
// are TestMeshOrg (mesh_test.go) and TestMeshLiveness (liveness_test.go);
// every attack test is indexed in ledger/attack_test.go.

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/p2p"
	"github.com/cshare/cshare/runtime"
)

// TestLyingHeartbeatsLoseNoItem: a member machine lies in its heartbeats,
// claiming 64 free slots it does not have and announcing none of the
// instances it runs (which never finish: it holds its items and does
// nothing with them). The plan puts instances on it, but an owner whose
// machine announces the plan without them cannot run, so its items go to
// the honest machines: every item is done, once, by them.
func TestLyingHeartbeatsLoseNoItem(t *testing.T) {
	m := newMesh(t, meshConfig{n: 3, interval: 250 * time.Millisecond, slots: 2, runFor: 50 * time.Millisecond})
	m.formOrg()
	m.waitAllStatus(30*time.Second, StatusAvailable, m.ids()...)
	const liar = 2
	m.stop(liar)
	m.nodes[liar].drv.SetDuration(time.Hour)
	m.nodes[liar].opts.heartbeatLie = func(hb *p2p.Heartbeat) {
		hb.Total.Slots, hb.Free.Slots = 64, 64
		hb.Instances = nil
	}
	m.restart(liar)
	lid := m.nodes[liar].ID().String()
	m.waitAllStatus(30*time.Second, StatusAvailable, m.ids()...)

	j := submit(t, m.nodes[0].Node, api.JobSubmit{Name: "lied-to", CPUs: 2, MaxCPUs: ptr(int64(-1)), RangeStart: ptr[int64](1), RangeEnd: ptr[int64](200), Priority: 5})
	eventually(t, 30*time.Second, "a plan with instances on the liar", func() string {
		for _, pi := range m.nodes[0].sched.Probe().Plan().Instances {
			if pi.Machine == lid && pi.Job == j.ID {
				return ""
			}
		}
		return "none yet"
	})
	m.waitJobDone(90*time.Second, j.ID)
	for item, by := range m.checkDoneOnce(j.ID) {
		if by == lid {
			t.Errorf("item %d is done by the lying machine, whose runs never finish", item)
		}
	}
}

// TestLeaseClaimsInSlotsItDoesNotHave: a member machine announces its true
// slot count (2) but none of its real instances (which never finish), and
// claims to hold items 1 to 3 in slots 5 to 7, which it does not have, and
// items 4 and 5 both in one of them. Those claims lease nothing: the items
// go to the honest machines and the job ends.
func TestLeaseClaimsInSlotsItDoesNotHave(t *testing.T) {
	m := newMesh(t, meshConfig{n: 3, interval: 250 * time.Millisecond, slots: 2, runFor: 50 * time.Millisecond})
	m.formOrg()
	m.waitAllStatus(30*time.Second, StatusAvailable, m.ids()...)
	const liar = 2
	m.stop(liar)
	m.nodes[liar].drv.SetDuration(time.Hour)
	var job atomic.Pointer[string] // the job to lie about, set once submitted
	m.nodes[liar].opts.heartbeatLie = func(hb *p2p.Heartbeat) {
		hb.Instances = nil
		if j := job.Load(); j != nil {
			for it := int64(1); it <= 3; it++ {
				hb.Instances = append(hb.Instances, p2p.RunningInstance{Job: *j, Slot: 4 + it, Kind: "primary", Item: it, Instance: "fake"})
			}
			for it := int64(4); it <= 5; it++ {
				hb.Instances = append(hb.Instances, p2p.RunningInstance{Job: *j, Slot: 9, Kind: "primary", Item: it, Instance: "fake"})
			}
		}
	}
	m.restart(liar)
	lid := m.nodes[liar].ID().String()
	m.waitAllStatus(30*time.Second, StatusAvailable, m.ids()...)
	j := submit(t, m.nodes[0].Node, api.JobSubmit{Name: "lied-to", CPUs: 2, MaxCPUs: ptr(int64(-1)), RangeStart: ptr[int64](1), RangeEnd: ptr[int64](40), Priority: 5})
	job.Store(&j.ID)
	eventually(t, 30*time.Second, "the liar's claims seen", func() string {
		if m.nodes[0].sched.Probe().LeaseHolder(j.ID, 1) != "" {
			return ""
		}
		for _, s := range m.nodes[0].peers.All() {
			if s.Heartbeat.Machine == lid && len(s.Heartbeat.Instances) == 5 {
				return ""
			}
		}
		return "not yet"
	})
	m.waitJobDone(60*time.Second, j.ID)
	for item, by := range m.checkDoneOnce(j.ID) {
		if by == lid {
			t.Errorf("item %d is done by the lying machine, whose runs never finish", item)
		}
	}
}

// TestLeaseClaimsOutsideThePlan: a member machine with its true slot
// count (2) and a memory limit (64 MB) too small for a job that asks for
// 256 MB per instance claims two of that job's items, one in each of its
// slots, in every heartbeat: the two highest, which their owners reach
// last. The plan (the same on every node) gives it no
// instance of the job, so those claims lapse after the lease grace: the
// items go to the honest machines, the job ends, every item done once by
// them.
func TestLeaseClaimsOutsideThePlan(t *testing.T) {
	m := newMesh(t, meshConfig{n: 3, interval: 250 * time.Millisecond, slots: 2, runFor: 200 * time.Millisecond})
	m.formOrg()
	m.waitAllStatus(30*time.Second, StatusAvailable, m.ids()...)
	const liar = 2
	m.stop(liar)
	small := filepath.Join(t.TempDir(), "node.yaml")
	if err := os.WriteFile(small, []byte("resources:\n  max_concurrent_jobs: 2\n  memory_limit: 64\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m.nodes[liar].opts.ConfigPath = small
	var job atomic.Pointer[string] // the job to lie about, set once submitted
	m.nodes[liar].opts.heartbeatLie = func(hb *p2p.Heartbeat) {
		if j := job.Load(); j != nil {
			hb.Instances = []p2p.RunningInstance{
				{Job: *j, Slot: 0, Kind: "primary", Item: 59, Instance: "fake0", Started: 1},
				{Job: *j, Slot: 1, Kind: "primary", Item: 60, Instance: "fake1", Started: 1},
			}
		}
	}
	m.restart(liar)
	lid := m.nodes[liar].ID().String()
	m.waitAllStatus(30*time.Second, StatusAvailable, m.ids()...)
	m.nodes[liar].publishMachineUpdate(context.Background()) // its new limits (a restart does not write them)
	eventually(t, 30*time.Second, "the liar's memory limit in the ledger", func() string {
		var mem int64 = -1
		m.nodes[0].rep.View(func(st *ledger.State) {
			if mc := st.Machines[lid]; mc != nil {
				mem = mc.Limits.MemoryLimit
			}
		})
		if mem != 64 {
			return fmt.Sprintf("memory limit %d", mem)
		}
		return ""
	})
	j := submit(t, m.nodes[0].Node, api.JobSubmit{Name: "lied-to", CPUs: 2, MaxCPUs: ptr(int64(-1)), MemoryMB: 256, RangeStart: ptr[int64](1), RangeEnd: ptr[int64](60), Priority: 5})
	job.Store(&j.ID)
	eventually(t, 30*time.Second, "the liar's claims seen", func() string {
		for _, s := range m.nodes[0].peers.All() {
			if s.Heartbeat.Machine == lid && len(s.Heartbeat.Instances) == 2 {
				return ""
			}
		}
		return "not yet"
	})
	m.waitJobDone(60*time.Second, j.ID)
	for item, by := range m.checkDoneOnce(j.ID) {
		if by == lid {
			t.Errorf("item %d is done by the lying machine, which the plan gives no instance of the job", item)
		}
	}
}

// TestItemTimeoutEndsALyingHold: a member machine takes items and never
// runs them (its driver's Start never returns), while its heartbeats go on
// claiming them in the slots the plan gives it: a hold no plan check can
// tell from a slow item. The job has an item timeout, so every node lets
// those claims lapse the timeout plus one heartbeat interval after it
// first saw them: the honest machines take the items, and the job ends
// with every item done once, by them. Without the timeout those items
// would stay leased until the machine went offline.
func TestItemTimeoutEndsALyingHold(t *testing.T) {
	m := newMesh(t, meshConfig{n: 3, interval: 250 * time.Millisecond, slots: 2, runFor: 50 * time.Millisecond})
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // before the mesh closes (cleanups run last first)
	m.formOrg()
	m.waitAllStatus(30*time.Second, StatusAvailable, m.ids()...)
	const liar = 2
	lid := m.nodes[liar].ID().String()
	m.nodes[liar].drv.OnStart(func(runtime.Spec) { <-release })

	j := submit(t, m.nodes[0].Node, api.JobSubmit{Name: "held", CPUs: 2, MaxCPUs: ptr(int64(-1)), RangeStart: ptr[int64](1), RangeEnd: ptr[int64](30),
		Priority: 5, ItemTimeoutMS: 2000})
	held := map[int64]bool{}
	eventually(t, 30*time.Second, "the liar's claims seen", func() string {
		for _, s := range m.nodes[0].peers.All() {
			if s.Heartbeat.Machine != lid {
				continue
			}
			for _, ri := range s.Heartbeat.Instances {
				if ri.Job == j.ID && ri.Item >= 0 {
					held[ri.Item] = true
				}
			}
		}
		if len(held) == 0 {
			return "none yet"
		}
		return ""
	})
	m.waitJobDone(90*time.Second, j.ID)
	done := m.checkDoneOnce(j.ID)
	for item, by := range done {
		if by == lid {
			t.Errorf("item %d is done by the lying machine, whose runs never start", item)
		}
	}
	for item := range held {
		if done[item] == "" {
			t.Errorf("item %d, held by the liar, is not done", item)
		}
	}
	t.Logf("the liar claimed items %v; all done by honest machines", slices.Sorted(maps.Keys(held)))
}
