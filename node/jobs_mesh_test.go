package node

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/jobspec"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/runtime"
)

// planned is how many instances (primary, secondary) n's current plan gives
// job, and the plan's hash.
func planned(n *Node, job string) (p, s int, hash string) {
	plan := n.sched.Probe().Plan()
	for _, js := range plan.Jobs {
		if js.ID == job {
			p, s = js.Primaries, js.Secondaries
		}
	}
	return p, s, plan.Hash
}

// localInstances is how many instances n runs now, by job.
func localInstances(n *Node) map[string]int {
	return n.sched.Probe().Instances()
}

// running is how many runs of job are running now, over every fake driver.
func (m *mesh) running(job string) int {
	k := 0
	for _, r := range m.runs.all() {
		if r.Job == job && !r.Exited {
			k++
		}
	}
	return k
}

func jobState(t testing.TB, n *Node, id string) api.JobInfo {
	t.Helper()
	ji, err := jobAny(n, id)
	if err != nil {
		t.Fatalf("job %s: %v", id, err)
	}
	return ji
}

// checkSlots fails if any live node runs more instances than its slots.
func (m *mesh) checkSlots(slots int) {
	m.t.Helper()
	for _, mn := range m.live() {
		total := 0
		for _, k := range localInstances(mn.Node) {
			total += k
		}
		if total > slots {
			m.t.Fatalf("%s runs %d instances on %d slots", mn.name, total, slots)
		}
	}
}

// waitJobDone waits until every live node sees the job done; it fails
// when for d no node has seen one more of its items done or failed.
func (m *mesh) waitJobDone(d time.Duration, id string) {
	m.t.Helper()
	eventuallyProgressing(m.t, d, "job "+id+" done everywhere", func() (string, int) {
		msg, ended := "", 0
		for _, mn := range m.live() {
			ji, err := jobAny(mn.Node, id)
			switch {
			case err != nil: // not in its ledger yet
				msg = cmp.Or(msg, fmt.Sprintf("%s: %v", mn.name, err))
			case ji.State != ledger.JobDone:
				msg = cmp.Or(msg, fmt.Sprintf("%s: %s, items %+v", mn.name, ji.State, ji.Items))
			}
			ended += int(ji.Items.Done + ji.Items.Failed)
		}
		return msg, ended
	})
}

// checkDoneOnce checks, on every live node, that each item of the job is
// done in the ledger exactly once, and returns the machine that did each.
func (m *mesh) checkDoneOnce(id string) map[int64]string {
	m.t.Helper()
	var who map[int64]string
	for _, mn := range m.live() {
		items, err := jobItemsAny(mn.Node, id)
		if err != nil {
			m.t.Fatal(err)
		}
		got := map[int64]string{}
		for _, it := range items {
			counted := 0
			for _, r := range it.Runs {
				if r.Counted {
					counted++
					if r.Machine != it.Machine {
						m.t.Fatalf("%s: job %s item %d: the counted run is %s's, the item says %s", mn.name, id, it.Item, r.Machine, it.Machine)
					}
				}
			}
			// Done once: one counted run; attempts counts every real run
			// (a duplicate during a brief disagreement is a run too).
			if it.Status != "done" || it.Code != 0 || counted != 1 || it.Attempts != int64(len(it.Runs)) {
				m.t.Fatalf("%s: job %s item %d: %+v", mn.name, id, it.Item, it)
			}
			got[it.Item] = it.Machine
		}
		if who == nil {
			who = got
		}
		for k, v := range got {
			if who[k] != v {
				m.t.Fatalf("nodes disagree on who did item %d of %s", k, id)
			}
		}
		var done int64
		mn.rep.View(func(st *ledger.State) { done = st.Jobs[id].Done })
		if done != int64(len(items)) {
			m.t.Fatalf("%s: job %s counts %d done of %d", mn.name, id, done, len(items))
		}
	}
	return who
}

// completedRuns counts, per item of the job, the runs that completed (exited
// 0 by themselves, not stopped), leaving out those on machine skip.
func (m *mesh) completedRuns(job, skip string) map[int]int {
	out := map[int]int{}
	for _, r := range m.runs.all() {
		if r.Job == job && r.Finished && r.Machine != skip {
			out[r.Item]++
		}
	}
	return out
}

// describeRuns lists the runs of one item, for failure messages.
func (m *mesh) describeRuns(job string, item int) string {
	var b strings.Builder
	var t0 time.Time
	for _, r := range m.runs.all() {
		if t0.IsZero() {
			t0 = r.Started
		}
		if r.Job == job && r.Item == item {
			fmt.Fprintf(&b, "\t%s %s %s: %v..%v code %d stopped %v finished %v\n", m.nameOf(r.Machine), r.Instance, r.Run,
				r.Started.Sub(t0).Round(time.Millisecond), r.Ended.Sub(t0).Round(time.Millisecond), r.Code, r.Stopped, r.Finished)
		}
	}
	return b.String()
}

func (m *mesh) nameOf(id string) string {
	for _, mn := range m.nodes {
		if mn.opts.Name != "" && mn.drv != nil && mn.drv.machine == id {
			return mn.name
		}
	}
	return id
}

func submit(t testing.TB, n *Node, req api.JobSubmit) api.JobInfo {
	t.Helper()
	if req.Cmd == nil {
		req.Cmd = []string{"sleep", "1"}
	}
	ji, err := n.jobs.SubmitJob(ctxT(t), req)
	if err != nil {
		t.Fatalf("submit %+v: %v", req, err)
	}
	return ji.JobInfo
}

// waitPlanned waits until every live node's plan gives each job want[job]
// instances; d counts while every node sees every other online
// (eventuallySettled).
func (m *mesh) waitPlanned(d time.Duration, want map[string]int) {
	m.t.Helper()
	m.eventuallySettled(d, fmt.Sprintf("plans with %v", want), func() string {
		for _, mn := range m.live() {
			for job, k := range want {
				if p, s, _ := planned(mn.Node, job); p+s != k {
					return fmt.Sprintf("%s plans %d+%d for %s", mn.name, p, s, job)
				}
			}
		}
		return ""
	})
}

// waitPlanAgreement waits until every live node computes the same plan hash
// and every one of its online peers announces it (Status: plan_agree); d
// counts while every node sees every other online (eventuallySettled).
func (m *mesh) waitPlanAgreement(d time.Duration) string {
	m.t.Helper()
	var hash string
	m.eventuallySettled(d, "plan agreement", func() string {
		hash = ""
		var b strings.Builder
		ok := true
		for _, mn := range m.live() {
			st, err := mn.Status(context.Background())
			if err != nil {
				m.t.Fatal(err)
			}
			fmt.Fprintf(&b, "%s: %.8s %d/%d; ", mn.name, st.PlanHash, st.PlanAgree, st.PlanPeers)
			if hash == "" {
				hash = st.PlanHash
			}
			if st.PlanHash != hash || st.PlanAgree != st.PlanPeers || st.PlanPeers != len(m.live())-1 {
				ok = false
			}
		}
		if !ok {
			return b.String()
		}
		return ""
	})
	return hash
}

// TestMeshJobs: five machines with four slots each run the job of
// docs/design.md §10, then a second; the instance counts follow the plan, the
// plans agree, a machine dies mid-job, and every item is done exactly once
// (issue 6).
//
// Runs last until the test lets them end (runtime.FakeManual) while it
// checks the plans: with runs of a fixed 300 ms the jobs ran on their own
// clock, and on a loaded host the plans took longer to settle than job 1
// took to finish (100 items on 10 instances, 3 s), so the test waited for
// 10 runs at once, or for job 1 next to job 2, after job 1 had ended
// ("0 runs", "n0 plans 0+0"). Meanwhile the runs of instances a plan
// drops end (endDropped), as real ones would. Released, runs last 300 ms,
// and the machine dies while items come and go.
func TestMeshJobs(t *testing.T) {
	const runFor = 300 * time.Millisecond
	m := newMesh(t, meshConfig{n: 5, interval: 250 * time.Millisecond, slots: 4, runFor: runtime.FakeManual})
	endDropped := m.endDroppedRuns()
	defer endDropped()
	m.formOrg()
	m.waitAllStatus(30*time.Second, StatusAvailable, m.ids()...)
	n1 := m.nodes[1].Node // a member submits

	// Job 1 alone: 2 primaries, expanded to its max_cpus of 10.
	j1 := submit(t, n1, api.JobSubmit{Name: "seed", CPUs: 2, MaxCPUs: ptr(int64(10)), RangeStart: ptr[int64](1), RangeEnd: ptr[int64](100), Priority: 5})
	m.waitPlanned(20*time.Second, map[string]int{j1.ID: 10})
	m.eventuallySettled(20*time.Second, "job 1 running 10 instances", func() string {
		m.checkSlots(4)
		if k := m.running(j1.ID); k != 10 {
			return fmt.Sprintf("%d runs", k)
		}
		return ""
	})
	for _, mn := range m.live() {
		if p, s, _ := planned(mn.Node, j1.ID); p != 2 || s != 8 {
			t.Fatalf("%s plans %d primaries and %d secondaries for job 1, want 2 and 8", mn.name, p, s)
		}
	}
	m.waitPlanAgreement(20 * time.Second)

	// Job 2 arrives with no limit: SmartShare splits the 20 slots, each job
	// keeping its 2 primaries and half of the 16 secondary slots (job 1 is
	// capped at 10 in all anyway).
	j2 := submit(t, m.nodes[2].Node, api.JobSubmit{Name: "second", CPUs: 2, MaxCPUs: ptr(int64(-1)), RangeStart: ptr[int64](1), RangeEnd: ptr[int64](200), Priority: 5})
	m.waitPlanned(20*time.Second, map[string]int{j1.ID: 10, j2.ID: 10})
	hash := m.waitPlanAgreement(20 * time.Second)
	t.Logf("plans agree on %.12s", hash)
	m.eventuallySettled(20*time.Second, "10 runs of each job", func() string {
		m.checkSlots(4)
		if k1, k2 := m.running(j1.ID), m.running(j2.ID); k1 != 10 || k2 != 10 {
			return fmt.Sprintf("%d and %d runs", k1, k2)
		}
		return ""
	})

	// A machine dies while both run: its leases lapse, others take its items.
	// It is one that runs job 2 and submitted neither job.
	victim := -1
	for _, i := range []int{3, 4, 0} {
		if localInstances(m.nodes[i].Node)[j2.ID] > 0 {
			victim = i
			break
		}
	}
	if victim < 0 {
		t.Fatal("job 2 runs on none of n3, n4 and n0")
	}
	vid := m.nodes[victim].ID().String()
	endDropped()
	m.release(runFor)
	m.stop(victim)
	// Once it is offline, no plan puts anything on it.
	m.eventuallySettled(20*time.Second, "plans without the dead machine", func() string {
		for _, mn := range m.live() {
			insts := mn.sched.Probe().Plan().Instances
			for _, pi := range insts {
				if pi.Machine == vid {
					return mn.name + " still plans on it"
				}
			}
		}
		return ""
	})

	m.waitJobDone(30*time.Second, j1.ID)
	m.waitJobDone(30*time.Second, j2.ID)
	m.waitConverged(30 * time.Second)
	for _, id := range []string{j1.ID, j2.ID} {
		m.checkRuns(id, vid)
	}
	m.checkSlots(4)
}

// endDroppedRuns ends (code 0), until the returned func is called, the
// held runs (runtime.FakeManual) of the instances their node's plan no
// longer has: told to stop after their current item, they wait for it, and
// a held run would keep them, and their slot, for good. A plan drops
// instances whenever a node sees a machine go offline and come back (its
// heartbeats late on a loaded host). The func waits for the poller to end
// and may be called more than once.
func (m *mesh) endDroppedRuns() (stop func()) {
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		for {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
			for _, mn := range m.live() {
				me, v := mn.ID().String(), mn.sched.View()
				planned := map[string]bool{} // job/slot
				for _, pi := range v.Plan.Instances {
					if pi.Machine == me {
						planned[fmt.Sprintf("%s/%d", pi.Job, pi.Slot)] = true
					}
				}
				dropped := map[string]bool{} // instance IDs
				for _, in := range v.Instances {
					if !planned[fmt.Sprintf("%s/%d", in.Job, in.Slot)] {
						dropped[in.ID] = true
					}
				}
				for _, r := range m.runs.all() {
					if r.Machine == me && !r.Exited && dropped[r.Instance] {
						_ = mn.drv.Complete(r.Run, 0)
					}
				}
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		<-ended
	}
}

// release ends every held run of the live nodes (runtime.FakeManual) with
// code 0 and makes their later runs last runFor.
func (m *mesh) release(runFor time.Duration) {
	for _, mn := range m.live() {
		mn.drv.SetDuration(runFor) // runs started from now on; those before are listed below
		for _, id := range mn.drv.Running() {
			_ = mn.drv.Complete(id, 0)
		}
	}
}

// checkRuns checks a finished job: in the ledger, on every node, each item
// is done exactly once; on the drivers, each item ran to completion at least
// once outside machine skip unless skip did it, and duplicate completions
// (one item run by two machines in a brief disagreement: docs/design.md
// §9 allows it, the ledger absorbs it) stay rare: typically 0-2 in 300 items
// on an idle host; on a host so loaded that heartbeats arrive a second
// late, a few percent.
func (m *mesh) checkRuns(id, skip string) {
	m.t.Helper()
	who := m.checkDoneOnce(id)
	runs := m.completedRuns(id, skip)
	dups := 0
	for item, by := range who {
		got := runs[int(item)]
		if by != skip && got == 0 {
			m.t.Errorf("job %s item %d is done by %s in the ledger, but no run of it completed:\n%s", id, item, m.nameOf(by), m.describeRuns(id, int(item)))
		}
		extra := got - 1
		if by == skip {
			extra = got // done by skip before it died: any other completion is extra
		}
		if extra > 0 {
			dups += extra
			m.t.Logf("job %s item %d (done by %s) completed %d extra time(s):\n%s", id, item, m.nameOf(by), extra, m.describeRuns(id, int(item)))
		}
	}
	m.t.Logf("job %s: %d items, %d duplicate completed runs", id, len(who), dups)
	if dups > len(who)/10 {
		m.t.Errorf("job %s: %d duplicate completed runs for %d items (more than 10%%)", id, dups, len(who))
	}
}

// TestMeshPreemption: a job fills the farm; a second one arrives and the
// first job's secondaries are preempted, aggressively (stopped at once)
// and then, after the org setting changes, passively (their current item
// finishes first) (issue 6).
func TestMeshPreemption(t *testing.T) {
	m := newMesh(t, meshConfig{n: 3, interval: 250 * time.Millisecond, slots: 4, runFor: 2 * time.Second})
	m.formOrg()
	m.waitAllStatus(30*time.Second, StatusAvailable, m.ids()...)
	n0 := m.nodes[0].Node
	preempted := func(mode string) float64 {
		var sum float64
		for _, mn := range m.live() {
			sum += counterValue(mn.Node, "cshare_preemptions_total", "mode", mode)
		}
		return sum
	}

	for _, policy := range []string{"aggressive", "passive"} {
		t.Run(policy, func(t *testing.T) {
			if _, err := n0.orgs.SetSettings(ctxT(t), api.SettingsRequest{Set: map[string]string{"smartshare.preempt_policy": policy}}); err != nil {
				t.Fatal(err)
			}
			m.waitConverged(20 * time.Second)
			before := preempted(policy)
			// A fills all 12 slots.
			a := submit(t, n0, api.JobSubmit{Name: "fill-" + policy, CPUs: 2, MaxCPUs: ptr(int64(-1)), RangeStart: ptr[int64](1), RangeEnd: ptr[int64](200)})
			m.waitPlanned(20*time.Second, map[string]int{a.ID: 12})
			eventually(t, 20*time.Second, "12 runs of A", func() string {
				if k := m.running(a.ID); k != 12 {
					return fmt.Sprintf("%d", k)
				}
				return ""
			})
			startB := time.Now()
			b := submit(t, m.nodes[1].Node, api.JobSubmit{Name: "late-" + policy, CPUs: 2, MaxCPUs: ptr(int64(-1)), RangeStart: ptr[int64](1), RangeEnd: ptr[int64](200)})
			m.waitPlanned(20*time.Second, map[string]int{a.ID: 6, b.ID: 6})
			eventually(t, 30*time.Second, "6 runs of each job", func() string {
				m.checkSlots(4)
				if ka, kb := m.running(a.ID), m.running(b.ID); ka != 6 || kb != 6 {
					return fmt.Sprintf("A %d, B %d", ka, kb)
				}
				return ""
			})
			var stopped, finishedAfter int
			for _, r := range m.runs.all() {
				if r.Job != a.ID {
					continue
				}
				if r.Stopped {
					stopped++
				}
				if r.Finished && r.Ended.After(startB) {
					finishedAfter++
				}
			}
			got := preempted(policy) - before
			t.Logf("%s: %d of A's runs stopped, %d finished after B arrived, %v preemptions counted", policy, stopped, finishedAfter, got)
			if got < 6 {
				t.Errorf("%v %s preemptions counted, want at least 6", got, policy)
			}
			switch policy {
			case "aggressive":
				if stopped < 6 {
					t.Errorf("aggressive: %d of A's runs were stopped, want at least 6", stopped)
				}
			case "passive":
				if stopped != 0 {
					t.Errorf("passive: %d of A's runs were stopped, want none", stopped)
				}
			}
			for _, id := range []string{a.ID, b.ID} {
				if _, err := n0.jobs.CancelJob(ctxT(t), id); err != nil {
					t.Fatal(err)
				}
			}
			eventually(t, 20*time.Second, "cancelled jobs' runs to stop", func() string {
				if ka, kb := m.running(a.ID), m.running(b.ID); ka+kb != 0 {
					var sb strings.Builder
					for _, mn := range m.live() {
						fmt.Fprintf(&sb, "; %s: A %s B %s, instances %v", mn.name, jobState(t, mn.Node, a.ID).State, jobState(t, mn.Node, b.ID).State, localInstances(mn.Node))
					}
					for _, r := range m.runs.all() {
						if !r.Exited && (r.Job == a.ID || r.Job == b.ID) {
							fmt.Fprintf(&sb, "; running %s %s %s item %d", m.nameOf(r.Machine), r.Instance, r.Run, r.Item)
						}
					}
					return fmt.Sprintf("A %d, B %d%s", ka, kb, sb.String())
				}
				return ""
			})
		})
	}
}

// counterValue reads a counter of n's registry with one label.
func counterValue(n *Node, name, label, value string) float64 {
	mfs, _ := n.reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, mm := range mf.GetMetric() {
			for _, l := range mm.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return mm.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestJobAPI: bad submissions get a 400 with one line naming the field;
// cancel stops a job's instances; modify --max-cpus changes its allocation.
func TestJobAPI(t *testing.T) {
	m := newMesh(t, meshConfig{n: 2, interval: 250 * time.Millisecond, slots: 4, runFor: 5 * time.Second})
	m.formOrg()
	m.waitAllStatus(30*time.Second, StatusAvailable, m.ids()...)
	n := m.nodes[1].Node
	ctx := ctxT(t)
	for _, c := range []struct {
		req   api.JobSubmit
		field string
	}{
		{api.JobSubmit{Cmd: []string{"true"}, RangeStart: ptr[int64](5), RangeEnd: ptr[int64](1)}, "range"},
		{api.JobSubmit{Cmd: []string{"true"}, RangeStart: ptr[int64](-1), RangeEnd: ptr[int64](1)}, "range"},
		{api.JobSubmit{Cmd: []string{"true"}, RangeStart: ptr[int64](0), RangeEnd: ptr[int64](1 << 62)}, "range"},
		{api.JobSubmit{Cmd: []string{"true"}, MemoryMB: 1}, "memory"},
		{api.JobSubmit{Cmd: []string{"true"}, MemoryMB: 5}, "memory"}, // Docker's 6MB floor
		{api.JobSubmit{Cmd: []string{"true"}, MemoryMB: 17 << 20}, "memory"},
		{api.JobSubmit{Cmd: []string{"true"}, Driver: "podman"}, "driver"},
		{api.JobSubmit{Cmd: []string{"true"}, Priority: 10000}, "priority"},
		{api.JobSubmit{Cmd: []string{"true"}, Priority: 1e9}, "priority"},
		{api.JobSubmit{Cmd: []string{"true"}, MaxCPUs: ptr(int64(-5))}, "max_cpus"},
		{api.JobSubmit{Cmd: []string{"true"}, CoresMilli: -1}, "cores"},
		{api.JobSubmit{Cmd: []string{"true"}, CoresMilli: 4096001}, "cores"},
		{api.JobSubmit{Cmd: []string{"true"}, Env: map[string]string{"CSHARE_ITEM": "1"}}, "env"},
		{api.JobSubmit{Cmd: []string{"true"}, Env: map[string]string{"A B": "1"}}, "env"},
		{api.JobSubmit{}, "cmd"},
		{api.JobSubmit{Cmd: []string{""}}, "cmd"},
	} {
		_, err := n.jobs.SubmitJob(ctx, c.req)
		if statusCode(err) != http.StatusBadRequest {
			t.Errorf("submit %+v: got %v, want a 400", c.req, err)
			continue
		}
		if msg := err.Error(); !strings.HasPrefix(msg, c.field) || strings.Contains(msg, "\n") {
			t.Errorf("submit %+v: error %q does not start with %q on one line", c.req, msg, c.field)
		}
	}
	if jobs, _ := n.jobs.Jobs(ctx); len(jobs) != 0 {
		t.Fatalf("refused submissions left jobs: %+v", jobs)
	}

	// One admission rule: a job no machine fits, for GPUs, cores or memory
	// alike, is accepted with a warning naming the resource and the largest
	// machine's value, and job show gives the same reason.
	for _, c := range []struct {
		req  api.JobSubmit
		want string
	}{
		{api.JobSubmit{Cmd: []string{"true"}, GPUs: 1}, "1 GPU per instance, above the largest machine's 0"},
		{api.JobSubmit{Cmd: []string{"true"}, CoresMilli: jobspec.MaxCoresMilli}, "4096 cores per instance, above the largest machine's "},
		{api.JobSubmit{Cmd: []string{"true"}, MemoryMB: 1 << 20}, "1 TiB memory per instance, above the largest machine's "},
	} {
		js, err := n.jobs.SubmitJob(ctx, c.req)
		if err != nil {
			t.Fatalf("submit %+v: %v; want it accepted with a warning", c.req, err)
		}
		if len(js.Warnings) != 1 || !strings.Contains(js.Warnings[0], c.want) || strings.Contains(js.Warnings[0], "\n") {
			t.Errorf("submit %+v: warnings %q; want one line with %q", c.req, js.Warnings, c.want)
		}
		eventually(t, 20*time.Second, "the reason names the resource", func() string {
			j, err := n.jobs.Job(ctx, js.ID)
			if err != nil || !strings.HasPrefix(j.Reason, "requirements_not_met: ") || !strings.Contains(j.Reason, c.want) {
				return fmt.Sprintf("reason %q, %v", j.Reason, err)
			}
			return ""
		})
		if _, err := n.jobs.CancelJob(ctx, js.ID); err != nil {
			t.Fatal(err)
		}
	}
	if js, err := n.jobs.SubmitJob(ctx, api.JobSubmit{Cmd: []string{"true"}, CoresMilli: 500, MemoryMB: 64}); err != nil || len(js.Warnings) != 0 {
		t.Errorf("a job that fits: %v, warnings %q", err, js.Warnings)
	} else if _, err := n.jobs.CancelJob(ctx, js.ID); err != nil {
		t.Fatal(err)
	}

	// modify --max-cpus: 8 slots; max_cpus 6, then 3.
	j := submit(t, n, api.JobSubmit{CPUs: 1, MaxCPUs: ptr(int64(6)), RangeStart: ptr[int64](1), RangeEnd: ptr[int64](100)})
	m.waitPlanned(20*time.Second, map[string]int{j.ID: 6})
	eventually(t, 20*time.Second, "6 runs", func() string {
		if k := m.running(j.ID); k != 6 {
			return fmt.Sprintf("%d", k)
		}
		return ""
	})
	ji, err := n.jobs.ModifyJob(ctx, j.ID, api.JobModify{MaxCPUs: ptr(int64(3))})
	if err != nil {
		t.Fatal(err)
	}
	if ji.MaxCPUs != "3" {
		t.Fatalf("modified max_cpus reads %q", ji.MaxCPUs)
	}
	m.waitPlanned(20*time.Second, map[string]int{j.ID: 3})
	eventually(t, 20*time.Second, "3 runs", func() string {
		if k := m.running(j.ID); k != 3 {
			return fmt.Sprintf("%d", k)
		}
		return ""
	})
	for _, bad := range []api.JobModify{{MaxCPUs: ptr(int64(-2))}, {Priority: ptr(int64(0))}, {Priority: ptr(int64(1e9))}, {}} {
		if _, err := n.jobs.ModifyJob(ctx, j.ID, bad); statusCode(err) != http.StatusBadRequest {
			t.Fatalf("modify %+v: %v, want a 400", bad, err)
		}
	}

	// cancel: every instance stops, on every machine.
	ji, err = m.nodes[0].jobs.CancelJob(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "no runs of the cancelled job", func() string {
		if k := m.running(j.ID); k != 0 {
			return fmt.Sprintf("%d running", k)
		}
		for _, mn := range m.live() {
			if k := localInstances(mn.Node)[j.ID]; k != 0 {
				return fmt.Sprintf("%s has %d instances", mn.name, k)
			}
			if st := jobState(t, mn.Node, j.ID).State; st != ledger.JobCancelled {
				return mn.name + " sees " + st
			}
		}
		return ""
	})
	if _, err := n.jobs.CancelJob(ctx, j.ID); statusCode(err) != http.StatusConflict {
		t.Fatalf("cancel twice: %v", err)
	}
}

// More concurrent heads than an entry may name: a write names the newest
// ledger.MaxParents of them and still succeeds.
func TestWriteWithManyHeads(t *testing.T) {
	m := newMesh(t, meshConfig{n: 1})
	n := m.nodes[0].Node
	ctx := ctxT(t)
	if _, err := n.orgs.CreateOrg(ctx, api.OrgCreate{Name: "heads"}); err != nil {
		t.Fatal(err)
	}
	hs, clock := heads(n)
	signers := make([]*ledger.Entry, 0, 100)
	for i := 0; i < 100; i++ {
		k, _, err := crypto.GenerateEd25519Key(nil)
		if err != nil {
			t.Fatal(err)
		}
		s, _ := ledger.NewSigner(k)
		e, err := s.Sign(n.rep.Org(), ledger.KindMachineUpdate, ledger.MachineUpdate{}, hs, clock, time.Now().UnixMilli())
		if err != nil {
			t.Fatal(err)
		}
		signers = append(signers, e)
	}
	if err := n.importEntries(signers); err != nil {
		t.Fatal(err)
	}
	if h, _ := n.rep.Heads(); len(h) <= ledger.MaxParents {
		t.Fatalf("setup: %d heads", len(h))
	}
	if _, err := n.orgs.SetSettings(ctx, api.SettingsRequest{Set: map[string]string{"smartshare.mode": "none"}}); err != nil {
		t.Fatalf("write with %d heads: %v", 101, err)
	}
}

// Runs that no instance supervises (a container created by a request that
// was cancelled on the way, one whose removal failed, one of a job that
// ended while the node was down) are removed by the node's sweep, and the
// runs of its instances are left alone.
func TestSweepRemovesStrays(t *testing.T) {
	m := newMesh(t, meshConfig{n: 1, interval: 250 * time.Millisecond, slots: 2, runFor: time.Hour})
	m.formOrg()
	mn := m.nodes[0]
	m.waitAllStatus(30*time.Second, StatusAvailable, m.ids()...)
	j := submit(t, mn.Node, api.JobSubmit{CPUs: 2, MaxCPUs: ptr(int64(2)), RangeStart: ptr[int64](1), RangeEnd: ptr[int64](10)})
	eventually(t, 20*time.Second, "2 runs", func() string {
		if k := m.running(j.ID); k != 2 {
			return fmt.Sprintf("%d", k)
		}
		return ""
	})
	ctx := ctxT(t)
	spec := func(job string, item int) runtime.Spec {
		return runtime.Spec{Org: mn.rep.Org(), Job: job, Machine: mn.ID().String(), Instance: fmt.Sprintf("%s-s9-%d", job, item),
			Item: item, Cmd: []string{"true"}}
	}
	exited, err := mn.drv.Start(ctx, spec(j.ID, 7)) // an exited run of the active job, no instance's
	if err != nil {
		t.Fatal(err)
	}
	if err := mn.drv.Complete(exited, 0); err != nil {
		t.Fatal(err)
	}
	orphan, err := mn.drv.Start(ctx, spec("0123456789ab", 1)) // a running run of an unknown job
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "strays removed", func() string {
		runs, err := mn.drv.List(ctx, map[string]string{runtime.LabelOrg: mn.rep.Org()})
		if err != nil {
			return err.Error()
		}
		var left []string
		mine := 0
		for _, r := range runs {
			if r.ID == exited || r.ID == orphan {
				left = append(left, string(r.ID))
			} else if r.Running {
				mine++
			}
		}
		if len(left) > 0 {
			return fmt.Sprintf("left: %v", left)
		}
		if mine != 2 {
			return fmt.Sprintf("the job's own runs: %d running, want 2", mine)
		}
		return ""
	})
}

// TestJobLogsFromAnyMachine: an item's output stays on the machine that ran
// it, and `job logs` on any other machine of the org fetches it from there;
// once that machine is gone, the error names it.
func TestJobLogsFromAnyMachine(t *testing.T) {
	m := newMesh(t, meshConfig{n: 2, interval: 250 * time.Millisecond, slots: 2, runFor: 50 * time.Millisecond, onePerson: true})
	m.formOrg()
	m.waitAllStatus(30*time.Second, StatusAvailable, m.ids()...)
	j := submit(t, m.nodes[0].Node, api.JobSubmit{Name: "logs", CPUs: 4, MaxCPUs: ptr(int64(4)), RangeStart: ptr[int64](1), RangeEnd: ptr[int64](8)})
	m.waitJobDone(30*time.Second, j.ID)
	who := m.checkDoneOnce(j.ID)
	ctx := ctxT(t)
	byID := map[string]*meshNode{}
	for _, mn := range m.nodes {
		byID[mn.ID().String()] = mn
	}
	fetched := false // an output was fetched from the other machine
	for item, machine := range who {
		ran := byID[machine]
		here, err := ran.jobs.JobLogs(ctx, j.ID, item)
		if err != nil || len(here) == 0 {
			t.Fatalf("%s ran item %d: logs %q, %v", ran.name, item, here, err)
		}
		for _, mn := range m.nodes {
			if mn != ran {
				// An earlier attempt's output here (a preempted run's)
				// is not the item's.
				if err := mn.logs.Save(j.ID, item, []byte("a stopped attempt\n")); err != nil {
					t.Fatal(err)
				}
			}
			got, err := mn.jobs.JobLogs(ctx, j.ID, item)
			if err != nil || !bytes.Equal(got, here) {
				t.Fatalf("%s: logs of item %d (ran on %s): %q, %v; want %q", mn.name, item, ran.name, got, err, here)
			}
			fetched = fetched || mn != ran
		}
	}
	if !fetched {
		t.Fatal("no output was fetched from another machine")
	}
	// The machine that ran item 1 stops; the other can no longer fetch it.
	ran := 0
	if who[1] == m.nodes[1].ID().String() {
		ran = 1
	}
	gone := m.nodes[ran].ID().String()
	m.stop(ran)
	_, err := m.nodes[1-ran].jobs.JobLogs(ctx, j.ID, 1)
	if statusCode(err) != http.StatusBadGateway || !strings.Contains(err.Error(), gone) {
		t.Fatalf("logs of item 1 once its machine is gone: %v", err)
	}
}

// TestJobLogsOfRunningItem: asked for the output of an item still running,
// every machine names the one running it.
func TestJobLogsOfRunningItem(t *testing.T) {
	m := newMesh(t, meshConfig{n: 2, interval: 250 * time.Millisecond, slots: 1, runFor: time.Minute, onePerson: true})
	m.formOrg()
	m.waitAllStatus(30*time.Second, StatusAvailable, m.ids()...)
	j := submit(t, m.nodes[0].Node, api.JobSubmit{Name: "long", CPUs: 2, MaxCPUs: ptr(int64(2)), RangeStart: ptr[int64](1), RangeEnd: ptr[int64](2)})
	ctx := ctxT(t)
	eventually(t, 30*time.Second, "both machines name the runner of each item", func() string {
		runner := map[int64]string{}
		for _, mn := range m.nodes {
			for item := int64(1); item <= 2; item++ {
				_, err := mn.jobs.JobLogs(ctx, j.ID, item)
				msg := fmt.Sprint(err)
				i := strings.Index(msg, "is running on machine ")
				if i < 0 {
					return fmt.Sprintf("%s, item %d: %v", mn.name, item, err)
				}
				who := strings.Fields(msg[i+len("is running on machine "):])[0]
				if r, ok := runner[item]; ok && r != who {
					return fmt.Sprintf("item %d: %s and %s", item, r, who)
				}
				runner[item] = who
			}
		}
		if runner[1] == runner[2] {
			return "both items on " + runner[1]
		}
		return ""
	})
	if _, err := m.nodes[0].jobs.CancelJob(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }
