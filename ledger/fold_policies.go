package ledger

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/cshare/cshare/ledger/jobspec"
	"github.com/cshare/cshare/market"
)

// Org policies (issue 30, docs/design.md §23): limits per person that an
// admin sets with org.update and that every node enforces in the fold, so
// a modified client gains nothing by ignoring them:
//
//   - max_machines_per_user: a machine.register that would give its person
//     more than N machines (pending or approved) has no effect;
//   - max_concurrent_jobs_per_user: a person's jobs beyond N stay active
//     but Queued, and are let run in priority order (then submission) as
//     their running jobs end; SmartShare places no queued job;
//   - max_job_runtime: a job.expire written once its first start is that
//     long past fails the job;
//   - max_job_memory: a job.submit asking more memory per instance has no
//     effect;
//   - default_item_timeout: stored and checked here, used for items by the
//     scheduler.
//
// A policy applies from its org.update on: what it would have refused
// before stays (Slurm does the same).

// ErrPolicy is the class of an entry an org policy refuses.
var ErrPolicy = errors.New("ledger: refused by an org policy")

// Policies are the org's resource policies; 0 is none.
type Policies struct {
	MaxMachinesPerUser       int64 `cbor:"max_machines_per_user,omitempty"`
	MaxConcurrentJobsPerUser int64 `cbor:"max_concurrent_jobs_per_user,omitempty"`
	MaxJobRuntimeMS          int64 `cbor:"max_job_runtime_ms,omitempty"`
	MaxJobMemoryMB           int64 `cbor:"max_job_memory_mb,omitempty"`
	DefaultItemTimeoutMS     int64 `cbor:"default_item_timeout_ms,omitempty"`
}

// The policies' names (as org set takes them, after "policy.").
const (
	PolicyMaxMachines        = "max_machines_per_user"
	PolicyMaxConcurrentJobs  = "max_concurrent_jobs_per_user"
	PolicyMaxJobRuntime      = "max_job_runtime"
	PolicyMaxJobMemory       = "max_job_memory"
	PolicyDefaultItemTimeout = "default_item_timeout"
)

// PolicyNames lists the policies, sorted.
var PolicyNames = []string{PolicyDefaultItemTimeout, PolicyMaxConcurrentJobs, PolicyMaxJobMemory, PolicyMaxJobRuntime, PolicyMaxMachines}

// policyKind says how a policy's value reads and its bounds.
type policyKind struct {
	unit string // "count", "ms" or "MB"
	max  int64
}

var policyKinds = map[string]policyKind{
	PolicyMaxMachines:        {"count", 1 << 16},
	PolicyMaxConcurrentJobs:  {"count", 1 << 20},
	PolicyMaxJobRuntime:      {"ms", market.MaxDuration},
	PolicyMaxJobMemory:       {"MB", jobspec.MaxMemoryMB},
	PolicyDefaultItemTimeout: {"ms", jobspec.MaxItemTimeoutMS},
}

// PolicyUnit is how policy name's stored value reads: "count", "ms" or
// "MB"; "" for an unknown name.
func PolicyUnit(name string) string { return policyKinds[name].unit }

// field is a pointer to the policy's value in p, or nil for an unknown name.
func (p *Policies) field(name string) *int64 {
	switch name {
	case PolicyMaxMachines:
		return &p.MaxMachinesPerUser
	case PolicyMaxConcurrentJobs:
		return &p.MaxConcurrentJobsPerUser
	case PolicyMaxJobRuntime:
		return &p.MaxJobRuntimeMS
	case PolicyMaxJobMemory:
		return &p.MaxJobMemoryMB
	case PolicyDefaultItemTimeout:
		return &p.DefaultItemTimeoutMS
	}
	return nil
}

// Get is policy name's value (0: none, or an unknown name).
func (p Policies) Get(name string) int64 {
	if f := p.field(name); f != nil {
		return *f
	}
	return 0
}

// CheckPolicy checks one policy's value; the error names it as org set
// does ("policy.NAME").
func CheckPolicy(name string, v int64) error {
	k, ok := policyKinds[name]
	if !ok {
		return fmt.Errorf("policy.%s: no such policy; allowed: policy.%s", name, joinNames())
	}
	if v < 0 || v > k.max {
		return fmt.Errorf("policy.%s: %s out of range; allowed: 0 or none (no policy) .. %s", name, FormatPolicy(name, v), FormatPolicy(name, k.max))
	}
	if k.unit == "ms" && v != 0 && v < 1000 {
		return fmt.Errorf("policy.%s: %s is below the minimum 1s; allowed: 0 or none (no policy), or 1s .. %s", name, FormatPolicy(name, v), FormatPolicy(name, k.max))
	}
	return nil
}

func joinNames() string {
	out := ""
	for i, n := range PolicyNames {
		if i > 0 {
			out += ", policy."
		}
		out += n
	}
	return out
}

// FormatPolicy renders a policy's value as a person reads it: a count, a
// duration, a size.
func FormatPolicy(name string, v int64) string {
	switch PolicyUnit(name) {
	case "ms":
		return market.FormatDuration(v)
	case "MB":
		return jobspec.FormatMB(v)
	}
	return fmt.Sprint(v)
}

// applyPolicies sets the policies of an org.update on p: every value is
// checked, and nothing is set unless all are good.
func applyPolicies(p *Policies, set map[string]int64) error {
	next := *p
	for _, name := range slices.Sorted(maps.Keys(set)) {
		if err := CheckPolicy(name, set[name]); err != nil {
			return fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		*next.field(name) = set[name]
	}
	*p = next
	return nil
}

// ValidatePolicies checks every policy of p (a genesis's).
func ValidatePolicies(p Policies) error {
	for _, name := range PolicyNames {
		if err := CheckPolicy(name, p.Get(name)); err != nil {
			return err
		}
	}
	return nil
}

// checkMachinesPolicy: person may register one more machine.
func checkMachinesPolicy(st *State, person string) error {
	n := st.Settings.Policies.MaxMachinesPerUser
	if n == 0 {
		return nil
	}
	var have int64
	for _, m := range st.Machines {
		if m.Owner == person && (m.Status == MachinePending || m.Status == MachineApproved) {
			have++
		}
	}
	if have >= n {
		return fmt.Errorf("%w: policy.%s: person %s has %d of the %d machines the org allows per person; an admin may raise it, or remove one of theirs", ErrPolicy, PolicyMaxMachines, person, have, n)
	}
	return nil
}

// CheckJobPolicies is what the org's policies say of a job spec at
// submission: nil, or an error naming the policy (the API says it before
// writing; the fold refuses the entry).
func (s *State) CheckJobPolicies(spec JobSpec) error {
	if n := s.Settings.Policies.MaxJobMemoryMB; n > 0 && spec.MemoryMB > n {
		return fmt.Errorf("%w: policy.%s: the job asks %s of memory per instance; the org allows at most %s", ErrPolicy, PolicyMaxJobMemory,
			jobspec.FormatMB(spec.MemoryMB), jobspec.FormatMB(n))
	}
	return nil
}

// QueuedReason is why a job waits under max_concurrent_jobs_per_user, as
// Slurm names it.
func QueuedReason(n int64) string {
	return fmt.Sprintf("AssocMaxJobsLimit: policy.%s=%d: its submitter has %d jobs running; it starts when one ends", PolicyMaxConcurrentJobs, n, n)
}

// admitNew lets the job j just submitted run, or queues it behind its
// submitter's running jobs.
func admitNew(st *State, j *Job, at int64) {
	n := st.Settings.Policies.MaxConcurrentJobsPerUser
	if n > 0 && runningJobs(st, j.Submitter)-1 >= n { // less j itself, in st.Jobs already
		j.Queued = QueuedReason(n)
		return
	}
	j.Admitted = at
}

// runningJobs counts person's active jobs that are not queued.
func runningJobs(st *State, person string) int64 {
	var k int64
	for _, j := range st.Jobs {
		if j.Submitter == person && j.State == JobActive && j.Queued == "" {
			k++
		}
	}
	return k
}

// admitQueued lets person's queued jobs run, in priority order (then
// submission), while they have fewer running than the policy allows (all
// of them when there is no policy).
func admitQueued(st *State, person string, at int64) {
	var queued []*Job
	for _, j := range st.Jobs {
		if j.Submitter == person && j.State == JobActive && j.Queued != "" {
			queued = append(queued, j)
		}
	}
	if len(queued) == 0 {
		return
	}
	sort.Slice(queued, func(a, b int) bool {
		if queued[a].Priority != queued[b].Priority {
			return queued[a].Priority < queued[b].Priority
		}
		return queued[a].Seq < queued[b].Seq
	})
	n := st.Settings.Policies.MaxConcurrentJobsPerUser
	running := runningJobs(st, person)
	for _, j := range queued {
		if n > 0 && running >= n {
			if why := QueuedReason(n); j.Queued != why {
				st.editJob(j).Queued = why // the policy may have changed
			}
			continue
		}
		j = st.editJob(j)
		j.Queued, j.Admitted = "", at
		running++
	}
}

// admitAllQueued is admitQueued for every person with a queued job, in
// order of their IDs (after a policy change).
func admitAllQueued(st *State, at int64) {
	persons := map[string]bool{}
	for _, j := range st.Jobs {
		if j.State == JobActive && j.Queued != "" {
			persons[j.Submitter] = true
		}
	}
	ids := make([]string, 0, len(persons))
	for p := range persons {
		ids = append(ids, p)
	}
	sort.Strings(ids)
	for _, p := range ids {
		admitQueued(st, p, at)
	}
}

// jobEnded is what an ended job frees: a place for its submitter's
// queued jobs.
func jobEnded(st *State, j *Job, at int64) { admitQueued(st, j.Submitter, at) }

// noteFirstStart records a job's first start from the runs of its first
// results, when no job.start came before: the earliest reported start,
// never before the job was let run nor after the entry.
func noteFirstStart(j *Job, rs []ItemResult, at int64) {
	if j.Started != 0 || j.State != JobActive || j.Queued != "" {
		return
	}
	first := int64(0)
	for _, r := range rs {
		if r.Started > 0 && (first == 0 || r.Started < first) {
			first = r.Started
		}
	}
	if first == 0 {
		first = at
	}
	j.Started = max(min(first, at), j.Admitted) // never before it was let run, whatever the entry's time
}

// activeJob is the job e (a job.start or job.expire) names, active and
// let run, when its author is an approved machine.
func activeJob(st *State, e *Entry, author string) (*Job, error) {
	var p JobRef
	if err := DecodePayload(e.Payload, &p); err != nil {
		return nil, err
	}
	id := p.Job
	if m := st.Machines[author]; m == nil || m.Status != MachineApproved {
		return nil, denied("%s is not an approved machine", author)
	}
	j := st.Jobs[id]
	switch {
	case j == nil:
		return nil, fmt.Errorf("%w: unknown job %s", ErrMalformed, id)
	case j.State != JobActive:
		return nil, fmt.Errorf("%w: job %s is %s", ErrMalformed, id, j.State)
	case j.Queued != "":
		return nil, fmt.Errorf("%w: job %s is queued", ErrMalformed, id)
	}
	return j, nil
}

// foldJobStart: a machine that runs a job says when it first started
// (written only while the org has max_job_runtime). The first in ledger
// order counts; its time is never taken as before the job was let run.
func foldJobStart(st *State, e *Entry, author, _ string) error {
	j, err := activeJob(st, e, author)
	if err != nil {
		return err
	}
	if j.Started != 0 {
		return fmt.Errorf("%w: job %s has started already", ErrMalformed, j.ID)
	}
	j = st.editJob(j)
	j.Started = max(e.Time, j.Admitted)
	return nil
}

// foldJobExpire: a machine that runs a job ends it once it has run for
// max_job_runtime since its first start: the job fails, naming the
// policy. Written before its time, it has no effect.
func foldJobExpire(st *State, e *Entry, author, _ string) error {
	j, err := activeJob(st, e, author)
	if err != nil {
		return err
	}
	limit := st.Settings.Policies.MaxJobRuntimeMS
	switch {
	case limit == 0:
		return fmt.Errorf("%w: the org has no policy.%s", ErrMalformed, PolicyMaxJobRuntime)
	case j.Started == 0:
		return fmt.Errorf("%w: job %s has not started", ErrMalformed, j.ID)
	case e.Time-j.Started < limit:
		return fmt.Errorf("%w: job %s has run %s of the %s policy.%s allows", ErrMalformed, j.ID,
			market.FormatDuration(max(e.Time-j.Started, 0)), market.FormatDuration(limit), PolicyMaxJobRuntime)
	}
	j = st.editJob(j)
	j.State, j.Ended = JobFailed, e.Time
	j.Error = fmt.Sprintf("policy.%s: still running %s after its first start; the org allows %s", PolicyMaxJobRuntime,
		market.FormatDuration(e.Time-j.Started), market.FormatDuration(limit))
	jobEnded(st, j, e.Time)
	return nil
}

// RuntimeDeadline is when job j may be expired under the org's
// max_job_runtime (0: never: no policy, or not started).
func (s *State) RuntimeDeadline(j *Job) int64 {
	limit := s.Settings.Policies.MaxJobRuntimeMS
	if limit == 0 || j.Started == 0 {
		return 0
	}
	return j.Started + limit
}
