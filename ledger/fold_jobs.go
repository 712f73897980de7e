package ledger

import (
	"encoding/hex"
	"errors"
	"fmt"
	"sort"

	"github.com/cshare/cshare/internal/regauth"
	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/ledger/jobspec"
)

// Jobs in the fold: their IDs and checks, who may manage one, and the
// runs and results of their items.

// JobIDFor derives a short, stable job ID from the submitting entry.
func JobIDFor(e *Entry) string {
	d := e.cid.Hash()
	if len(d) > 8 {
		d = d[len(d)-6:]
	}
	return hex.EncodeToString(d)
}

// MaxJobItems caps a job's agenda (its range of items).
const MaxJobItems = jobspec.MaxItems

// ValidateJobSpec checks a job spec with the validators the CLI and the API
// use (package jobspec, and package text for the name); errors name the
// field, the value and what is allowed.
func ValidateJobSpec(s JobSpec) error {
	if s.Name != "" {
		if err := text.CheckName("name", s.Name); err != nil {
			return err
		}
	}
	if s.Entrypoint != "" {
		if err := jobspec.CheckCmd([]string{s.Entrypoint}); err != nil {
			return jobspec.Rename(err, "entrypoint")
		}
	}
	if s.Entrypoint == "" || len(s.Cmd) > 0 {
		if err := jobspec.CheckCmd(s.Cmd); err != nil {
			return err
		}
	}
	if err := jobspec.CheckDriver(s.Driver); err != nil {
		return err
	}
	if s.Driver == "docker" && s.Image == "" {
		return errors.New("image: required for the docker driver")
	}
	if s.Image != "" {
		if err := jobspec.CheckImage(s.Image); err != nil {
			return err
		}
	}
	for _, err := range []error{
		jobspec.CheckRange(s.RangeStart, s.RangeEnd),
		jobspec.CheckPriority(s.Priority),
		jobspec.CheckCPUs(s.CPUs),
		jobspec.CheckRetries(s.Retries),
		jobspec.CheckCores(s.Cores),
		jobspec.CheckMemoryMB(s.MemoryMB),
		jobspec.CheckGPUs(s.GPUs),
		jobspec.CheckDiskMB(s.DiskMB),
		jobspec.CheckGPUMemoryMB(s.GPUMemoryMB, s.GPUs),
		jobspec.CheckItemTimeoutMS(s.ItemTimeoutMS),
	} {
		if err != nil {
			return err
		}
	}
	if err := ValidateDatasetMounts(s.Datasets); err != nil {
		return err
	}
	if s.MaxCPUs != nil {
		if err := jobspec.CheckMaxCPUs(*s.MaxCPUs); err != nil {
			return err
		}
	}
	if s.RegistryAuth != nil {
		if s.Driver != "docker" {
			return errors.New("registry_auth: only for the docker driver (it pulls the image)")
		}
		if err := regauth.CheckSealed("registry_auth", s.RegistryAuth); err != nil {
			return err
		}
	}
	return jobspec.CheckEnv(s.Env)
}

// ValidateJobModify checks a job.modify's values as ValidateJobSpec does.
func ValidateJobModify(m JobModify) error {
	if m.Priority != nil {
		if err := jobspec.CheckPriority(*m.Priority); err != nil {
			return err
		}
	}
	if m.MaxCPUs != nil {
		return jobspec.CheckMaxCPUs(*m.MaxCPUs)
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func ownJob(st *State, person, id, what string) (*Job, error) {
	j := st.Jobs[id]
	if j == nil {
		return nil, fmt.Errorf("%w: unknown job %s", ErrMalformed, id)
	}
	if j.Submitter != person && !st.IsAdmin(person) {
		return nil, denied("only the submitter or an admin may %s job %s", what, id)
	}
	return j, nil
}

// addRun records a run of one of j's items. A run neither counted nor
// stopped is a duplicate: work done again.
func addRun(j *Job, machine string, r ItemResult, counted bool) {
	j.Runs.Add(runOf(machine, r, counted))
	if !counted && !r.Stopped {
		j.Duplicates++
	}
}

// runOf is the run machine reported as r.
func runOf(machine string, r ItemResult, counted bool) Run {
	return Run{Item: r.Item, Machine: machine, Instance: r.Instance, Started: r.Started,
		DurationMS: r.DurationMS, Code: r.Code, Counted: counted, Stopped: r.Stopped, OOMKilled: r.OOMKilled, TimedOut: r.TimedOut}
}

// foldJobSubmit: a member submits a job, mounting only datasets they may
// read.
func foldJobSubmit(st *State, e *Entry, author, person string) error {
	var p JobSpec
	if err := DecodePayload(e.Payload, &p); err != nil {
		return err
	}
	if err := ValidateJobSpec(p); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if err := checkJobDatasets(st, person, p.Datasets); err != nil {
		return err
	}
	if err := st.CheckJobPolicies(p); err != nil {
		return err
	}
	id := JobIDFor(e)
	if st.Jobs[id] != nil {
		return fmt.Errorf("%w: job %s exists", ErrMalformed, id)
	}
	n := p.RangeEnd - p.RangeStart + 1
	st.JobSeq++
	var mc *int64
	if p.MaxCPUs != nil {
		v := *p.MaxCPUs
		mc = &v
	}
	j := &Job{ID: id, Submitter: person, Machine: author, Spec: p, Seq: st.JobSeq, Submitted: e.Time, State: JobActive,
		Priority: p.Priority, MaxCPUs: mc, Items: NewItemList(int(n)), Machines: map[string]bool{}}
	st.putJob(j)
	admitNew(st, j, e.Time)
	return nil
}

// foldJobModify: the submitter or an admin changes a job's priority or
// CPU cap.
func foldJobModify(st *State, e *Entry, _, person string) error {
	var p JobModify
	if err := DecodePayload(e.Payload, &p); err != nil {
		return err
	}
	j, err := ownJob(st, person, p.Job, "modify")
	if err != nil {
		return err
	}
	if err := ValidateJobModify(p); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	j = st.editJob(j)
	if p.Priority != nil {
		j.Priority = *p.Priority
	}
	if p.MaxCPUs != nil {
		v := *p.MaxCPUs
		j.MaxCPUs = &v
	}
	return nil
}

// foldJobCancel: the submitter or an admin cancels an active job.
func foldJobCancel(st *State, e *Entry, _, person string) error {
	var p JobRef
	if err := DecodePayload(e.Payload, &p); err != nil {
		return err
	}
	j, err := ownJob(st, person, p.Job, "cancel")
	if err != nil {
		return err
	}
	if j.State != JobActive {
		return fmt.Errorf("%w: job %s is already %s", ErrMalformed, j.ID, j.State)
	}
	j = st.editJob(j)
	j.State, j.Ended = JobCancelled, e.Time
	jobEnded(st, j, e.Time)
	return nil
}

// foldJobResults: an approved machine reports runs of a job's items; the
// first completion of an item in ledger order counts.
func foldJobResults(st *State, e *Entry, author, _ string) error {
	var p JobResults
	if err := DecodePayload(e.Payload, &p); err != nil {
		return err
	}
	m := st.Machines[author]
	if m == nil || m.Status != MachineApproved {
		return denied("job results from %s, which is not an approved machine", author)
	}
	j := st.Jobs[p.Job]
	if j == nil {
		return fmt.Errorf("%w: unknown job %s", ErrMalformed, p.Job)
	}
	if len(p.Results) == 0 {
		return fmt.Errorf("%w: no results", ErrMalformed)
	}
	if j.State == JobActive && j.Queued != "" {
		return fmt.Errorf("%w: job %s is queued (%s): nothing of it has run", ErrMalformed, j.ID, "policy."+PolicyMaxConcurrentJobs)
	}
	for i, r := range p.Results {
		if r.Item < j.Spec.RangeStart || r.Item > j.Spec.RangeEnd {
			return fmt.Errorf("%w: item %d outside the job's range", ErrMalformed, r.Item)
		}
		p.Results[i] = normalizeResult(r)
	}
	if j.Archived != nil {
		lateRuns(st, j, author, p.Results)
		return nil
	}
	j = st.editJob(j)
	if j.State != JobActive {
		// Late results of a finished or cancelled job count for nothing,
		// but they were real runs.
		for _, r := range p.Results {
			j.Items.at(int(uint64(r.Item)-uint64(j.Spec.RangeStart))).Attempts++ // a real run all the same
			addRun(j, author, r, false)
		}
		return nil
	}
	if !j.Machines[author] {
		j.Machines[author] = true
		st.editMachine(m).TotalJobs++
	}
	noteFirstStart(j, p.Results, e.Time)
	for _, r := range p.Results {
		it := j.Items.at(int(uint64(r.Item) - uint64(j.Spec.RangeStart)))
		it.Attempts++ // every real attempt, counted or not
		if r.Stopped || it.Status != ItemPending {
			addRun(j, author, r, false) // the first completion in the total order counts
			continue
		}
		addRun(j, author, r, true)
		it.Code, it.DurationMS, it.OutputSize, it.Machine = r.Code, r.DurationMS, r.OutputSize, author
		if r.Code != 0 {
			it.Failures++
		}
		switch {
		case r.Code == 0:
			it.Status = ItemDone
			j.Done++
		case it.Failures > j.Spec.Retries:
			it.Status = ItemFailed
			j.Failed++
			if j.Error == "" {
				j.Error = fmt.Sprintf("item %d failed with exit code %d", r.Item, r.Code)
				if r.Error != "" {
					j.Error = fmt.Sprintf("item %d failed: %s", r.Item, r.Error)
				}
			}
		}
	}
	if j.Done+j.Failed == int64(j.Items.Len()) {
		j.State, j.Ended = JobDone, e.Time
		if j.Failed > 0 {
			j.State = JobFailed
		}
		jobEnded(st, j, e.Time)
	}
	return nil
}
