package sched

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/jobspec"
	"github.com/cshare/cshare/smartshare"
)

// Wait reasons, machine by machine (Explain): why a machine runs none, or
// no more, of a job's instances.
const (
	WhyPending     = "not_approved"         // the machine waits for an admin's approval
	WhyRejected    = "rejected"             // an admin rejected it
	WhyOffline     = "offline"              // no heartbeat within 3 intervals
	WhyNoSlots     = "no_slots"             // its max_concurrent_jobs is 0
	WhyRented      = "rented"               // its slots are reserved by market contracts
	WhyDiskFull    = "disk_full"            // below its disk reserve: it takes no item
	WhyLacksCores  = "lacks_cores"          // an instance needs more cores than it has
	WhyLacksMemory = "lacks_memory"         // ... more memory
	WhyLacksGPUs   = "lacks_gpus"           // ... more GPUs
	WhyLacksGPUMem = "lacks_gpu_memory"     // ... GPUs with more memory
	WhyLacksDisk   = "lacks_disk"           // ... more disk
	WhyPolicy      = "policy_limit"         // an org policy holds the job in its queue
	WhyNotNeeded   = "not_needed"           // the job has every instance it can use
	WhySSDisabled  = "smartshare_disabled"  // the job runs its primaries only
	WhyBusyHigher  = "busy_higher_priority" // its slots go to jobs ranked above this one
	WhyBusyShared  = "busy_shared"          // its slots are shared with jobs of equal or lower rank
	WhyResources   = "resources_in_use"     // free slots, but not the cores, memory or GPUs
	WhyNextPlan    = "next_plan"            // nothing stops it: the next plan may place it
)

// Why is one reason: its code (above) and what it means here.
type Why struct {
	Code string
	Text string
}

// MachineWhy is one machine's part in a job's explanation: the instances
// of the job the plan puts on it, and why it has none (or no more).
type MachineWhy struct {
	Machine   string
	Name      string
	Status    string // approved, pending, rejected
	Online    bool
	Instances int
	Reasons   []Why // none: it runs what the job can use of it
}

// ExplainInput is what Explain reads: the ledger's state, the job, the
// plan and the input it was made from (its machines are the approved ones
// online, less what contracts reserve), and the machines whose heartbeat
// says their disk is full.
type ExplainInput struct {
	State    *ledger.State
	Job      *ledger.Job
	PlanIn   smartshare.Input
	Plan     smartshare.Result
	DiskFull map[string]bool
}

// Explain says, for every machine of the org that is not removed (in ID
// order), why it runs none, or no more, of job's instances: Vast's
// --explain. A job that ended gets nothing (nothing of it waits). A pure function of its input (no clock, no map order), so
// the API, the CLI and the dashboard say the same.
func Explain(x ExplainInput) []MachineWhy {
	st, j := x.State, x.Job
	online := map[string]smartshare.Machine{}
	for _, m := range x.PlanIn.Machines {
		online[m.ID] = m
	}
	var sum smartshare.JobSummary
	for _, s := range x.Plan.Jobs {
		if s.ID == j.ID {
			sum = s
		}
	}
	if j.State != ledger.JobActive {
		return nil // nothing of it waits
	}
	rank := map[string]int{}
	for i, pj := range rankJobs(x.PlanIn.Jobs) {
		rank[pj] = i
	}
	jobs := make(map[string]smartshare.Job, len(x.PlanIn.Jobs))
	for _, pj := range x.PlanIn.Jobs {
		jobs[pj.ID] = pj
	}
	onMachine := map[string][]smartshare.Instance{}
	planned := 0
	for _, in := range x.Plan.Instances {
		onMachine[in.Machine] = append(onMachine[in.Machine], in)
		if in.Job == j.ID {
			planned++
		}
	}
	pending := int64(j.Items.Len()) - j.Done - j.Failed
	var out []MachineWhy
	for _, m := range st.SortedMachines() {
		if m.Status == ledger.MachineRemoved {
			continue
		}
		mc, on := online[m.ID]
		mw := MachineWhy{Machine: m.ID, Name: m.Name, Status: m.Status, Online: on}
		for _, in := range onMachine[m.ID] {
			if in.Job == j.ID {
				mw.Instances++
			}
		}
		add := func(code, format string, a ...any) {
			mw.Reasons = append(mw.Reasons, Why{code, fmt.Sprintf(format, a...)})
		}
		switch {
		case m.Status == ledger.MachinePending:
			add(WhyPending, "it waits for an admin to approve it (cshare machine approve)")
		case m.Status == ledger.MachineRejected:
			add(WhyRejected, "an admin rejected it")
		case !on:
			add(WhyOffline, "no heartbeat from it within 3 intervals")
		default:
			explainOn(x, m, mc, add)
			if len(mw.Reasons) > 0 || mw.Instances > 0 {
				break
			}
			switch {
			case j.Queued != "":
				add(WhyPolicy, "%s", j.Queued)
			case sum.Reason == smartshare.ReasonSSDisabled && sum.Primaries >= min(int(j.Spec.CPUs), int(pending)) && int64(planned) < pending:
				add(WhySSDisabled, "the job runs its primaries only (max_cpus 0, or the org's smartshare.mode is none)")
			case pending == 0 || (sum.Wanted > 0 && planned >= sum.Wanted):
				add(WhyNotNeeded, "the job has every instance it can use (%d planned, %d pending items)", planned, pending)
			default:
				explainBusy(x, mc, onMachine[m.ID], rank, jobs, add)
			}
		}
		out = append(out, mw)
	}
	return out
}

// explainOn adds what keeps machine m (online, approved; mc as the plan
// sees it) from ever holding one instance of the job.
func explainOn(x ExplainInput, m *ledger.Machine, mc smartshare.Machine, add func(code, format string, a ...any)) {
	spec := x.Job.Spec
	full := machineCapacity(m)
	switch {
	case full.Slots == 0:
		add(WhyNoSlots, "it takes no jobs (max_concurrent_jobs 0)")
		return
	case mc.Slots == 0:
		add(WhyRented, "its %d slots are reserved by market contracts", full.Slots)
		return
	}
	if x.DiskFull[m.ID] {
		add(WhyDiskFull, "its data directory is below its disk reserve: it takes no new item")
	}
	lacks := func(need, has int64) bool { return need > 0 && has > 0 && has < need }
	if lacks(spec.Cores, full.Cores) {
		add(WhyLacksCores, "an instance needs %s cores; it offers %s", jobspec.FormatCores(spec.Cores), jobspec.FormatCores(full.Cores))
	}
	if lacks(spec.MemoryMB, full.MemoryMB) {
		add(WhyLacksMemory, "an instance needs %s memory; it offers %s", jobspec.FormatMB(spec.MemoryMB), jobspec.FormatMB(full.MemoryMB))
	}
	if lacks(spec.DiskMB, full.DiskMB) {
		add(WhyLacksDisk, "an instance needs %s disk; it offers %s", jobspec.FormatMB(spec.DiskMB), jobspec.FormatMB(full.DiskMB))
	}
	if spec.GPUs > 0 {
		gpus, big := int64(full.GPUs), int64(0)
		for _, g := range m.Limits.GPUs {
			if g.MemoryMB >= spec.GPUMemoryMB {
				big++
			}
		}
		switch {
		case gpus < spec.GPUs:
			add(WhyLacksGPUs, "an instance needs %s; it offers %d", plural(spec.GPUs, "GPU"), gpus)
		case spec.GPUMemoryMB > 0 && big < spec.GPUs:
			add(WhyLacksGPUMem, "an instance needs %s with at least %s each; it has %d such", plural(spec.GPUs, "GPU"), jobspec.FormatMB(spec.GPUMemoryMB), big)
		}
	}
}

// explainBusy says why a machine that could hold an instance of the job
// has none in the plan: its slots, or their resources, go to other jobs.
func explainBusy(x ExplainInput, mc smartshare.Machine, on []smartshare.Instance, rank map[string]int, jobs map[string]smartshare.Job,
	add func(code, format string, a ...any)) {
	me, ok := rank[x.Job.ID]
	if !ok {
		add(WhyNextPlan, "the plan was made before the job was seen: the next plan places it")
		return
	}
	higher := true
	var cores, mem, disk int64
	var gpus int
	count := map[string]int{}
	var order []string
	for _, in := range on {
		if count[in.Job] == 0 {
			order = append(order, in.Job)
		}
		count[in.Job]++
		if r, ok := rank[in.Job]; !ok || r > me {
			higher = false
		}
		pj := jobs[in.Job]
		cores, mem, disk, gpus = cores+pj.Cores, mem+pj.MemoryMB, disk+pj.DiskMB, gpus+pj.GPUs
	}
	var who []string
	for _, id := range order {
		name := id
		if j := x.State.Jobs[id]; j != nil && j.Spec.Name != "" {
			name = j.Spec.Name
		}
		who = append(who, fmt.Sprintf("%s (priority %d) ×%d", name, jobs[id].Priority, count[id]))
	}
	if len(on) >= mc.Slots {
		if higher {
			add(WhyBusyHigher, "its %d slots go to jobs ranked above this one: %s", mc.Slots, strings.Join(who, ", "))
		} else {
			add(WhyBusyShared, "its %d slots are shared with other jobs (running primaries are not preempted; secondaries are balanced): %s",
				mc.Slots, strings.Join(who, ", "))
		}
		return
	}
	spec := x.Job.Spec
	short := func(capacity, used, need int64) bool { return need > 0 && capacity > 0 && capacity-used < need }
	var res []string
	if short(mc.Cores, cores, spec.Cores) {
		res = append(res, "cores ("+jobspec.FormatCores(max(mc.Cores-cores, 0))+" free)")
	}
	if short(mc.MemoryMB, mem, spec.MemoryMB) {
		res = append(res, "memory ("+jobspec.FormatMB(max(mc.MemoryMB-mem, 0))+" free)")
	}
	if short(mc.DiskMB, disk, spec.DiskMB) {
		res = append(res, "disk ("+jobspec.FormatMB(max(mc.DiskMB-disk, 0))+" free)")
	}
	if spec.GPUs > 0 && int64(mc.GPUs-gpus) < spec.GPUs {
		res = append(res, "GPUs ("+strconv.Itoa(max(mc.GPUs-gpus, 0))+" free)")
	}
	if len(res) > 0 {
		add(WhyResources, "it has free slots, but too little %s for an instance beside %s", strings.Join(res, ", "), strings.Join(who, ", "))
		return
	}
	add(WhyNextPlan, "nothing in the plan stops it; the next plan may place an instance here (plans follow heartbeats)")
}

// rankJobs orders the plan's jobs as the balancer ranks them: priority
// (1 first; 0 counts as the lowest), then submission.
func rankJobs(js []smartshare.Job) []string {
	type k struct {
		id        string
		pri       int
		submitted int64
	}
	ks := make([]k, 0, len(js))
	for _, j := range js {
		p := j.Priority
		if p <= 0 {
			p = smartshare.DefaultPriority
		}
		ks = append(ks, k{j.ID, p, j.Submitted})
	}
	slices.SortStableFunc(ks, func(a, b k) int { return cmp.Or(cmp.Compare(a.pri, b.pri), cmp.Compare(a.submitted, b.submitted)) })
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.id
	}
	return out
}
