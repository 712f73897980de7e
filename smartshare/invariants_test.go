package smartshare

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
)

// This file holds the invariants, written independently of the planner's
// internals, as functions of (Input, Result). The property tests and every
// `plan` of the scenario files check them.

// view is what the checks derive from an Input and a Result.
type view struct {
	in          Input
	res         Result
	constrained bool
	rank        map[string]int // job ID -> position in priority order
	job         map[string]*Job
	mach        map[string]*Machine
	primWant    map[string]int
	secWant     map[string]int
	P, S        map[string]int
	run         map[slotKey]Instance // running instances of the input
	target      map[slotKey]Instance
	preempted   map[slotKey]Preemption
}

type slotKey struct {
	m string
	s int
}

func newView(in Input, res Result) *view {
	v := &view{in: in, res: res, rank: map[string]int{}, job: map[string]*Job{}, mach: map[string]*Machine{},
		primWant: map[string]int{}, secWant: map[string]int{}, P: map[string]int{}, S: map[string]int{},
		run: map[slotKey]Instance{}, target: map[slotKey]Instance{}, preempted: map[slotKey]Preemption{}}
	v.constrained = isConstrained(in)
	jobs := slices.Clone(in.Jobs)
	slices.SortFunc(jobs, func(a, b Job) int {
		if a.Priority != b.Priority {
			return compareInt(a.Priority, b.Priority)
		}
		if a.Submitted != b.Submitted {
			return compareInt(int(a.Submitted), int(b.Submitted))
		}
		return strings.Compare(a.ID, b.ID)
	})
	for i := range jobs {
		j := &jobs[i]
		v.rank[j.ID] = i
		v.job[j.ID] = j
		prim := min(j.CPUs, j.ItemsRemaining)
		eff := in.Config.DefaultMaxCPUs
		if j.MaxCPUs.Set {
			eff = j.MaxCPUs.N
		}
		if eff < 0 || eff > in.Config.MaxCPUsLimit {
			eff = in.Config.MaxCPUsLimit
		}
		sec := 0
		if in.Config.Mode != ModeNone && eff > j.CPUs {
			sec = min(eff-j.CPUs, j.ItemsRemaining-prim)
		}
		v.primWant[j.ID], v.secWant[j.ID] = prim, sec
	}
	for i := range in.Machines {
		v.mach[in.Machines[i].ID] = &in.Machines[i]
	}
	for _, x := range in.Instances {
		v.run[slotKey{x.Machine, x.Slot}] = x
	}
	for _, x := range res.Instances {
		v.target[slotKey{x.Machine, x.Slot}] = x
		if x.Kind == KindPrimary {
			v.P[x.Job]++
		} else {
			v.S[x.Job]++
		}
	}
	for _, x := range res.Preempt {
		v.preempted[slotKey{x.Machine, x.Slot}] = x
	}
	return v
}

func isConstrained(in Input) bool {
	cores, mem, disk := false, false, false
	for _, m := range in.Machines {
		cores = cores || m.Cores > 0
		mem = mem || m.MemoryMB > 0
		disk = disk || m.DiskMB > 0
	}
	for _, j := range in.Jobs {
		if j.GPUs > 0 || (cores && j.Cores > 0) || (mem && j.MemoryMB > 0) || (disk && j.DiskMB > 0) {
			return true
		}
	}
	return false
}

// remaining is what machine m has left in the target layout, without the
// instance in slot `without` (-1: none).
func (v *view) remaining(m *Machine, without int) (free int, c, mem int64, g int) {
	free = m.Slots
	c, mem, g = m.Cores, m.MemoryMB, m.GPUs
	for s := 0; s < m.Slots; s++ {
		x, ok := v.target[slotKey{m.ID, s}]
		if !ok || s == without {
			continue
		}
		free--
		j := v.job[x.Job]
		c -= j.Cores
		mem -= j.MemoryMB
		g -= j.GPUs
	}
	return
}

// remainingDisk is the disk machine m has left in the target layout,
// without the instance in slot `without` (-1: none).
func (v *view) remainingDisk(m *Machine, without int) int64 {
	d := m.DiskMB
	for s := 0; s < m.Slots; s++ {
		if x, ok := v.target[slotKey{m.ID, s}]; ok && s != without {
			d -= v.job[x.Job].DiskMB
		}
	}
	return d
}

// fitsRemaining: would one more instance of j fit m (with slot `without`
// emptied first)?
func (v *view) fitsRemaining(j *Job, m *Machine, without int) bool {
	free, c, mem, g := v.remaining(m, without)
	if free < 1 {
		return false
	}
	if !v.constrained {
		return true
	}
	if j.GPUs > 0 && g < j.GPUs {
		return false
	}
	if j.Cores > 0 && m.Cores > 0 && c < j.Cores {
		return false
	}
	if j.MemoryMB > 0 && m.MemoryMB > 0 && mem < j.MemoryMB {
		return false
	}
	if j.DiskMB > 0 && m.DiskMB > 0 && v.remainingDisk(m, without) < j.DiskMB {
		return false
	}
	return true
}

func (v *view) short(id string) bool {
	return v.P[id]+v.S[id] < v.primWant[id]+v.secWant[id]
}

// checkCapacity: every target instance names a known job and machine and a
// slot in range, one instance per slot, layout sorted by machine then slot,
// and each machine's cores, memory and GPUs cover its instances' needs.
func checkCapacity(v *view) error {
	for i, x := range v.res.Instances {
		m, ok := v.mach[x.Machine]
		if !ok {
			return fmt.Errorf("capacity: instance %d on unknown machine %q", i, x.Machine)
		}
		if _, ok := v.job[x.Job]; !ok {
			return fmt.Errorf("capacity: instance %d of unknown job %q", i, x.Job)
		}
		if x.Slot < 0 || x.Slot >= m.Slots {
			return fmt.Errorf("capacity: instance %d slot %d out of range for %s", i, x.Slot, x.Machine)
		}
		if i > 0 {
			p := v.res.Instances[i-1]
			if p.Machine > x.Machine || (p.Machine == x.Machine && p.Slot >= x.Slot) {
				return fmt.Errorf("capacity: instances not sorted or slot used twice at %d: %+v after %+v", i, x, p)
			}
		}
		if x.Kind != KindPrimary && x.Kind != KindSecondary {
			return fmt.Errorf("capacity: instance %d kind %q", i, x.Kind)
		}
	}
	for _, m := range v.in.Machines {
		free, c, mem, g := v.remaining(&m, -1)
		if free < 0 || (m.Cores > 0 && c < 0 && v.constrained) || (m.MemoryMB > 0 && mem < 0 && v.constrained) || (g < 0 && v.constrained) {
			return fmt.Errorf("capacity: machine %s over capacity: free=%d cores=%d mem=%d gpus=%d", m.ID, free, c, mem, g)
		}
		if d := v.remainingDisk(&m, -1); m.DiskMB > 0 && d < 0 && v.constrained {
			return fmt.Errorf("capacity: machine %s over its disk by %d MB", m.ID, -d)
		}
	}
	for i, x := range v.res.Preempt {
		r, ok := v.run[slotKey{x.Machine, x.Slot}]
		if !ok || r.Job != x.Job {
			return fmt.Errorf("capacity: preemption %d (%+v) is not a running instance", i, x)
		}
		if t, ok := v.target[slotKey{x.Machine, x.Slot}]; ok && t.Job == x.Job {
			return fmt.Errorf("capacity: preemption %d (%+v) keeps its job in the slot", i, x)
		}
		if i > 0 {
			p := v.res.Preempt[i-1]
			if p.Machine > x.Machine || (p.Machine == x.Machine && p.Slot >= x.Slot) {
				return fmt.Errorf("capacity: preemptions not sorted at %d", i)
			}
		}
	}
	return nil
}

// checkPrimaryFloor: a job never has fewer primaries than the smaller of
// its cpus (and items) and the instances it was running (unless machine
// capacity forced them out), never more than that, and has secondaries
// only once all its primaries run. Preemption never takes a primary: the
// preempted instances of a job are not needed for its primary floor.
func checkPrimaryFloor(v *view) error {
	running := map[string]int{}
	for _, x := range v.in.Instances {
		if _, ok := v.job[x.Job]; ok {
			running[x.Job]++
		}
	}
	for id := range v.job {
		p, pw := v.P[id], v.primWant[id]
		if p > pw {
			return fmt.Errorf("primary floor: %s has %d primaries, wants %d", id, p, pw)
		}
		if v.S[id] > 0 && p < pw {
			return fmt.Errorf("primary floor: %s has secondaries but %d/%d primaries", id, p, pw)
		}
		if !v.constrained && p < min(pw, running[id]) {
			return fmt.Errorf("primary floor: %s shrank to %d primaries while running %d (cpus %d)", id, p, running[id], pw)
		}
	}
	// Running primaries a job still needs stay where they are.
	if !v.constrained {
		prims := map[string]int{}
		for _, x := range v.in.Instances {
			if x.Kind == KindPrimary {
				prims[x.Job]++
			}
		}
		for _, x := range v.in.Instances {
			if _, ok := v.job[x.Job]; !ok || x.Kind != KindPrimary || prims[x.Job] > v.primWant[x.Job] {
				continue
			}
			if t, ok := v.target[slotKey{x.Machine, x.Slot}]; !ok || t.Job != x.Job || t.Kind != KindPrimary {
				return fmt.Errorf("primary floor: running primary %+v moved or stopped (target %+v)", x, t)
			}
		}
	}
	return nil
}

// checkCaps: no job exceeds its effective max_cpus (or cpus, whichever is
// larger), its items_remaining, or gets secondaries with SmartShare off.
func checkCaps(v *view) error {
	for id, j := range v.job {
		total := v.P[id] + v.S[id]
		if v.S[id] > v.secWant[id] {
			return fmt.Errorf("caps: %s has %d secondaries, cap %d", id, v.S[id], v.secWant[id])
		}
		if total > j.ItemsRemaining {
			return fmt.Errorf("caps: %s has %d instances for %d items", id, total, j.ItemsRemaining)
		}
		eff := v.in.Config.DefaultMaxCPUs
		if j.MaxCPUs.Set {
			eff = j.MaxCPUs.N
		}
		if eff < 0 || eff > v.in.Config.MaxCPUsLimit {
			eff = v.in.Config.MaxCPUsLimit
		}
		if total > max(eff, j.CPUs) {
			return fmt.Errorf("caps: %s has %d instances, max_cpus %d cpus %d", id, total, eff, j.CPUs)
		}
		if (v.in.Config.Mode == ModeNone || eff == 0) && v.S[id] > 0 {
			return fmt.Errorf("caps: %s has secondaries with SmartShare off", id)
		}
	}
	for _, x := range v.res.Instances {
		if _, ok := v.job[x.Job]; !ok {
			return fmt.Errorf("caps: instance of unknown job %s", x.Job)
		}
	}
	return nil
}

// checkBalance: for two jobs with all their primaries, where j is below
// its secondary cap, i has at most one secondary more than j. Where that
// does not hold it must be impossible to fix: preemption is disabled and
// all of i's secondaries were already running (with machine resources:
// and no free slot fits j, which checkNoIdle checks), or (with machine
// resources) no slot of i's secondaries would fit j.
func checkBalance(v *view) error {
	disabled := v.in.Config.PreemptPolicy == PolicyDisabled
	for jid, j := range v.job {
		if v.P[jid] < v.primWant[jid] || v.S[jid] >= v.secWant[jid] {
			continue
		}
		for iid := range v.job {
			if iid == jid || v.S[iid] < v.S[jid]+2 {
				continue
			}
			if disabled {
				if v.constrained {
					continue // j fits no free slot (checkNoIdle), and nothing is preempted
				}
				// i may keep what it runs; it must not have got new ones.
				for _, x := range v.res.Instances {
					if x.Job == iid && x.Kind == KindSecondary {
						if r, ok := v.run[slotKey{x.Machine, x.Slot}]; !ok || r.Job != iid {
							return fmt.Errorf("balance: %s got a new secondary (%s:%d) while %s has %d < %d", iid, x.Machine, x.Slot, jid, v.S[jid], v.S[iid])
						}
					}
				}
				continue
			}
			if !v.constrained {
				return fmt.Errorf("balance: %s has %d secondaries, %s (below cap %d) has %d", iid, v.S[iid], jid, v.secWant[jid], v.S[jid])
			}
			for _, x := range v.res.Instances {
				if x.Job == iid && x.Kind == KindSecondary && v.fitsRemaining(j, v.mach[x.Machine], x.Slot) {
					return fmt.Errorf("balance: %s (%d secondaries) could take %s:%d from %s (%d)", jid, v.S[jid], x.Machine, x.Slot, iid, v.S[iid])
				}
			}
		}
	}
	return nil
}

// checkNoIdle: no slot stays free while a job that could use more
// instances fits in it.
func checkNoIdle(v *view) error {
	for _, m := range v.in.Machines {
		free, _, _, _ := v.remaining(&m, -1)
		if free == 0 {
			continue
		}
		for id, j := range v.job {
			if v.short(id) && v.fitsRemaining(j, &m, -1) {
				return fmt.Errorf("no idle: machine %s has %d free slots that fit %s (%d+%d of %d+%d)", m.ID, free, id,
					v.P[id], v.S[id], v.primWant[id], v.secWant[id])
			}
		}
	}
	return nil
}

// checkVictimOrder (without machine resources): preemptions give the slot
// to another job and happen only when no slot is free; within a job the
// victims are its most recently started instances; across jobs, a job that
// lost instances never ends with fewer secondaries than a lower-priority
// job (the lower-priority job would have been the victim).
func checkVictimOrder(v *view) error {
	if v.constrained {
		return nil
	}
	if len(v.res.Preempt) > 0 && len(v.res.Instances) < totalSlots(v.in) {
		return fmt.Errorf("victim order: %d preemptions while %d slots are free", len(v.res.Preempt), totalSlots(v.in)-len(v.res.Instances))
	}
	newer := func(a, b Instance) bool { // a is more recent than b in victim order
		if a.Started != b.Started {
			return a.Started > b.Started
		}
		if a.Machine != b.Machine {
			return a.Machine > b.Machine
		}
		return a.Slot > b.Slot
	}
	for _, x := range v.res.Preempt {
		k := slotKey{x.Machine, x.Slot}
		if t, ok := v.target[k]; !ok || t.Job == x.Job {
			return fmt.Errorf("victim order: preempted slot %s:%d not given to another job", x.Machine, x.Slot)
		}
		victim := v.run[k]
		for _, y := range v.in.Instances {
			if y.Job != x.Job {
				continue
			}
			t, ok := v.target[slotKey{y.Machine, y.Slot}]
			if ok && t.Job == y.Job && t.Kind == KindSecondary && newer(y, victim) {
				return fmt.Errorf("victim order: %s preempted %s:%d (started %d) but kept newer secondary %s:%d (started %d)",
					x.Job, x.Machine, x.Slot, victim.Started, y.Machine, y.Slot, y.Started)
			}
		}
		for yid := range v.job {
			if v.rank[yid] > v.rank[x.Job] && v.S[yid] > v.S[x.Job] {
				return fmt.Errorf("victim order: %s lost instances but lower-priority %s has more secondaries (%d > %d)", x.Job, yid, v.S[yid], v.S[x.Job])
			}
		}
	}
	return nil
}

// checkModes: disabled preempts nothing; every preemption carries the
// configured mode.
func checkModes(v *view) error {
	want := PolicyAggressive
	switch v.in.Config.PreemptPolicy {
	case PolicyDisabled:
		if len(v.res.Preempt) > 0 {
			return fmt.Errorf("modes: %d preemptions with policy disabled", len(v.res.Preempt))
		}
	case PolicyPassive:
		want = PolicyPassive
	}
	for _, x := range v.res.Preempt {
		if x.Mode != want {
			return fmt.Errorf("modes: preemption %+v, want mode %s", x, want)
		}
	}
	return nil
}

// checkSummary: the job summaries agree with the layout.
func checkSummary(v *view) error {
	if len(v.res.Jobs) != len(v.in.Jobs) {
		return fmt.Errorf("summary: %d jobs, want %d", len(v.res.Jobs), len(v.in.Jobs))
	}
	pre := map[string]int{}
	for _, x := range v.res.Preempt {
		pre[x.Job]++
	}
	for i, s := range v.res.Jobs {
		if v.rank[s.ID] != i {
			return fmt.Errorf("summary: job %s at %d, rank %d", s.ID, i, v.rank[s.ID])
		}
		if s.Primaries != v.P[s.ID] || s.Secondaries != v.S[s.ID] || s.Preempted != pre[s.ID] ||
			s.Wanted != v.primWant[s.ID]+v.secWant[s.ID] {
			return fmt.Errorf("summary: %+v disagrees with layout P=%d S=%d preempted=%d wanted=%d", s, v.P[s.ID], v.S[s.ID], pre[s.ID], v.primWant[s.ID]+v.secWant[s.ID])
		}
		short := v.short(s.ID)
		if short != (s.Reason != "" && s.Reason != ReasonSSDisabled) {
			return fmt.Errorf("summary: %+v: short=%v but reason %q", s, short, s.Reason)
		}
	}
	if h := hashResult(v.res.Instances, v.res.Preempt); h != v.res.Hash {
		return fmt.Errorf("summary: hash %s, recomputed %s", v.res.Hash, h)
	}
	return nil
}

func checkAll(in Input, res Result) error {
	v := newView(in, res)
	return errors.Join(checkCapacity(v), checkPrimaryFloor(v), checkCaps(v), checkBalance(v), checkNoIdle(v),
		checkVictimOrder(v), checkModes(v), checkSummary(v))
}

// shuffled returns in with every slice in a random order.
func shuffled(in Input, rng *rand.Rand) Input {
	out := cloneInput(in)
	rng.Shuffle(len(out.Machines), func(i, j int) { out.Machines[i], out.Machines[j] = out.Machines[j], out.Machines[i] })
	rng.Shuffle(len(out.Jobs), func(i, j int) { out.Jobs[i], out.Jobs[j] = out.Jobs[j], out.Jobs[i] })
	rng.Shuffle(len(out.Instances), func(i, j int) { out.Instances[i], out.Instances[j] = out.Instances[j], out.Instances[i] })
	return out
}

// checkShuffled: the same input in other orders gives the same result.
func checkShuffled(in Input, res Result, n int) error {
	rng := rand.New(rand.NewPCG(uint64(len(in.Jobs)), uint64(len(in.Instances))))
	for k := 0; k < n; k++ {
		got := Plan(shuffled(in, rng))
		if !reflect.DeepEqual(got, res) {
			return fmt.Errorf("determinism: shuffled input planned differently: hash %s vs %s", got.Hash, res.Hash)
		}
	}
	return nil
}

// checkFixedPoint: once the plan is carried out, planning again changes
// nothing and preempts nothing.
func checkFixedPoint(in Input, res Result) error {
	next := cloneInput(in)
	var now int64 = 1
	for _, x := range in.Instances {
		now = max(now, x.Started+1)
	}
	next.Instances = applyPlan(in.Instances, res.Instances, now)
	again := Plan(next)
	if len(again.Preempt) > 0 {
		return fmt.Errorf("fixed point: replanning preempts %d (first %+v)", len(again.Preempt), again.Preempt[0])
	}
	if !reflect.DeepEqual(again.Instances, res.Instances) || (len(res.Preempt) == 0 && again.Hash != res.Hash) {
		return fmt.Errorf("fixed point: replanning changed the layout\nbefore: %safter:  %s", formatLayout(res.Instances), formatLayout(again.Instances))
	}
	return nil
}
