// Package plandiff turns a new SmartShare plan into the actions one machine
// takes to follow it: start an instance on a slot, stop one now, stop one
// after its current item, or relabel one (primary/secondary). It is pure,
// like raft's Ready: the scheduler's loop gathers this machine's instances
// and the plan, calls Diff, and carries the actions out; nothing here
// touches a driver, a lock or a clock, so every case is a table test.
//
// The rules, slot by slot (this machine's slots only):
//   - an instance whose job is no longer active stops now (its item goes
//     back to the agenda; the job was cancelled or finished);
//   - an instance the plan preempts stops now (aggressive) or after its
//     item (passive), and is counted as preempted once;
//   - an instance whose slot the plan gives another job without a
//     preemption, or that the plan no longer has, finishes its item;
//   - an instance the plan keeps takes the plan's kind;
//   - a planned slot with no instance starts one, if this machine has the
//     job's driver and enough free GPUs with the memory the job asks for
//     (allocated lowest device first, in
//     slot order, never one a running or stopping instance holds).
//
// Actions come sorted by slot, then kind, so the same input gives the same
// actions. An action that would change nothing (stopping an instance
// already stopping for the same cause) is left out.
package plandiff

import (
	"sort"

	"github.com/cshare/cshare/smartshare"
)

// Kind is what an action does.
type Kind string

// The actions.
const (
	Start     Kind = "start"      // start an instance of Job on Slot
	StopNow   Kind = "stop_now"   // kill the run; the item goes back to the agenda
	StopAfter Kind = "stop_after" // finish the current item, then stop
	Relabel   Kind = "relabel"    // the instance stays, with kind InstanceKind
)

// Action is one thing the machine does to follow the plan.
type Action struct {
	Kind         Kind
	Slot         int
	Job          string
	InstanceKind string // Start, Relabel: "primary" or "secondary"
	GPUs         []int  // Start: the devices the instance gets
	Preempt      string // StopNow, StopAfter: "aggressive" or "passive" when the plan preempts it, else ""
	Reason       string // why, for logs and tests
}

// Running is one of this machine's instances as the scheduler sees it.
type Running struct {
	Slot      int
	Job       string
	Kind      string
	GPUs      []int
	Stopping  bool   // already told to stop after its item
	Killed    bool   // already told to stop now
	Preempted string // the preemption already counted for it, or ""
}

// Job is what Diff needs of an active job: its driver, GPUs per instance
// and the least memory (MB) each of them must have (0: any).
type Job struct {
	Driver      string
	GPUs        int
	GPUMemoryMB int64
}

// Input is everything Diff reads.
type Input struct {
	Machine string            // this machine's ID
	Plan    smartshare.Result // the new plan
	Running []Running         // this machine's instances, any order
	Active  map[string]Job    // the active jobs, by ID
	Drivers map[string]bool   // the driver names this machine has
	GPUs    []int             // this machine's GPU devices, in allocation order
	// GPUMemory is the memory (MB) this machine offers on each of its GPU
	// devices (node.yaml's or NVML's); a job's gpu_memory_mb leaves out
	// the devices with less.
	GPUMemory map[int]int64
}

// Diff returns the actions that make this machine follow in.Plan.
func Diff(in Input) []Action {
	target := map[int]smartshare.Instance{}
	for _, pi := range in.Plan.Instances {
		if pi.Machine == in.Machine {
			target[pi.Slot] = pi
		}
	}
	preempt := map[int]string{}
	for _, p := range in.Plan.Preempt {
		if p.Machine == in.Machine {
			preempt[p.Slot] = p.Mode
		}
	}
	running := append([]Running(nil), in.Running...)
	sort.Slice(running, func(a, b int) bool { return running[a].Slot < running[b].Slot })
	var out []Action
	busy := map[int]bool{}
	used := map[int]bool{}
	for _, r := range running {
		busy[r.Slot] = true
		for _, g := range r.GPUs {
			used[g] = true
		}
		t, planned := target[r.Slot]
		_, active := in.Active[r.Job]
		var a Action
		switch {
		case planned && t.Job == r.Job:
			if r.Kind != t.Kind {
				out = append(out, Action{Kind: Relabel, Slot: r.Slot, Job: r.Job, InstanceKind: t.Kind, Reason: "the plan makes it " + t.Kind})
			}
			continue
		case !active:
			a = Action{Kind: StopNow, Reason: "its job ended"}
		case preempt[r.Slot] == "passive":
			a = Action{Kind: StopAfter, Preempt: "passive", Reason: "preempted (passive)"}
		case preempt[r.Slot] == "aggressive":
			a = Action{Kind: StopNow, Preempt: "aggressive", Reason: "preempted (aggressive)"}
		case planned:
			// The plan saw the slot free (its input, this machine's last
			// heartbeat, predates this instance). Not a preemption: finish
			// the item; a plan that wants the slot now preempts it.
			a = Action{Kind: StopAfter, Reason: "the plan gives its slot to job " + t.Job}
		default:
			a = Action{Kind: StopAfter, Reason: "the plan no longer has it"}
		}
		a.Slot, a.Job = r.Slot, r.Job
		counted := a.Preempt == "" || r.Preempted != ""
		if r.Killed && counted || a.Kind == StopAfter && r.Stopping && counted {
			continue // told already: nothing would change
		}
		out = append(out, a)
	}
	slots := make([]int, 0, len(target))
	for slot := range target {
		if !busy[slot] {
			slots = append(slots, slot)
		}
	}
	sort.Ints(slots)
	for _, slot := range slots {
		t := target[slot]
		j, ok := in.Active[t.Job]
		if !ok || !in.Drivers[j.Driver] {
			continue
		}
		gpus, ok := alloc(eligible(in.GPUs, in.GPUMemory, j.GPUMemoryMB), used, j.GPUs)
		if !ok {
			continue
		}
		out = append(out, Action{Kind: Start, Slot: slot, Job: t.Job, InstanceKind: t.Kind, GPUs: gpus, Reason: "planned " + t.Kind})
	}
	return out
}

// eligible are the devices of all with at least minMB of memory (all of
// them when minMB is 0), in all's order.
func eligible(all []int, mem map[int]int64, minMB int64) []int {
	if minMB <= 0 {
		return all
	}
	var out []int
	for _, g := range all {
		if mem[g] >= minMB {
			out = append(out, g)
		}
	}
	return out
}

// alloc picks want devices of all that used does not hold, marking them.
func alloc(all []int, used map[int]bool, want int) ([]int, bool) {
	if want <= 0 {
		return nil, true
	}
	var out []int
	for _, g := range all {
		if !used[g] {
			out = append(out, g)
			if len(out) == want {
				for _, g := range out {
					used[g] = true
				}
				return out, true
			}
		}
	}
	return nil, false
}
