package smartshare

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// Config is the org-wide SmartShare configuration.
type Config struct {
	// Mode is "jobs" (balance secondary instances between jobs) or "none"
	// (no secondary instances at all).
	Mode string `json:"mode"`
	// PreemptPolicy is "aggressive" (stop a victim now), "passive" (let it
	// finish its current agenda item) or "disabled" (never preempt).
	PreemptPolicy string `json:"preempt_policy"`
	// DefaultMaxCPUs applies to jobs that leave max_cpus unspecified; a
	// negative value means max_cpus_limit.
	DefaultMaxCPUs int `json:"default_max_cpus"`
	// MaxCPUsLimit caps every job's max_cpus.
	MaxCPUsLimit int `json:"max_cpus_limit"`
}

// Config values.
const (
	ModeJobs = "jobs"
	ModeNone = "none"

	PolicyAggressive = "aggressive"
	PolicyPassive    = "passive"
	PolicyDisabled   = "disabled"

	KindPrimary   = "primary"
	KindSecondary = "secondary"
)

// Limits checked by Validate. They keep Plan's memory bounded.
const (
	MinPriority     = 1
	MaxPriority     = 9999
	DefaultPriority = MaxPriority

	// MaxSlotsPerMachine bounds Machine.Slots.
	MaxSlotsPerMachine = 1 << 16
	// MaxTotalSlots bounds the sum of all machines' slots.
	MaxTotalSlots = 1 << 24
	// MaxResource bounds the cores and memory_mb of jobs and machines.
	MaxResource = int64(1) << 40
	// MaxGPUs bounds the gpus of jobs and machines.
	MaxGPUs = 1 << 16
)

// DefaultConfig is the configuration an org starts with.
func DefaultConfig() Config {
	return Config{Mode: ModeJobs, PreemptPolicy: PolicyAggressive, DefaultMaxCPUs: -1, MaxCPUsLimit: 100}
}

// Machine offers Slots concrete slots (indices 0..Slots-1). Cores
// (millicores), MemoryMB and GPUs are the machine's capacity shared by the
// instances on it; zero cores or memory means "not declared, unconstrained",
// zero GPUs means the machine has none.
type Machine struct {
	ID       string `json:"id"`
	Slots    int    `json:"slots"`
	Cores    int64  `json:"cores,omitempty"`
	MemoryMB int64  `json:"memory_mb,omitempty"`
	GPUs     int    `json:"gpus,omitempty"`
	DiskMB   int64  `json:"disk_mb,omitempty"`
}

// Job is an agenda-based job as SmartShare sees it. Cores, MemoryMB and
// GPUs are what each instance needs (zero: nothing).
type Job struct {
	ID             string  `json:"id"`
	Priority       int     `json:"priority"`
	CPUs           int     `json:"cpus"`
	MaxCPUs        MaxCPUs `json:"max_cpus"`
	Submitted      int64   `json:"submitted"`
	ItemsRemaining int     `json:"items_remaining"`
	Cores          int64   `json:"cores,omitempty"`
	MemoryMB       int64   `json:"memory_mb,omitempty"`
	GPUs           int     `json:"gpus,omitempty"`
	DiskMB         int64   `json:"disk_mb,omitempty"`
}

// MaxCPUs is a job's max_cpus: unset (Set false: the config default
// applies), a number, or "*" (stored as N = -1). Any negative N means
// max_cpus_limit; 0 disables SmartShare for the job.
type MaxCPUs struct {
	N   int
	Set bool
}

// Max returns a set MaxCPUs of n.
func Max(n int) MaxCPUs { return MaxCPUs{N: n, Set: true} }

// MaxAny is max_cpus "*".
var MaxAny = MaxCPUs{N: -1, Set: true}

// String renders the value as a user writes it: "", "*" or a number.
func (m MaxCPUs) String() string {
	switch {
	case !m.Set:
		return ""
	case m.N < 0:
		return "*"
	default:
		return strconv.Itoa(m.N)
	}
}

// MarshalJSON writes null when unset, otherwise the number.
func (m MaxCPUs) MarshalJSON() ([]byte, error) {
	if !m.Set {
		return []byte("null"), nil
	}
	return strconv.AppendInt(nil, int64(m.N), 10), nil
}

// UnmarshalJSON accepts null (unset), an integer, or the string "*".
func (m *MaxCPUs) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || string(b) == "null" {
		*m = MaxCPUs{}
		return nil
	}
	if b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("max_cpus: %s is not a number or \"*\"", b)
		}
		if s == "*" {
			*m = MaxAny
			return nil
		}
		return fmt.Errorf("max_cpus: %q is not a number or \"*\"", s)
	}
	n, err := strconv.ParseInt(string(b), 10, strconv.IntSize)
	if err != nil {
		return fmt.Errorf("max_cpus: %.40s is not an integer or \"*\"", b)
	}
	*m = MaxCPUs{N: int(n), Set: true}
	return nil
}

// Instance is one instance of a job in one slot. In Input.Instances it is a
// running instance (Started orders victims: larger is more recent); in
// Result.Instances it is the target layout (Started is zero and omitted).
type Instance struct {
	Job     string `json:"job"`
	Machine string `json:"machine"`
	Slot    int    `json:"slot"`
	Kind    string `json:"kind"`
	Started int64  `json:"started,omitempty"`
}

// Input is everything Plan looks at.
type Input struct {
	Config    Config     `json:"config"`
	Machines  []Machine  `json:"machines"`
	Jobs      []Job      `json:"jobs"`
	Instances []Instance `json:"instances"`
}

// Preemption tells the owner of a slot to stop the running instance of Job
// in it so that another job can have the slot (or its resources). Mode is
// "aggressive" (stop now) or "passive" (stop after the current item).
type Preemption struct {
	Job     string `json:"job"`
	Machine string `json:"machine"`
	Slot    int    `json:"slot"`
	Mode    string `json:"mode"`
}

// JobSummary explains one job's allocation. Wanted is what the job could use
// (min(cpus, items) primaries plus min(effective max_cpus - cpus, the rest of
// its items) secondaries). Preempted counts its running instances stopped
// by this plan for other jobs. Reason says why it got less than Wanted (or
// that SmartShare is off for it), "" when it has all it can use.
type JobSummary struct {
	ID          string `json:"id"`
	Primaries   int    `json:"primaries"`
	Secondaries int    `json:"secondaries"`
	Wanted      int    `json:"wanted"`
	Preempted   int    `json:"preempted"`
	Reason      string `json:"reason,omitempty"`
}

// Reasons in JobSummary.Reason.
const (
	ReasonNoMachine   = "no_machine_available"
	ReasonResources   = "resource_limits"
	ReasonNotMet      = "requirements_not_met"
	ReasonPreempted   = "preempted_by_higher_priority"
	ReasonSSDisabled  = "smartshare_disabled"
	ReasonNone        = ""
	reasonPlaceholder = "-"
)

// Result is a plan: the target layout (sorted by machine ID, then slot),
// the preemptions needed to reach it (same order), one summary per job (in
// priority order) and Hash, the hex SHA-256 of the canonical encoding of
// Instances and Preempt (see the package documentation).
type Result struct {
	Instances []Instance   `json:"instances"`
	Preempt   []Preemption `json:"preempt"`
	Jobs      []JobSummary `json:"jobs"`
	Hash      string       `json:"hash"`
}
