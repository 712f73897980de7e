package ledger

import (
	"math"
	"math/big"
	"sort"
)

// Usage per person and per machine over a window of time (issue 30,
// docs/design.md §23), like Slurm's sreport, computed from the State
// alone: the same State and window give the same Usage on every node.

// DatasetSpan is a removed dataset's owner, size and life (unix ms).
type DatasetSpan struct {
	Owner   string `cbor:"owner"`
	Size    int64  `cbor:"size"`
	Added   int64  `cbor:"added"`
	Removed int64  `cbor:"removed"`
}

// Consumption is what one person, one machine or the whole org used in a
// window. Figures saturate at the largest int64 rather than wrap.
type Consumption struct {
	CPUMilliMS     int64 // millicores × ms of runs (1000 for a job that asked no cores)
	GPUMS          int64 // GPUs × ms
	MemoryMBMS     int64 // MiB × ms
	ItemsDone      int64 // items whose counted run ended done in the window
	ItemsFailed    int64 // items that failed for good in the window
	Jobs           int64 // jobs submitted in the window
	DatasetBytes   int64 // bytes of datasets held at the window's end
	DatasetByteSec int64 // bytes × seconds of datasets held in the window
	ContractSpend  int64 // micro-dollars a renter's contracts cost in the window
	ContractEarned int64 // micro-dollars a host's contracts earned in the window
}

// add sums c and d.
func (c *Consumption) add(d Consumption) {
	c.CPUMilliMS = satAdd(c.CPUMilliMS, d.CPUMilliMS)
	c.GPUMS = satAdd(c.GPUMS, d.GPUMS)
	c.MemoryMBMS = satAdd(c.MemoryMBMS, d.MemoryMBMS)
	c.ItemsDone = satAdd(c.ItemsDone, d.ItemsDone)
	c.ItemsFailed = satAdd(c.ItemsFailed, d.ItemsFailed)
	c.Jobs = satAdd(c.Jobs, d.Jobs)
	c.DatasetBytes = satAdd(c.DatasetBytes, d.DatasetBytes)
	c.DatasetByteSec = satAdd(c.DatasetByteSec, d.DatasetByteSec)
	c.ContractSpend = satAdd(c.ContractSpend, d.ContractSpend)
	c.ContractEarned = satAdd(c.ContractEarned, d.ContractEarned)
}

// UsageRow is one person's or machine's consumption.
type UsageRow struct {
	ID   string
	Name string
	Consumption
}

// Usage is the org's consumption in [Since, Until) (unix ms): per person
// (every member, and anyone else with consumption in it), per machine
// (every approved machine, and any other that ran something in it), both
// sorted by ID, and the org's totals.
type Usage struct {
	Since, Until int64
	Persons      []UsageRow
	Machines     []UsageRow
	Totals       Consumption
}

// Usage computes the org's consumption in [since, until) from the State.
// A run counts for the part of it inside the window: from its reported
// start (its job's submission when it reported none) for its duration, on
// its machine, for the job's submitter; its CPU is the cores the job asked
// per instance (one core when none), its memory the memory asked (else the
// machine's share per slot, memory_limit / max_concurrent_jobs), its GPUs
// those asked. Every run counts, duplicates and stopped ones too: they
// used the machine.
func (s *State) Usage(since, until int64) Usage {
	u := Usage{Since: since, Until: until}
	if until < since {
		until = since
	}
	persons := map[string]*Consumption{}
	machines := map[string]*Consumption{}
	person := func(id string) *Consumption {
		if persons[id] == nil {
			persons[id] = &Consumption{}
		}
		return persons[id]
	}
	machine := func(id string) *Consumption {
		if machines[id] == nil {
			machines[id] = &Consumption{}
		}
		return machines[id]
	}
	for id := range s.Members {
		person(id)
	}
	for _, m := range s.Machines {
		if m.Status == MachineApproved {
			machine(m.ID)
		}
	}
	for _, j := range s.SortedJobs() {
		if j.Submitted >= since && j.Submitted < until {
			person(j.Submitter).Jobs++
		}
		s.jobUsage(j, since, until, person(j.Submitter), machine)
	}
	for _, d := range s.SortedDatasets() {
		datasetUsage(person(d.Owner), d.Size, d.Added, math.MaxInt64, since, until)
	}
	for _, d := range s.DatasetsRemoved {
		datasetUsage(person(d.Owner), d.Size, d.Added, d.Removed, since, until)
	}
	for _, c := range s.SortedContracts() {
		cost := satSub(c.Cost(until).Total, c.Cost(since).Total)
		if cost > 0 {
			p := person(c.Renter)
			p.ContractSpend = satAdd(p.ContractSpend, cost)
			h := person(c.Host)
			h.ContractEarned = satAdd(h.ContractEarned, cost)
		}
	}
	for _, id := range sortedIDs(persons) {
		u.Persons = append(u.Persons, UsageRow{ID: id, Name: s.PersonName(id), Consumption: *persons[id]})
		u.Totals.add(*persons[id])
	}
	for _, id := range sortedIDs(machines) {
		name := id
		if m := s.Machines[id]; m != nil {
			name = m.Name
		}
		u.Machines = append(u.Machines, UsageRow{ID: id, Name: name, Consumption: *machines[id]})
	}
	return u
}

// jobUsage adds j's runs in the window to its submitter p and to the
// machines that ran them, and the items that ended in it.
func (s *State) jobUsage(j *Job, since, until int64, p *Consumption, machine func(string) *Consumption) {
	if j.Archived != nil {
		archivedUsage(j, since, until, p, machine)
		return
	}
	cores := j.Spec.Cores
	if cores == 0 {
		cores = 1000
	}
	failures := map[int64]int64{} // counted failed runs per item, in the fold's order
	j.Runs.Each(func(r Run) {
		start := r.Started
		if start <= 0 {
			start = j.Submitted
		}
		end := satAdd(start, max(r.DurationMS, 0))
		if r.Counted && !r.Stopped && end >= since && end < until {
			if r.Code == 0 {
				p.ItemsDone++
			} else if failures[r.Item]++; failures[r.Item] > j.Spec.Retries {
				p.ItemsFailed++
			}
		} else if r.Counted && !r.Stopped && r.Code != 0 {
			failures[r.Item]++
		}
		ms := overlap(start, end, since, until)
		if ms == 0 {
			return
		}
		mem := j.Spec.MemoryMB
		if mem == 0 {
			if m := s.Machines[r.Machine]; m != nil && m.Limits.MaxConcurrentJobs > 0 {
				mem = m.Limits.MemoryLimit / m.Limits.MaxConcurrentJobs
			}
		}
		d := Consumption{CPUMilliMS: satMul(ms, cores), GPUMS: satMul(ms, j.Spec.GPUs), MemoryMBMS: satMul(ms, mem)}
		p.CPUMilliMS = satAdd(p.CPUMilliMS, d.CPUMilliMS)
		p.GPUMS = satAdd(p.GPUMS, d.GPUMS)
		p.MemoryMBMS = satAdd(p.MemoryMBMS, d.MemoryMBMS)
		m := machine(r.Machine)
		m.CPUMilliMS = satAdd(m.CPUMilliMS, d.CPUMilliMS)
		m.GPUMS = satAdd(m.GPUMS, d.GPUMS)
		m.MemoryMBMS = satAdd(m.MemoryMBMS, d.MemoryMBMS)
	})
}

// datasetUsage adds a dataset of size bytes held from added to removed.
func datasetUsage(p *Consumption, size, added, removed, since, until int64) {
	if added < until && removed >= until {
		p.DatasetBytes = satAdd(p.DatasetBytes, size)
	}
	if ms := overlap(added, removed, since, until); ms > 0 {
		p.DatasetByteSec = satAdd(p.DatasetByteSec, mulDiv(size, ms, 1000))
	}
}

// overlap is the length of [a, b) ∩ [since, until), 0 when empty.
func overlap(a, b, since, until int64) int64 {
	lo, hi := max(a, since), min(b, until)
	if hi <= lo {
		return 0
	}
	return satSub(hi, lo)
}

func sortedIDs(m map[string]*Consumption) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// satAdd is a+b for non-negative figures, the largest int64 past it.
func satAdd(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// satSub is a-b, the largest int64 past it (b <= 0 only by a hand-made
// figure) and never below 0.
func satSub(a, b int64) int64 {
	if b < 0 && a > math.MaxInt64+b {
		return math.MaxInt64
	}
	return max(a-b, 0)
}

// satMul is a*b for non-negative figures, the largest int64 past it.
func satMul(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

// mulDiv is a*b/c rounded down, exactly, saturating at the largest int64.
func mulDiv(a, b, c int64) int64 {
	var x big.Int
	x.Mul(big.NewInt(a), big.NewInt(b))
	x.Quo(&x, big.NewInt(c))
	if !x.IsInt64() {
		return math.MaxInt64
	}
	return max(x.Int64(), 0)
}
