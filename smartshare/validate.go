package smartshare

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Validate checks in and returns the first problem as a one-line error that
// names the field, e.g. `jobs[2].cpus: -1 is negative; allowed: 0 or more`.
// Plan needs valid input (it stays deterministic and does not panic on
// invalid input, but its answer is then unspecified).
//
// Instances may name jobs that are not in Jobs: those jobs are gone and
// their instances are simply not in the plan.
func (in *Input) Validate() error {
	c := in.Config
	switch c.Mode {
	case ModeJobs, ModeNone:
	default:
		return fmt.Errorf("config.mode: %q unknown; allowed: jobs, none", c.Mode)
	}
	switch c.PreemptPolicy {
	case PolicyAggressive, PolicyPassive, PolicyDisabled:
	default:
		return fmt.Errorf("config.preempt_policy: %q unknown; allowed: aggressive, passive, disabled", c.PreemptPolicy)
	}
	if c.MaxCPUsLimit < 0 {
		return fmt.Errorf("config.max_cpus_limit: %d is negative; allowed: 0 or more", c.MaxCPUsLimit)
	}

	machines := make(map[string]int, len(in.Machines))
	total := 0
	for i, m := range in.Machines {
		f := func(field string) string { return fmt.Sprintf("machines[%d].%s", i, field) }
		if m.ID == "" {
			return fmt.Errorf("%s: empty; every machine needs an id", f("id"))
		}
		if prev, dup := machines[m.ID]; dup {
			return fmt.Errorf("%s: %q duplicates machines[%d]", f("id"), m.ID, prev)
		}
		machines[m.ID] = i
		if err := checkRange(f("slots"), int64(m.Slots), MaxSlotsPerMachine); err != nil {
			return err
		}
		total += m.Slots
		if total > MaxTotalSlots {
			return fmt.Errorf("%s: the machines offer more than %d slots in all", f("slots"), MaxTotalSlots)
		}
		if err := checkRange(f("cores"), m.Cores, MaxResource); err != nil {
			return err
		}
		if err := checkRange(f("memory_mb"), m.MemoryMB, MaxResource); err != nil {
			return err
		}
		if err := checkRange(f("gpus"), int64(m.GPUs), MaxGPUs); err != nil {
			return err
		}
		if err := checkRange(f("disk_mb"), m.DiskMB, MaxResource); err != nil {
			return err
		}
	}

	jobs := make(map[string]int, len(in.Jobs))
	for i, j := range in.Jobs {
		f := func(field string) string { return fmt.Sprintf("jobs[%d].%s", i, field) }
		if j.ID == "" {
			return fmt.Errorf("%s: empty; every job needs an id", f("id"))
		}
		if prev, dup := jobs[j.ID]; dup {
			return fmt.Errorf("%s: %q duplicates jobs[%d]", f("id"), j.ID, prev)
		}
		jobs[j.ID] = i
		if j.Priority < MinPriority || j.Priority > MaxPriority {
			return fmt.Errorf("%s: %d out of range; allowed: %d (highest) .. %d (lowest)", f("priority"), j.Priority, MinPriority, MaxPriority)
		}
		if j.CPUs < 0 {
			return fmt.Errorf("%s: %d is negative; allowed: 0 or more", f("cpus"), j.CPUs)
		}
		if j.ItemsRemaining < 0 {
			return fmt.Errorf("%s: %d is negative; allowed: 0 or more", f("items_remaining"), j.ItemsRemaining)
		}
		if err := checkRange(f("cores"), j.Cores, MaxResource); err != nil {
			return err
		}
		if err := checkRange(f("memory_mb"), j.MemoryMB, MaxResource); err != nil {
			return err
		}
		if err := checkRange(f("gpus"), int64(j.GPUs), MaxGPUs); err != nil {
			return err
		}
		if err := checkRange(f("disk_mb"), j.DiskMB, MaxResource); err != nil {
			return err
		}
	}

	// used[m] maps a slot of machine m to the instance index in it, +1.
	used := make(map[string][]int32, len(machines))
	for i, x := range in.Instances {
		f := func(field string) string { return fmt.Sprintf("instances[%d].%s", i, field) }
		if x.Job == "" {
			return fmt.Errorf("%s: empty; name the instance's job", f("job"))
		}
		mi, ok := machines[x.Machine]
		if !ok {
			return fmt.Errorf("%s: unknown machine %q", f("machine"), x.Machine)
		}
		slots := in.Machines[mi].Slots
		if x.Slot < 0 || x.Slot >= slots {
			if slots == 0 {
				return fmt.Errorf("%s: %d out of range; machine %q has no slots", f("slot"), x.Slot, x.Machine)
			}
			return fmt.Errorf("%s: %d out of range 0..%d for machine %q", f("slot"), x.Slot, slots-1, x.Machine)
		}
		switch x.Kind {
		case KindPrimary, KindSecondary:
		default:
			return fmt.Errorf("%s: %q unknown; allowed: primary, secondary", f("kind"), x.Kind)
		}
		u := used[x.Machine]
		if u == nil {
			u = make([]int32, slots)
			used[x.Machine] = u
		}
		if prev := u[x.Slot]; prev != 0 {
			return fmt.Errorf("%s: slot %d of machine %q is already taken by instances[%d]", f("slot"), x.Slot, x.Machine, prev-1)
		}
		u[x.Slot] = int32(i + 1)
	}
	return nil
}

func checkRange(field string, v, max int64) error {
	if v < 0 {
		return fmt.Errorf("%s: %d is negative; allowed: 0..%d", field, v, max)
	}
	if v > max {
		return fmt.Errorf("%s: %d too large; allowed: 0..%d", field, v, max)
	}
	return nil
}

// Wire forms with pointers, so that DecodeInput can tell absent keys.
type wireConfig struct {
	Mode           *string  `json:"mode"`
	PreemptPolicy  *string  `json:"preempt_policy"`
	DefaultMaxCPUs *MaxCPUs `json:"default_max_cpus"`
	MaxCPUsLimit   *int     `json:"max_cpus_limit"`
}

type wireJob struct {
	ID             string  `json:"id"`
	Priority       *int    `json:"priority"`
	CPUs           *int    `json:"cpus"`
	MaxCPUs        MaxCPUs `json:"max_cpus"`
	Submitted      int64   `json:"submitted"`
	ItemsRemaining int     `json:"items_remaining"`
	Cores          int64   `json:"cores"`
	MemoryMB       int64   `json:"memory_mb"`
	GPUs           int     `json:"gpus"`
	DiskMB         int64   `json:"disk_mb"`
}

type wireInput struct {
	Config    json.RawMessage   `json:"config"`
	Machines  []json.RawMessage `json:"machines"`
	Jobs      []json.RawMessage `json:"jobs"`
	Instances []json.RawMessage `json:"instances"`
}

// DecodeInput parses a JSON Input strictly (unknown fields are errors),
// fills defaults and validates it. Defaults: every absent config key takes
// its DefaultConfig value (default_max_cpus may be "*"); a job's absent or
// zero priority is 9999, its absent cpus is 1, its absent (or null)
// max_cpus is unspecified. Errors are one line and name the field.
func DecodeInput(data []byte) (Input, error) {
	var w wireInput
	if err := strictDecode(data, &w); err != nil {
		return Input{}, decodeErr("input", err)
	}
	in := Input{Config: DefaultConfig()}
	if len(w.Config) > 0 && string(bytes.TrimSpace(w.Config)) != "null" {
		var c wireConfig
		if err := strictDecode(w.Config, &c); err != nil {
			return Input{}, decodeErr("config", err)
		}
		if c.Mode != nil {
			in.Config.Mode = *c.Mode
		}
		if c.PreemptPolicy != nil {
			in.Config.PreemptPolicy = *c.PreemptPolicy
		}
		if c.DefaultMaxCPUs != nil && c.DefaultMaxCPUs.Set {
			in.Config.DefaultMaxCPUs = c.DefaultMaxCPUs.N
		}
		if c.MaxCPUsLimit != nil {
			in.Config.MaxCPUsLimit = *c.MaxCPUsLimit
		}
	}
	in.Machines = make([]Machine, len(w.Machines))
	for i, raw := range w.Machines {
		if err := strictDecode(raw, &in.Machines[i]); err != nil {
			return Input{}, decodeErr(fmt.Sprintf("machines[%d]", i), err)
		}
	}
	in.Jobs = make([]Job, len(w.Jobs))
	for i, raw := range w.Jobs {
		var j wireJob
		if err := strictDecode(raw, &j); err != nil {
			return Input{}, decodeErr(fmt.Sprintf("jobs[%d]", i), err)
		}
		job := Job{ID: j.ID, Priority: DefaultPriority, CPUs: 1, MaxCPUs: j.MaxCPUs, Submitted: j.Submitted,
			ItemsRemaining: j.ItemsRemaining, Cores: j.Cores, MemoryMB: j.MemoryMB, GPUs: j.GPUs, DiskMB: j.DiskMB}
		if j.Priority != nil && *j.Priority != 0 {
			job.Priority = *j.Priority
		}
		if j.CPUs != nil {
			job.CPUs = *j.CPUs
		}
		in.Jobs[i] = job
	}
	in.Instances = make([]Instance, len(w.Instances))
	for i, raw := range w.Instances {
		if err := strictDecode(raw, &in.Instances[i]); err != nil {
			return Input{}, decodeErr(fmt.Sprintf("instances[%d]", i), err)
		}
	}
	if err := in.Validate(); err != nil {
		return Input{}, err
	}
	return in, nil
}

// strictDecode decodes exactly one JSON object into v.
func strictDecode(data []byte, v any) error {
	t := bytes.TrimSpace(data)
	if len(t) == 0 {
		return errors.New("empty; expected a JSON object")
	}
	if t[0] != '{' {
		return errors.New("expected a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(t))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("unexpected data after the JSON object")
	}
	return nil
}

// decodeErr turns an encoding/json error into one line naming the field.
func decodeErr(where string, err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		field := te.Field
		if field != "" {
			field = "." + field
		}
		want := "another type"
		if te.Type != nil {
			want = jsonType(te.Type.String())
		}
		return fmt.Errorf("%s%s: JSON %s where %s was expected", where, field, te.Value, want)
	case errors.As(err, &se):
		return fmt.Errorf("%s: invalid JSON at byte %d: %s", where, se.Offset, oneLine(se.Error()))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%s: invalid JSON: unexpected end of input", where)
	}
	msg := strings.TrimPrefix(oneLine(err.Error()), "json: ")
	if strings.HasPrefix(msg, "max_cpus: ") {
		if where == "config" {
			return fmt.Errorf("config.default_%s", msg)
		}
		return fmt.Errorf("%s.%s", where, msg)
	}
	return fmt.Errorf("%s: %s", where, msg)
}

func jsonType(goType string) string {
	switch goType {
	case "string":
		return "a string"
	case "int", "int64", "int32":
		return "an integer"
	case "[]json.RawMessage":
		return "an array"
	}
	if strings.HasPrefix(goType, "smartshare.") || strings.HasPrefix(goType, "map") {
		return "an object"
	}
	return goType
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }
