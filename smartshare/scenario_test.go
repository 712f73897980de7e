package smartshare

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// scenario is the state a datadriven file builds up, command by command.
type scenario struct {
	in       Input
	last     *Result
	clock    int64 // start time given to instances started by `apply`
	nextSub  int64 // submission time of the next new job
	lastPlan Input // the input of the last plan
}

func newScenario() *scenario {
	return &scenario{in: Input{Config: DefaultConfig()}, clock: 1, nextSub: 1}
}

// TestScenarios runs testdata/*.txt. Commands:
//
//	reset                                  empty state, default config
//	config [mode=] [policy=] [default-max=N|*] [limit=N]
//	machine id=ID slots=N [cores=] [mem=] [gpus=]    add or replace
//	remove-machine id=ID
//	job id=ID [prio=] [cpus=] [max=N|*|unset] [items=] [submitted=] [cores=] [mem=] [gpus=]
//	                                       add, or change the given fields
//	remove-job id=ID
//	plan [layout] [hash] [json]            plan; print per-job summary, preemptions
//	apply                                  carry out the last plan: its layout runs
//	stop machine=ID slot=N                 the running instance in that slot ends
//	running                                print the running instances
//	decode                                 DecodeInput(input); print error or summary
//
// Every plan is also checked against the invariants of invariants_test.go,
// for determinism under shuffling, and for being a fixed point.
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenario files: %v", err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			s := newScenario()
			datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
				return s.run(t, d)
			})
		})
	}
}

func (s *scenario) run(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "reset":
		*s = *newScenario()
		return "ok"
	case "config":
		c := &s.in.Config
		for _, a := range d.CmdArgs {
			v := a.SingleVal(t)
			switch a.Key {
			case "mode":
				c.Mode = v
			case "policy":
				c.PreemptPolicy = v
			case "default-max":
				c.DefaultMaxCPUs = parseMax(t, v).N
			case "limit":
				c.MaxCPUsLimit = atoi(t, v)
			default:
				t.Fatalf("%s: unknown argument %q", d.Pos, a.Key)
			}
		}
		return fmt.Sprintf("mode=%s policy=%s default_max_cpus=%d max_cpus_limit=%d", c.Mode, c.PreemptPolicy, c.DefaultMaxCPUs, c.MaxCPUsLimit)
	case "machine":
		var m Machine
		for _, a := range d.CmdArgs {
			v := a.SingleVal(t)
			switch a.Key {
			case "id":
				m.ID = v
			case "slots":
				m.Slots = atoi(t, v)
			case "cores":
				m.Cores = int64(atoi(t, v))
			case "mem":
				m.MemoryMB = int64(atoi(t, v))
			case "gpus":
				m.GPUs = atoi(t, v)
			default:
				t.Fatalf("%s: unknown argument %q", d.Pos, a.Key)
			}
		}
		s.in.Machines = slices.DeleteFunc(s.in.Machines, func(x Machine) bool { return x.ID == m.ID })
		s.in.Machines = append(s.in.Machines, m)
		// Instances on slots that no longer exist stop.
		s.in.Instances = slices.DeleteFunc(s.in.Instances, func(x Instance) bool { return x.Machine == m.ID && x.Slot >= m.Slots })
		return fmt.Sprintf("%d machines, %d slots", len(s.in.Machines), totalSlots(s.in))
	case "remove-machine":
		id := argVal(t, d, "id")
		s.in.Machines = slices.DeleteFunc(s.in.Machines, func(x Machine) bool { return x.ID == id })
		s.in.Instances = slices.DeleteFunc(s.in.Instances, func(x Instance) bool { return x.Machine == id })
		return fmt.Sprintf("%d machines, %d slots", len(s.in.Machines), totalSlots(s.in))
	case "job":
		id := argVal(t, d, "id")
		i := slices.IndexFunc(s.in.Jobs, func(j Job) bool { return j.ID == id })
		if i < 0 {
			s.in.Jobs = append(s.in.Jobs, Job{ID: id, Priority: DefaultPriority, CPUs: 1, Submitted: s.nextSub})
			s.nextSub++
			i = len(s.in.Jobs) - 1
		}
		j := &s.in.Jobs[i]
		for _, a := range d.CmdArgs {
			v := a.SingleVal(t)
			switch a.Key {
			case "id":
			case "prio":
				j.Priority = atoi(t, v)
			case "cpus":
				j.CPUs = atoi(t, v)
			case "max":
				j.MaxCPUs = parseMax(t, v)
			case "items":
				j.ItemsRemaining = atoi(t, v)
			case "submitted":
				j.Submitted = int64(atoi(t, v))
			case "cores":
				j.Cores = int64(atoi(t, v))
			case "mem":
				j.MemoryMB = int64(atoi(t, v))
			case "gpus":
				j.GPUs = atoi(t, v)
			default:
				t.Fatalf("%s: unknown argument %q", d.Pos, a.Key)
			}
		}
		return fmt.Sprintf("%s: priority=%d cpus=%d max_cpus=%s items=%d submitted=%d", j.ID, j.Priority, j.CPUs,
			orDash(j.MaxCPUs.String()), j.ItemsRemaining, j.Submitted)
	case "remove-job":
		id := argVal(t, d, "id")
		s.in.Jobs = slices.DeleteFunc(s.in.Jobs, func(x Job) bool { return x.ID == id })
		return fmt.Sprintf("%d jobs", len(s.in.Jobs))
	case "plan":
		if err := s.in.Validate(); err != nil {
			return "invalid: " + err.Error()
		}
		in := cloneInput(s.in)
		res := Plan(in)
		if err := checkAll(in, res); err != nil {
			t.Fatalf("%s: invariant broken: %v", d.Pos, err)
		}
		if err := checkShuffled(in, res, 3); err != nil {
			t.Fatalf("%s: %v", d.Pos, err)
		}
		if err := checkFixedPoint(in, res); err != nil {
			t.Fatalf("%s: %v", d.Pos, err)
		}
		s.last = &res
		s.lastPlan = in
		if d.HasArg("json") {
			b, _ := json.Marshal(res)
			return string(b)
		}
		return formatPlan(res, d.HasArg("layout"), d.HasArg("hash"))
	case "apply":
		if s.last == nil {
			t.Fatalf("%s: apply before plan", d.Pos)
		}
		s.in.Instances = applyPlan(s.lastPlan.Instances, s.last.Instances, s.clock)
		s.clock++
		s.last = nil
		return fmt.Sprintf("%d running", len(s.in.Instances))
	case "stop":
		m := argVal(t, d, "machine")
		slot := atoi(t, argVal(t, d, "slot"))
		n := len(s.in.Instances)
		s.in.Instances = slices.DeleteFunc(s.in.Instances, func(x Instance) bool { return x.Machine == m && x.Slot == slot })
		return fmt.Sprintf("%d stopped, %d running", n-len(s.in.Instances), len(s.in.Instances))
	case "running":
		return formatRunning(s.in.Instances)
	case "decode":
		in, err := DecodeInput([]byte(d.Input))
		if err != nil {
			return "error: " + err.Error()
		}
		b, _ := json.Marshal(in)
		return "ok: " + string(b)
	}
	t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
	return ""
}

// applyPlan returns the running instances after a plan is carried out: an
// instance that keeps its slot keeps its start time, new ones start at now.
func applyPlan(running, target []Instance, now int64) []Instance {
	type key struct {
		m string
		s int
	}
	prev := make(map[key]Instance, len(running))
	for _, x := range running {
		prev[key{x.Machine, x.Slot}] = x
	}
	out := make([]Instance, len(target))
	for i, x := range target {
		x.Started = now
		if old, ok := prev[key{x.Machine, x.Slot}]; ok && old.Job == x.Job {
			x.Started = old.Started
		}
		out[i] = x
	}
	return out
}

func cloneInput(in Input) Input {
	return Input{Config: in.Config, Machines: slices.Clone(in.Machines), Jobs: slices.Clone(in.Jobs), Instances: slices.Clone(in.Instances)}
}

func totalSlots(in Input) int {
	n := 0
	for _, m := range in.Machines {
		n += m.Slots
	}
	return n
}

func argVal(t *testing.T, d *datadriven.TestData, key string) string {
	var v string
	d.ScanArgs(t, key, &v)
	return v
}

func atoi(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("not a number: %q", s)
	}
	return n
}

func parseMax(t *testing.T, s string) MaxCPUs {
	switch s {
	case "*":
		return MaxAny
	case "unset":
		return MaxCPUs{}
	}
	return Max(atoi(t, s))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// formatPlan prints one line per job, the preemptions as runs of slots,
// and optionally the layout and the hash.
func formatPlan(r Result, layout, hash bool) string {
	var b strings.Builder
	for _, j := range r.Jobs {
		fmt.Fprintf(&b, "%s: %d primaries + %d secondaries of %d", j.ID, j.Primaries, j.Secondaries, j.Wanted)
		if j.Preempted > 0 {
			fmt.Fprintf(&b, ", %d preempted", j.Preempted)
		}
		if j.Reason != "" {
			fmt.Fprintf(&b, " (%s)", j.Reason)
		}
		b.WriteByte('\n')
	}
	if len(r.Preempt) == 0 {
		b.WriteString("preempt: none\n")
	} else {
		fmt.Fprintf(&b, "preempt %d (%s):", len(r.Preempt), r.Preempt[0].Mode)
		for i := 0; i < len(r.Preempt); {
			k := i + 1
			for k < len(r.Preempt) && r.Preempt[k].Machine == r.Preempt[i].Machine && r.Preempt[k].Job == r.Preempt[i].Job &&
				r.Preempt[k].Slot == r.Preempt[k-1].Slot+1 && r.Preempt[k].Mode == r.Preempt[i].Mode {
				k++
			}
			fmt.Fprintf(&b, " %s %s:%s", r.Preempt[i].Job, r.Preempt[i].Machine, slotRange(r.Preempt[i].Slot, r.Preempt[k-1].Slot))
			i = k
		}
		b.WriteByte('\n')
	}
	if layout {
		b.WriteString(formatLayout(r.Instances))
	}
	if hash {
		fmt.Fprintf(&b, "hash: %s\n", r.Hash)
	}
	return b.String()
}

func slotRange(a, z int) string {
	if a == z {
		return strconv.Itoa(a)
	}
	return fmt.Sprintf("%d-%d", a, z)
}

// formatLayout prints, per machine, runs of consecutive slots with the
// same job and kind ("a/p" primary, "a/s" secondary).
func formatLayout(insts []Instance) string {
	var b strings.Builder
	for i := 0; i < len(insts); {
		m := insts[i].Machine
		fmt.Fprintf(&b, "%s:", m)
		for i < len(insts) && insts[i].Machine == m {
			k := i + 1
			for k < len(insts) && insts[k].Machine == m && insts[k].Job == insts[i].Job && insts[k].Kind == insts[i].Kind && insts[k].Slot == insts[k-1].Slot+1 {
				k++
			}
			fmt.Fprintf(&b, " %s=%s/%c", slotRange(insts[i].Slot, insts[k-1].Slot), insts[i].Job, insts[i].Kind[0])
			i = k
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func formatRunning(insts []Instance) string {
	if len(insts) == 0 {
		return "nothing running"
	}
	s := slices.Clone(insts)
	slices.SortFunc(s, func(a, b Instance) int {
		return strings.Compare(a.Machine, b.Machine)*2 + compareInt(a.Slot, b.Slot)
	})
	return formatLayout(s)
}

func compareInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
