package ledger

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/cshare/cshare/market"
)

// Finished jobs leave the State (issue 29, docs/design.md §5.7). At the
// fold of a checkpoint, which every node folds at the same point of the
// total order (a barrier, §5.6), every finished job (done, failed or
// cancelled) is replaced by its summary: the job without its items and
// runs, and a JobSummary with what job ls, job show and usage need. The
// full job is handed to the node (State.TakeLeft) to keep on its disk. With
// the org's jobs.retain set, a finished job whose end is older than that at
// the checkpoint's time leaves the State altogether. Everything here is a
// function of the State and the checkpoint entry: every node reaches the
// same State hash.

// JobSummary is what a finished job keeps in the State once its items and
// runs have left it (archiveJobs).
type JobSummary struct {
	Items    int64 `cbor:"items"`    // the job's items (its range's length)
	Attempts int64 `cbor:"attempts"` // every real run of its items, as Item.Attempts sums
	Runs     int64 `cbor:"runs"`     // runs recorded (its RunList's length), late ones included
	// Usage is what its runs used, by hour of start and machine (addUsage),
	// sorted by hour then machine.
	Usage []UsageSlice `cbor:"usage,omitempty"`
	// Late are the runs reported after the job left the State, in the
	// fold's order (none counted): job items lists them after those on
	// disk.
	Late []Run `cbor:"late,omitempty"`
}

// UsageSlice is what a job's runs that started in one hour [Hour,
// Hour+1h) used on one machine: Lo..Hi the span from the first start to the
// last end, and the items whose counted run among them ended done or
// failed for good. One slice per hour and machine whatever the runs'
// lengths, so a job's summary is bounded by its runs' starts.
type UsageSlice struct {
	Hour       int64  `cbor:"h"`
	Machine    string `cbor:"m"`
	Lo         int64  `cbor:"lo"`
	Hi         int64  `cbor:"hi"`
	CPUMilliMS int64  `cbor:"cpu"`
	GPUMS      int64  `cbor:"gpu"`
	MemoryMBMS int64  `cbor:"mem"`
	Done       int64  `cbor:"done,omitempty"`
	Failed     int64  `cbor:"failed,omitempty"`
}

const hourMS = 3_600_000

// JobsSettings are the org's settings for jobs (org set jobs.*).
type JobsSettings struct {
	// RetainMS: a finished job whose end is older than this at a
	// checkpoint leaves the State, summary and all (0: kept).
	RetainMS int64 `cbor:"retain_ms,omitempty" json:"retain_ms"`
}

// MinJobsRetainMS is the shortest jobs.retain: an hour (at most ten years,
// market.MaxDuration), as ledger.retain.
const MinJobsRetainMS = MinRetainMS

// CheckJobsSettings checks the jobs settings; the error names the setting
// as org set takes it.
func CheckJobsSettings(s JobsSettings) error {
	if s.RetainMS != 0 && (s.RetainMS < MinJobsRetainMS || s.RetainMS > market.MaxDuration) {
		return fmt.Errorf("jobs.retain: %d ms; allowed: 0 (keep) or 1h .. 10 years", s.RetainMS)
	}
	return nil
}

// LeftJob is a job that left the State at a checkpoint's fold: Job is the
// whole job (items and runs) as it was then; Dropped says it left
// altogether (jobs.retain) rather than for a summary.
type LeftJob struct {
	Job     *Job
	Dropped bool
}

// leftJobs is where the fold puts the jobs that leave a State: one per
// lineage of States (NewState, DecodeState; Clone and Thaw share it), so
// that a re-fold from a Log's checkpoint, or the State a Log starts with at
// a barrier, hands them to the same place. With a sink (SetLeftSink) each
// goes to it at once; without, up to maxLeftKept wait for TakeLeft. It is
// the fold's only way out, write-only: nothing from it reaches a State.
type leftJobs struct {
	mu   sync.Mutex
	sink func(LeftJob)
	kept []LeftJob
}

// maxLeftKept bounds the jobs kept for TakeLeft when no sink takes them
// (a Log nobody keeps jobs of: benchmarks, simulations).
const maxLeftKept = 4096

func (s *State) leave(l LeftJob) {
	if s.left == nil {
		s.left = &leftJobs{} // a State made by hand
	}
	lj := s.left
	lj.mu.Lock()
	defer lj.mu.Unlock()
	if lj.sink != nil {
		lj.sink(l)
		return
	}
	if len(lj.kept) == maxLeftKept {
		lj.kept = slices.Delete(lj.kept, 0, 1)
	}
	lj.kept = append(lj.kept, l)
}

// TakeLeft returns the jobs that left s, or a State it shares its
// lineage with, since the last call, in the fold's order, and forgets
// them.
func (s *State) TakeLeft() []LeftJob {
	if s.left == nil {
		return nil
	}
	s.left.mu.Lock()
	defer s.left.mu.Unlock()
	l := s.left.kept
	s.left.kept = nil
	return l
}

// SetLeftSink makes every job that leaves s, or a State of its lineage,
// go to sink, those waiting for TakeLeft first. sink is called during the fold, under whatever
// lock the fold holds, possibly from several goroutines (a re-fold for a
// joiner under a read lock): it must be quick and safe for that.
func (s *State) SetLeftSink(sink func(LeftJob)) {
	if s.left == nil {
		s.left = &leftJobs{}
	}
	s.left.mu.Lock()
	defer s.left.mu.Unlock()
	s.left.sink = sink
	for _, l := range s.left.kept {
		sink(l)
	}
	s.left.kept = nil
}

// HasLeftSink reports whether s's lineage has a sink.
func (s *State) HasLeftSink() bool {
	if s.left == nil {
		return false
	}
	s.left.mu.Lock()
	defer s.left.mu.Unlock()
	return s.left.sink != nil
}

// Finished reports whether a job has ended: done, failed or cancelled.
func (j *Job) Finished() bool { return j.State != JobActive }

// Total is the number of the job's items, also once they have left the
// State (Archived).
func (j *Job) Total() int64 {
	if j.Archived != nil {
		return j.Archived.Items
	}
	return int64(j.Items.Len())
}

// RunCount is the number of runs of the job's items the ledger recorded,
// also once they have left the State.
func (j *Job) RunCount() int64 {
	if j.Archived != nil {
		return j.Archived.Runs
	}
	return int64(j.Runs.Len())
}

// ArchiveAt is how many items and runs of finished jobs the State may
// hold before a checkpoint is due whatever ledger.checkpoint_every says
// (ArchiveDue): about 25 MB of heap.
const ArchiveAt = 20_000

// ArchiveDue reports whether the finished jobs still whole in st hold
// ArchiveAt items and runs or more: the next checkpoint would free them
// (the admin machine that writes checkpoints writes one then).
func ArchiveDue(st *State) bool {
	n := 0
	for _, j := range st.Jobs {
		if j.Finished() && j.Archived == nil {
			if n += j.Items.Len() + j.Runs.Len(); n >= ArchiveAt {
				return true
			}
		}
	}
	return false
}

// archiveJobs is a checkpoint's effect on jobs at time at (the checkpoint
// entry's): finished jobs are summarised, and those that ended more than
// jobs.retain before at are dropped.
func archiveJobs(st *State, at int64) {
	retain := st.Settings.Jobs.RetainMS
	var gone []*Job
	for _, j := range st.Jobs {
		if !j.Finished() {
			continue
		}
		if j.Archived == nil || (retain > 0 && satAdd(j.Ended, retain) <= at) {
			gone = append(gone, j)
		}
	}
	if len(gone) == 0 {
		return
	}
	sort.Slice(gone, func(a, b int) bool { return gone[a].Seq < gone[b].Seq })
	jobs := st.jobsW()
	for _, j := range gone {
		if retain > 0 && satAdd(j.Ended, retain) <= at {
			delete(jobs, j.ID)
			st.leave(LeftJob{Job: j, Dropped: true})
			continue
		}
		st.putJob(summarise(st, j))
		st.leave(LeftJob{Job: j})
	}
}

// summarise is finished job j without its items and runs, and their
// summary.
func summarise(st *State, j *Job) *Job {
	c := *j
	sum := &JobSummary{Items: int64(j.Items.Len()), Runs: int64(j.Runs.Len())}
	for _, ch := range j.Items.chunks {
		for _, it := range ch {
			sum.Attempts = satAdd(sum.Attempts, it.Attempts)
		}
	}
	sum.Usage = addUsage(st, j, nil, j.Runs.Each, map[int64]int64{})
	c.Items, c.Runs, c.Archived = ItemList{}, nil, sum
	c.Machines = make(map[string]bool, len(j.Machines))
	for m := range j.Machines {
		c.Machines[m] = true
	}
	return &c
}

// lateRuns records runs reported for a job after it left the State: they
// count in its summary as duplicates, and are kept in it (Late).
func lateRuns(st *State, j *Job, machine string, rs []ItemResult) {
	j = st.editJob(j)
	sum := *j.Archived
	runs := make([]Run, 0, len(rs))
	for _, r := range rs {
		runs = append(runs, runOf(machine, r, false))
		if !r.Stopped {
			j.Duplicates++
		}
	}
	sum.Late = append(slices.Clip(sum.Late), runs...) // the summary is shared with published States
	sum.Attempts = satAdd(sum.Attempts, int64(len(rs)))
	sum.Runs = satAdd(sum.Runs, int64(len(rs)))
	sum.Usage = addUsage(st, j, slices.Clone(sum.Usage), func(fn func(Run)) {
		for _, r := range runs {
			fn(r)
		}
	}, nil)
	j.Archived = &sum
}

// addUsage adds runs (each in turn, as a RunList's Each) of job j to the
// hourly slices us and returns them sorted. failures counts counted
// failed runs per item, to tell an item failed for good (nil: none of
// the runs is counted).
func addUsage(st *State, j *Job, us []UsageSlice, each func(func(Run)), failures map[int64]int64) []UsageSlice {
	type key struct {
		hour    int64
		machine string
	}
	at := make(map[key]int, len(us))
	for i, u := range us {
		at[key{u.Hour, u.Machine}] = i
	}
	slice := func(hour int64, machine string, lo, hi int64) *UsageSlice {
		k := key{hour, machine}
		i, ok := at[k]
		if !ok {
			i = len(us)
			at[k] = i
			us = append(us, UsageSlice{Hour: hour, Machine: machine, Lo: lo, Hi: hi})
		}
		u := &us[i]
		u.Lo, u.Hi = min(u.Lo, lo), max(u.Hi, hi)
		return u
	}
	cores := j.Spec.Cores
	if cores == 0 {
		cores = 1000
	}
	each(func(r Run) {
		start := r.Started
		if start <= 0 {
			start = j.Submitted
		}
		end := satAdd(start, max(r.DurationMS, 0))
		mem := j.Spec.MemoryMB
		if mem == 0 {
			if m := st.Machines[r.Machine]; m != nil && m.Limits.MaxConcurrentJobs > 0 {
				mem = m.Limits.MemoryLimit / m.Limits.MaxConcurrentJobs
			}
		}
		ms := end - start
		u := slice(start-start%hourMS, r.Machine, start, end)
		u.CPUMilliMS = satAdd(u.CPUMilliMS, satMul(ms, cores))
		u.GPUMS = satAdd(u.GPUMS, satMul(ms, j.Spec.GPUs))
		u.MemoryMBMS = satAdd(u.MemoryMBMS, satMul(ms, mem))
		if !r.Counted || r.Stopped || failures == nil {
			return
		}
		if r.Code == 0 {
			u.Done++
		} else if failures[r.Item]++; failures[r.Item] > j.Spec.Retries {
			u.Failed++
		}
	})
	sort.Slice(us, func(a, b int) bool {
		if us[a].Hour != us[b].Hour {
			return us[a].Hour < us[b].Hour
		}
		return us[a].Machine < us[b].Machine
	})
	return us
}

// archivedUsage adds what archived job j used in [since, until): each
// slice for the share of its span Lo..Hi inside the window (all of it when
// the window holds the span: exact for a window that cuts no slice).
func archivedUsage(j *Job, since, until int64, p *Consumption, machine func(string) *Consumption) {
	for _, u := range j.Archived.Usage {
		var d Consumption
		switch ms := overlap(u.Lo, u.Hi, since, until); {
		case u.Lo >= since && u.Hi < until || u.Lo == u.Hi && u.Lo >= since && u.Lo < until:
			d = Consumption{CPUMilliMS: u.CPUMilliMS, GPUMS: u.GPUMS, MemoryMBMS: u.MemoryMBMS, ItemsDone: u.Done, ItemsFailed: u.Failed}
		case ms > 0:
			span := u.Hi - u.Lo
			d = Consumption{CPUMilliMS: mulDiv(u.CPUMilliMS, ms, span), GPUMS: mulDiv(u.GPUMS, ms, span),
				MemoryMBMS: mulDiv(u.MemoryMBMS, ms, span), ItemsDone: mulDiv(u.Done, ms, span), ItemsFailed: mulDiv(u.Failed, ms, span)}
		default:
			continue
		}
		for _, c := range []*Consumption{p, machine(u.Machine)} {
			c.CPUMilliMS = satAdd(c.CPUMilliMS, d.CPUMilliMS)
			c.GPUMS = satAdd(c.GPUMS, d.GPUMS)
			c.MemoryMBMS = satAdd(c.MemoryMBMS, d.MemoryMBMS)
		}
		p.ItemsDone = satAdd(p.ItemsDone, d.ItemsDone)
		p.ItemsFailed = satAdd(p.ItemsFailed, d.ItemsFailed)
	}
}

// ArchivePage is how many items one page of a finished job on a node's
// disk holds, with their runs (EncodeArchive).
const ArchivePage = 1000

// ArchivedPage is one page of a finished job on disk: items
// [p*ArchivePage, (p+1)*ArchivePage) of its agenda (fewer on the last
// page), and their runs ordered by item, in the fold's order within an
// item.
type ArchivedPage struct {
	Items []Item `cbor:"i"`
	Runs  []Run  `cbor:"r"`
}

// EncodeArchive is how a node keeps a finished job on its disk, so that
// its items can be listed a page at a time: parts[0] is the job without
// items and runs, parts[1+p] page p (ArchivedPage), canonical CBOR.
func EncodeArchive(j *Job) ([][]byte, error) {
	h := *j
	h.Items, h.Runs, h.Archived = ItemList{}, nil, nil
	hb, err := encMode.Marshal(&h)
	if err != nil {
		return nil, err
	}
	n := j.Items.Len()
	byPage := make([][]Run, (n+ArchivePage-1)/ArchivePage)
	j.Runs.Each(func(r Run) {
		if i := r.Item - j.Spec.RangeStart; i >= 0 && i < int64(n) {
			byPage[i/ArchivePage] = append(byPage[i/ArchivePage], r)
		}
	})
	parts := make([][]byte, 0, 1+len(byPage))
	parts = append(parts, hb)
	for p, rs := range byPage {
		slices.SortStableFunc(rs, func(a, b Run) int { return cmp.Compare(a.Item, b.Item) })
		b, err := encMode.Marshal(ArchivedPage{Items: j.Items.AppendRange(nil, p*ArchivePage, min(n, (p+1)*ArchivePage)), Runs: rs})
		if err != nil {
			return nil, err
		}
		parts = append(parts, b)
		byPage[p] = nil
	}
	return parts, nil
}

// DecodeArchiveHeader decodes EncodeArchive's parts[0]; anything else is
// ErrMalformed.
func DecodeArchiveHeader(b []byte) (*Job, error) {
	if len(b) > maxArchivedPage {
		return nil, fmt.Errorf("%w: job header of %d bytes; at most %d", ErrTooLarge, len(b), maxArchivedPage)
	}
	j := &Job{}
	if err := stateDecMode.Unmarshal(b, j); err != nil {
		return nil, fmt.Errorf("%w: job: %v", ErrMalformed, err)
	}
	if j.Items.Len() != 0 || j.Runs != nil || j.Archived != nil || j.Spec.RangeEnd < j.Spec.RangeStart {
		return nil, fmt.Errorf("%w: job %s: not a job's header", ErrMalformed, j.ID)
	}
	return j, nil
}

// maxArchivedPage bounds a page's bytes: its items and a million runs.
const maxArchivedPage = 256 << 20

// DecodeArchivePage decodes a page of EncodeArchive; anything else (more
// than ArchivePage items, runs not ordered by item) is ErrMalformed.
func DecodeArchivePage(b []byte) (ArchivedPage, error) {
	var p ArchivedPage
	if len(b) > maxArchivedPage {
		return p, fmt.Errorf("%w: job page of %d bytes; at most %d", ErrTooLarge, len(b), maxArchivedPage)
	}
	if err := stateDecMode.Unmarshal(b, &p); err != nil {
		return ArchivedPage{}, fmt.Errorf("%w: job page: %v", ErrMalformed, err)
	}
	if len(p.Items) == 0 || len(p.Items) > ArchivePage {
		return ArchivedPage{}, fmt.Errorf("%w: job page of %d items; 1 .. %d", ErrMalformed, len(p.Items), ArchivePage)
	}
	for i := 1; i < len(p.Runs); i++ {
		if p.Runs[i].Item < p.Runs[i-1].Item {
			return ArchivedPage{}, fmt.Errorf("%w: job page: runs not ordered by item", ErrMalformed)
		}
	}
	return p, nil
}
