package sched

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/smartshare"
)

// explainOrg is an org of seven machines and two jobs: hi (priority 1)
// runs its two primaries on a, lo (priority 5, 8 GB an instance) wants ten.
func explainOrg() (ExplainInput, *ledger.State) {
	machine := func(id, status string, slots, cpus, memMB int64) *ledger.Machine {
		return &ledger.Machine{ID: id, Name: "m-" + id, Status: status, HasLimits: true, Hardware: ledger.Hardware{CPUs: cpus},
			Limits: ledger.Limits{CPULimit: 100, MemoryLimit: memMB, MaxConcurrentJobs: slots}}
	}
	st := &ledger.State{Machines: map[string]*ledger.Machine{
		"a": machine("a", ledger.MachineApproved, 2, 4, 16384),
		"b": machine("b", ledger.MachinePending, 2, 4, 16384),
		"c": machine("c", ledger.MachineApproved, 2, 4, 16384), // offline
		"d": machine("d", ledger.MachineApproved, 0, 4, 16384),
		"e": machine("e", ledger.MachineApproved, 1, 4, 4096),
		"f": machine("f", ledger.MachineApproved, 2, 4, 16384), // rented
		"g": machine("g", ledger.MachineApproved, 1, 4, 8192),
		"h": machine("h", ledger.MachineRemoved, 1, 4, 8192),
	}, Jobs: map[string]*ledger.Job{
		"hi": {ID: "hi", State: ledger.JobActive, Priority: 1, Spec: ledger.JobSpec{Name: "urgent", CPUs: 2, MemoryMB: 8192}, Items: ledger.NewItemList(4)},
		"lo": {ID: "lo", State: ledger.JobActive, Priority: 5, Spec: ledger.JobSpec{Name: "render", CPUs: 10, MemoryMB: 8192}, Items: ledger.NewItemList(10)},
	}}
	in := smartshare.Input{Config: smartshare.DefaultConfig()}
	for _, id := range []string{"a", "d", "e", "f", "g"} {
		mc := machineCapacity(st.Machines[id])
		if id == "f" {
			mc.Slots = 0 // every slot reserved by a contract
		}
		in.Machines = append(in.Machines, mc)
	}
	in.Jobs = []smartshare.Job{
		{ID: "hi", Priority: 1, CPUs: 2, ItemsRemaining: 4, MemoryMB: 8192, Submitted: 1},
		{ID: "lo", Priority: 5, CPUs: 10, ItemsRemaining: 10, MemoryMB: 8192, Submitted: 2},
	}
	in.Instances = []smartshare.Instance{{Job: "hi", Machine: "a", Slot: 0, Kind: "primary", Started: 1}, {Job: "hi", Machine: "a", Slot: 1, Kind: "primary", Started: 1}}
	if err := in.Validate(); err != nil {
		panic(err)
	}
	return ExplainInput{State: st, Job: st.Jobs["lo"], PlanIn: in, Plan: smartshare.Plan(in), DiskFull: map[string]bool{"e": true}}, st
}

func codes(mw []MachineWhy) map[string]string {
	out := map[string]string{}
	for _, m := range mw {
		var cs []string
		for _, w := range m.Reasons {
			cs = append(cs, w.Code)
		}
		if m.Instances > 0 {
			cs = append(cs, "runs")
		}
		out[m.Machine] = strings.Join(cs, ",")
	}
	return out
}

// TestExplainPerMachine: each machine of the org says why the waiting job
// has no instance there, from the plan the balancer made.
func TestExplainPerMachine(t *testing.T) {
	x, _ := explainOrg()
	got := Explain(x)
	want := map[string]string{
		"a": WhyBusyHigher, "b": WhyPending, "c": WhyOffline, "d": WhyNoSlots,
		"e": WhyDiskFull + "," + WhyLacksMemory, "f": WhyRented, "g": "runs",
	}
	if c := codes(got); !reflect.DeepEqual(c, want) {
		t.Fatalf("reasons by machine:\n got %v\nwant %v", c, want)
	}
	for _, m := range got {
		for _, w := range m.Reasons {
			if w.Text == "" {
				t.Errorf("%s: %s without a text", m.Machine, w.Code)
			}
		}
		if m.Machine == "a" && !strings.Contains(m.Reasons[0].Text, "urgent (priority 1) ×2") {
			t.Errorf("a: %q does not name the job that holds its slots", m.Reasons[0].Text)
		}
		if m.Machine == "e" && !strings.Contains(m.Reasons[1].Text, "needs 8 GiB memory; it offers 4 GiB") {
			t.Errorf("e: %q", m.Reasons[1].Text)
		}
	}
	// The job of higher rank runs on a and is explained as having all it
	// can use where it runs nothing.
	x.Job = x.State.Jobs["hi"]
	if c := codes(Explain(x)); c["a"] != "runs" || c["g"] != WhyBusyShared {
		t.Errorf("hi: %v", c)
	}
}

// TestExplainJobWide: a job held by a policy, one with every instance it
// can use, and one that ended.
func TestExplainJobWide(t *testing.T) {
	x, st := explainOrg()
	lo := *st.Jobs["lo"]
	lo.Queued = "AssocMaxJobsLimit: its submitter runs 1 job, the most policy.max_concurrent_jobs_per_user allows"
	x.Job = &lo
	x.PlanIn.Jobs = x.PlanIn.Jobs[:1]
	x.Plan = smartshare.Plan(x.PlanIn)
	if c := codes(Explain(x)); c["g"] != WhyPolicy || c["e"] != WhyDiskFull+","+WhyLacksMemory {
		t.Errorf("queued: %v", c)
	}

	x, st = explainOrg()
	few := *st.Jobs["lo"]
	few.Items = ledger.NewItemList(1)
	x.Job = &few
	x.PlanIn.Jobs[1].ItemsRemaining = 1
	x.Plan = smartshare.Plan(x.PlanIn)
	if c := codes(Explain(x)); c["g"] != "runs" || c["a"] != WhyNotNeeded {
		t.Errorf("one item: %v", c)
	}

	done := *st.Jobs["lo"]
	done.State = ledger.JobDone
	x.Job = &done
	if got := Explain(x); got != nil {
		t.Errorf("an ended job: %+v, want nothing", got)
	}
}

// TestExplainResourcesInUse: a machine with a free slot whose memory the
// other job's instance holds.
func TestExplainResourcesInUse(t *testing.T) {
	x, st := explainOrg()
	st.Machines["a"].Limits.MaxConcurrentJobs = 3
	x.PlanIn.Machines[0].Slots = 3
	x.Plan = smartshare.Plan(x.PlanIn)
	c := codes(Explain(x))
	if c["a"] != WhyResources {
		t.Fatalf("a: %v", c)
	}
}

// TestExplainProperties: over random orgs planned by the balancer, every
// machine that is not removed is explained once, in ID order; its
// instances are the plan's; a machine with none of an active job's
// instances always says why, with a known code and a sentence; a machine
// the plan cannot use says only that. The orgs reach every reason but
// next_plan (which needs a plan older than the job).
func TestExplainProperties(t *testing.T) {
	known := map[string]bool{WhyPending: true, WhyRejected: true, WhyOffline: true, WhyNoSlots: true, WhyRented: true, WhyDiskFull: true,
		WhyLacksCores: true, WhyLacksMemory: true, WhyLacksGPUs: true, WhyLacksGPUMem: true, WhyLacksDisk: true, WhyPolicy: true,
		WhyNotNeeded: true, WhySSDisabled: true, WhyBusyHigher: true, WhyBusyShared: true, WhyResources: true, WhyNextPlan: true}
	rng := rand.New(rand.NewPCG(7, 33))
	statuses := []string{ledger.MachineApproved, ledger.MachineApproved, ledger.MachineApproved, ledger.MachinePending, ledger.MachineRejected, ledger.MachineRemoved}
	seen := map[string]int{}
	for round := range 500 {
		st := &ledger.State{Machines: map[string]*ledger.Machine{}, Jobs: map[string]*ledger.Job{}}
		in := smartshare.Input{Config: smartshare.DefaultConfig()}
		if rng.IntN(4) == 0 {
			in.Config.Mode = smartshare.ModeNone
		}
		full := map[string]bool{}
		for i := range 1 + rng.IntN(6) {
			id := fmt.Sprintf("m%d", i)
			m := &ledger.Machine{ID: id, Name: id, Status: statuses[rng.IntN(len(statuses))], HasLimits: true, Hardware: ledger.Hardware{CPUs: 1 + rng.Int64N(8)},
				Limits: ledger.Limits{CPULimit: 100, MemoryLimit: 1024 * (1 + rng.Int64N(16)), MaxConcurrentJobs: rng.Int64N(4), DiskLimit: 2048 * (1 + rng.Int64N(8))}}
			for g := range rng.IntN(3) {
				m.Limits.GPUs = append(m.Limits.GPUs, ledger.GPULimit{Device: int64(g), MemoryMB: 8192 * (1 + rng.Int64N(3))})
			}
			st.Machines[id] = m
			if m.Status == ledger.MachineApproved && rng.IntN(5) > 0 { // online
				mc := machineCapacity(m)
				if rng.IntN(6) == 0 {
					mc.Slots = 0 // rented
				}
				in.Machines = append(in.Machines, mc)
				full[id] = rng.IntN(8) == 0
			}
		}
		for i := range 1 + rng.IntN(4) {
			id := fmt.Sprintf("j%d", i)
			j := &ledger.Job{ID: id, State: ledger.JobActive, Priority: 1 + rng.Int64N(3), Items: ledger.NewItemList(1 + rng.IntN(12)),
				Spec: ledger.JobSpec{Name: id, CPUs: 1 + rng.Int64N(3), MemoryMB: 512 * rng.Int64N(12)}}
			if rng.IntN(4) == 0 {
				j.Spec.GPUs = 1
				if rng.IntN(2) == 0 {
					j.Spec.GPUMemoryMB = 16384
				}
			}
			if rng.IntN(4) == 0 {
				j.Spec.Cores = 1000 * (1 + rng.Int64N(6))
			}
			if rng.IntN(4) == 0 {
				j.Spec.DiskMB = 4096 * (1 + rng.Int64N(4))
			}
			if rng.IntN(6) == 0 {
				j.Queued = "held by policy.max_concurrent_jobs_per_user"
			}
			st.Jobs[id] = j
			if j.Queued == "" {
				in.Jobs = append(in.Jobs, smartshare.Job{ID: id, Priority: int(j.Priority), CPUs: int(j.Spec.CPUs), Submitted: int64(i),
					ItemsRemaining: j.Items.Len(), MemoryMB: j.Spec.MemoryMB, GPUs: int(j.Spec.GPUs), Cores: j.Spec.Cores, DiskMB: j.Spec.DiskMB})
			}
		}
		// Running instances, placed before the jobs of higher rank came
		// (a running primary is not preempted).
		for _, m := range in.Machines {
			for slot := range m.Slots {
				if len(in.Jobs) > 0 && rng.IntN(3) == 0 {
					in.Instances = append(in.Instances, smartshare.Instance{Job: in.Jobs[rng.IntN(len(in.Jobs))].ID, Machine: m.ID, Slot: slot,
						Kind: []string{smartshare.KindPrimary, smartshare.KindSecondary}[rng.IntN(2)], Started: int64(1 + slot)})
				}
			}
		}
		if err := in.Validate(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		plan := smartshare.Plan(in)
		online := map[string]bool{}
		for _, m := range in.Machines {
			online[m.ID] = true
		}
		for _, j := range st.Jobs {
			got := Explain(ExplainInput{State: st, Job: j, PlanIn: in, Plan: plan, DiskFull: full})
			var ids []string
			for _, m := range st.SortedMachines() {
				if m.Status != ledger.MachineRemoved {
					ids = append(ids, m.ID)
				}
			}
			if len(got) != len(ids) {
				t.Fatalf("round %d, %s: %d machines explained, want %d", round, j.ID, len(got), len(ids))
			}
			for i, mw := range got {
				planned := 0
				for _, pi := range plan.Instances {
					if pi.Job == j.ID && pi.Machine == mw.Machine {
						planned++
					}
				}
				switch {
				case mw.Machine != ids[i]:
					t.Fatalf("round %d, %s: machine %d is %s, want %s", round, j.ID, i, mw.Machine, ids[i])
				case mw.Instances != planned:
					t.Fatalf("round %d, %s on %s: %d instances, the plan has %d", round, j.ID, mw.Machine, mw.Instances, planned)
				case planned == 0 && len(mw.Reasons) == 0:
					t.Fatalf("round %d, %s on %s: no instance and no reason", round, j.ID, mw.Machine)
				case !online[mw.Machine] && (len(mw.Reasons) != 1 || planned > 0):
					t.Fatalf("round %d, %s on %s (not in the plan): %+v", round, j.ID, mw.Machine, mw.Reasons)
				}
				for _, r := range mw.Reasons {
					seen[r.Code]++
					if !known[r.Code] || r.Text == "" {
						t.Fatalf("round %d, %s on %s: reason %+v", round, j.ID, mw.Machine, r)
					}
				}
			}
		}
	}
	for code := range known {
		if seen[code] == 0 && code != WhyNextPlan {
			t.Errorf("no random org gave %s (seen: %v)", code, seen)
		}
	}
}

// BenchmarkExplain: one job's explanation in an org of 1000 machines (4
// slots each) and 2000 jobs, the plan full.
func BenchmarkExplain(b *testing.B) {
	st := &ledger.State{Machines: map[string]*ledger.Machine{}, Jobs: map[string]*ledger.Job{}}
	in := smartshare.Input{Config: smartshare.DefaultConfig()}
	for i := range 1000 {
		id := fmt.Sprintf("m%04d", i)
		m := &ledger.Machine{ID: id, Name: id, Status: ledger.MachineApproved, HasLimits: true, Hardware: ledger.Hardware{CPUs: 8},
			Limits: ledger.Limits{CPULimit: 100, MemoryLimit: 16384, MaxConcurrentJobs: 4}}
		st.Machines[id] = m
		in.Machines = append(in.Machines, machineCapacity(m))
	}
	for i := range 2000 {
		id := fmt.Sprintf("j%04d", i)
		st.Jobs[id] = &ledger.Job{ID: id, State: ledger.JobActive, Priority: int64(1 + i%5), Items: ledger.NewItemList(100), Spec: ledger.JobSpec{Name: id, CPUs: 2}}
		in.Jobs = append(in.Jobs, smartshare.Job{ID: id, Priority: 1 + i%5, CPUs: 2, Submitted: int64(i), ItemsRemaining: 100})
	}
	x := ExplainInput{State: st, Job: st.Jobs["j1999"], PlanIn: in, Plan: smartshare.Plan(in)}
	b.ResetTimer()
	for b.Loop() {
		if len(Explain(x)) != 1000 {
			b.Fatal("not every machine explained")
		}
	}
}
