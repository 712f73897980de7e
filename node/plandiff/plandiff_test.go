package plandiff

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/cshare/cshare/smartshare"
)

// harness is a Nomad-style test harness: a fake machine state goes in, the
// recorded actions come out, as one line each.
type harness struct {
	in Input
}

func newHarness() *harness {
	return &harness{in: Input{Machine: "m1", Active: map[string]Job{}, Drivers: map[string]bool{"docker": true}}}
}

func (h *harness) job(id string, gpus int) *harness {
	h.in.Active[id] = Job{Driver: "docker", GPUs: gpus}
	return h
}

func (h *harness) plan(machine string, slot int, job, kind string) *harness {
	h.in.Plan.Instances = append(h.in.Plan.Instances, smartshare.Instance{Machine: machine, Slot: slot, Job: job, Kind: kind})
	return h
}

func (h *harness) preempt(slot int, job, mode string) *harness {
	h.in.Plan.Preempt = append(h.in.Plan.Preempt, smartshare.Preemption{Machine: h.in.Machine, Slot: slot, Job: job, Mode: mode})
	return h
}

func (h *harness) run(r Running) *harness {
	h.in.Running = append(h.in.Running, r)
	return h
}

func (h *harness) actions() string {
	var b strings.Builder
	for _, a := range Diff(h.in) {
		fmt.Fprintf(&b, "%s slot=%d job=%s", a.Kind, a.Slot, a.Job)
		if a.InstanceKind != "" {
			fmt.Fprintf(&b, " kind=%s", a.InstanceKind)
		}
		if len(a.GPUs) > 0 {
			fmt.Fprintf(&b, " gpus=%v", a.GPUs)
		}
		if a.Preempt != "" {
			fmt.Fprintf(&b, " preempt=%s", a.Preempt)
		}
		fmt.Fprintf(&b, " (%s)\n", a.Reason)
	}
	return b.String()
}

func TestDiff(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    *harness
		want string
	}{
		{"empty", newHarness(), ""},
		{"start planned slots in slot order, only ours",
			newHarness().job("a", 0).plan("m1", 2, "a", "secondary").plan("m1", 0, "a", "primary").plan("m2", 0, "a", "secondary"),
			"start slot=0 job=a kind=primary (planned primary)\nstart slot=2 job=a kind=secondary (planned secondary)\n"},
		{"keep and relabel",
			newHarness().job("a", 0).plan("m1", 0, "a", "primary").plan("m1", 1, "a", "primary").
				run(Running{Slot: 0, Job: "a", Kind: "primary"}).run(Running{Slot: 1, Job: "a", Kind: "secondary"}),
			"relabel slot=1 job=a kind=primary (the plan makes it primary)\n"},
		{"job ended: stop now",
			newHarness().run(Running{Slot: 3, Job: "gone", Kind: "primary"}),
			"stop_now slot=3 job=gone (its job ended)\n"},
		{"preempted passive and aggressive",
			newHarness().job("a", 0).job("b", 0).plan("m1", 0, "b", "primary").plan("m1", 1, "b", "primary").
				preempt(0, "a", "passive").preempt(1, "a", "aggressive").
				run(Running{Slot: 0, Job: "a", Kind: "secondary"}).run(Running{Slot: 1, Job: "a", Kind: "secondary"}),
			"stop_after slot=0 job=a preempt=passive (preempted (passive))\nstop_now slot=1 job=a preempt=aggressive (preempted (aggressive))\n"},
		{"slot given to another job without preemption: finish the item; no start while it runs",
			newHarness().job("a", 0).job("b", 0).plan("m1", 0, "b", "primary").run(Running{Slot: 0, Job: "a", Kind: "secondary"}),
			"stop_after slot=0 job=a (the plan gives its slot to job b)\n"},
		{"no longer planned",
			newHarness().job("a", 0).run(Running{Slot: 5, Job: "a", Kind: "secondary"}),
			"stop_after slot=5 job=a (the plan no longer has it)\n"},
		{"already stopping: nothing new; a preemption is still counted once",
			newHarness().job("a", 0).job("b", 0).plan("m1", 1, "b", "primary").preempt(1, "a", "passive").
				run(Running{Slot: 0, Job: "a", Stopping: true}).
				run(Running{Slot: 1, Job: "a", Stopping: true}).
				run(Running{Slot: 2, Job: "gone", Killed: true}),
			"stop_after slot=1 job=a preempt=passive (preempted (passive))\n"},
		{"stopping, preempted already counted: nothing",
			newHarness().job("a", 0).job("b", 0).plan("m1", 1, "b", "primary").preempt(1, "a", "passive").
				run(Running{Slot: 1, Job: "a", Stopping: true, Preempted: "passive"}),
			""},
		{"passive then aggressive: escalates",
			newHarness().job("a", 0).job("b", 0).plan("m1", 1, "b", "primary").preempt(1, "a", "aggressive").
				run(Running{Slot: 1, Job: "a", Stopping: true, Preempted: "passive"}),
			"stop_now slot=1 job=a preempt=aggressive (preempted (aggressive))\n"},
		{"no driver, unknown job: no start",
			func() *harness {
				h := newHarness().plan("m1", 0, "x", "primary").plan("m1", 1, "e", "primary")
				h.in.Active["e"] = Job{Driver: "exec"}
				return h
			}(),
			""},
		{"gpus: lowest free devices, held ones skipped, not enough: no start",
			func() *harness {
				h := newHarness().job("g", 2).plan("m1", 0, "g", "primary").plan("m1", 1, "g", "primary").plan("m1", 2, "g", "secondary").
					run(Running{Slot: 3, Job: "g", Kind: "primary", GPUs: []int{1}, Stopping: true}).plan("m1", 3, "g", "primary")
				h.in.GPUs = []int{0, 1, 2, 3, 4, 5}
				return h
			}(),
			"start slot=0 job=g kind=primary gpus=[0 2] (planned primary)\nstart slot=1 job=g kind=primary gpus=[3 4] (planned primary)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.h.actions(); got != tc.want {
				t.Errorf("actions:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

// Properties: the output does not depend on the order of the running
// instances; no two starts share a slot or a GPU, and none starts on a busy
// slot; every running instance gets at most one action.
func TestDiffProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := newHarness()
		jobs := []string{"a", "b", "c"}
		for _, j := range jobs {
			h.job(j, rapid.IntRange(0, 2).Draw(t, "gpus"))
		}
		h.in.GPUs = []int{0, 1, 2, 3}
		for slot := 0; slot < 6; slot++ {
			if rapid.Bool().Draw(t, "planned") {
				h.plan("m1", slot, rapid.SampledFrom(jobs).Draw(t, "job"), rapid.SampledFrom([]string{"primary", "secondary"}).Draw(t, "kind"))
			}
			if rapid.Bool().Draw(t, "preempt") {
				h.preempt(slot, rapid.SampledFrom(jobs).Draw(t, "pjob"), rapid.SampledFrom([]string{"passive", "aggressive"}).Draw(t, "mode"))
			}
			if rapid.Bool().Draw(t, "running") {
				h.run(Running{Slot: slot, Job: rapid.SampledFrom(append(jobs, "gone")).Draw(t, "rjob"),
					Kind: "secondary", Stopping: rapid.Bool().Draw(t, "stopping")})
			}
		}
		got := Diff(h.in)
		perm := rapid.Permutation(h.in.Running).Draw(t, "perm")
		h2 := *h
		h2.in.Running = perm
		if again := Diff(h2.in); !reflect.DeepEqual(got, again) {
			t.Fatalf("order of running instances changed the actions:\n%v\n%v", got, again)
		}
		busy := map[int]bool{}
		held := map[int]bool{}
		for _, r := range h.in.Running {
			busy[r.Slot] = true
		}
		acted := map[int]bool{}
		for _, a := range got {
			if acted[a.Slot] {
				t.Fatalf("two actions on slot %d: %v", a.Slot, got)
			}
			acted[a.Slot] = true
			if a.Kind != Start {
				if !busy[a.Slot] {
					t.Fatalf("%s on slot %d, which runs nothing", a.Kind, a.Slot)
				}
				continue
			}
			if busy[a.Slot] {
				t.Fatalf("start on busy slot %d", a.Slot)
			}
			for _, g := range a.GPUs {
				if held[g] {
					t.Fatalf("GPU %d given twice: %v", g, got)
				}
				held[g] = true
			}
		}
	})
}

// TestDiffGPUMemory: a job asking for GPUs with at least 16 GiB gets only
// devices that offer that much, lowest first, and does not start where
// none is free.
func TestDiffGPUMemory(t *testing.T) {
	h := newHarness()
	h.in.GPUs = []int{0, 1, 2}
	h.in.GPUMemory = map[int]int64{0: 8 << 10, 1: 40 << 10, 2: 16 << 10}
	h.in.Active["big"] = Job{Driver: "docker", GPUs: 1, GPUMemoryMB: 16 << 10}
	h.job("any", 1)
	h.plan("m1", 0, "big", "primary").plan("m1", 1, "big", "secondary").plan("m1", 2, "big", "secondary").plan("m1", 3, "any", "primary")
	want := "start slot=0 job=big kind=primary gpus=[1] (planned primary)\n" +
		"start slot=1 job=big kind=secondary gpus=[2] (planned secondary)\n" +
		"start slot=3 job=any kind=primary gpus=[0] (planned primary)\n"
	if got := h.actions(); got != want {
		t.Errorf("actions:\n%s\nwant:\n%s", got, want)
	}
}
