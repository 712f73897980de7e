package sched

import (
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
	for _, m := range Explain(x) {
		if len(m.Reasons) > 0 {
			t.Errorf("an ended job: %s says %v", m.Machine, m.Reasons)
		}
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
