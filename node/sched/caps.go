package sched

import (
	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/runtime"
	"github.com/cshare/cshare/smartshare"
)

// Machine limits that hold (docs/design.md §16): every run is capped,
// whether its job asked for cores and memory or not. A job's instance gets
// what the job asks for; one whose job asks for nothing gets its default,
// the machine's budget over its slots, so that the caps of all the
// instances the plan puts on the machine never add up to more than the
// budget: what jobs ask for counts against the same budget, and the
// default of those that ask for nothing is lowered to their equal share of
// what is left when the askers leave less (planCaps). The plan's caps fit;
// runs started under an earlier plan may hold more until their item ends,
// so a run starts only when its caps fit beside those of the runs going on
// (admit): then the sum holds at every moment, not only in the plan.

// caps are what one run may use: millicores and MB, 0 for no limit.
type caps struct {
	cores, memMB int64
}

// budget is what the org may use of this machine for jobs: the
// balancer's view of it (its cores and memory after running contracts,
// 0: not limited) and its slots.
type budget struct {
	cores, memMB int64
	slots        int
}

// need is what one planned instance's job asks for per instance.
type need struct {
	job          string
	cores, memMB int64
}

// planCaps returns the caps of one instance of each job among insts, the
// plan's instances on a machine with budget b. It is pure.
func planCaps(b budget, insts []need) map[string]caps {
	var askC, askM, restC, restM int64 // asked, and instances asking for nothing
	for _, n := range insts {
		if n.cores > 0 {
			askC += n.cores
		} else {
			restC++
		}
		if n.memMB > 0 {
			askM += n.memMB
		} else {
			restM++
		}
	}
	defC := defaultShare(b.cores, b.slots, askC, restC)
	defM := defaultShare(b.memMB, b.slots, askM, restM)
	out := make(map[string]caps, len(insts))
	for _, n := range insts {
		c := caps{cores: n.cores, memMB: n.memMB}
		if c.cores == 0 {
			c.cores = defC
		}
		if c.memMB == 0 {
			c.memMB = defM
		}
		out[n.job] = c
	}
	return out
}

// defaultShare is the default cap of one of rest instances that ask for
// nothing of a resource of which the machine offers total over slots and
// others ask for asked: total/slots, or less when asked leaves less than
// that for each; never 0 when total is limited (the runtime's floor
// applies). 0 when total is not limited.
func defaultShare(total int64, slots int, asked, rest int64) int64 {
	if total <= 0 || slots <= 0 {
		return 0
	}
	share := total / int64(slots)
	if rest > 0 {
		share = min(share, max(total-asked, 0)/rest)
	}
	return max(share, 1)
}

// fits reports whether c fits beside inUse within b.
func (b budget) fits(inUse []caps, c caps) bool {
	var sc, sm int64
	for _, u := range inUse {
		sc += u.cores
		sm += u.memMB
	}
	return (b.cores <= 0 || sc+c.cores <= b.cores) && (b.memMB <= 0 || sm+c.memMB <= b.memMB)
}

// budgetOf is this machine's budget in the balancer's input, ok false when
// the input lacks it (this machine has not been planned with yet).
func budgetOf(in smartshare.Input, me string) (budget, bool) {
	for _, m := range in.Machines {
		if m.ID == me {
			return budget{cores: m.Cores, memMB: m.MemoryMB, slots: m.Slots}, true
		}
	}
	return budget{}, false
}

// capsOf returns the caps of an instance of job j on machine me under
// the plan made from planIn.
func capsOf(planIn smartshare.Input, plan smartshare.Result, me string, j *ledger.Job) caps {
	b, ok := budgetOf(planIn, me)
	if !ok {
		return caps{cores: j.Spec.Cores, memMB: j.Spec.MemoryMB}
	}
	asks := map[string]need{}
	for _, sj := range planIn.Jobs {
		asks[sj.ID] = need{job: sj.ID, cores: sj.Cores, memMB: sj.MemoryMB}
	}
	asks[j.ID] = need{job: j.ID, cores: j.Spec.Cores, memMB: j.Spec.MemoryMB}
	var insts []need
	mine := false
	for _, pi := range plan.Instances {
		if pi.Machine == me {
			insts = append(insts, asks[pi.Job])
			mine = mine || pi.Job == j.ID
		}
	}
	if !mine {
		insts = append(insts, asks[j.ID])
	}
	return planCaps(b, insts)[j.ID]
}

// admit reserves c for in's next run if it fits beside the runs going on
// (see above); an adopted run is admitted whatever it holds (force).
// Reports whether it did.
func (s *Scheduler) admit(in *instance, c caps, force bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := budgetOf(s.planIn, s.d.Machine)
	if !force && ok {
		inUse := make([]caps, 0, len(s.inUse))
		for o, u := range s.inUse {
			if o != in {
				inUse = append(inUse, u)
			}
		}
		if !b.fits(inUse, c) {
			return false
		}
	}
	s.inUse[in] = c
	return true
}

// release frees what in's run held (admit).
func (s *Scheduler) release(in *instance) {
	s.mu.Lock()
	delete(s.inUse, in)
	s.mu.Unlock()
}

// applyCaps sets c on a run's spec: cores as NanoCPUs, memory as its hard
// limit, raised to the runtime's floors (a share below them is lifted to
// them).
func applyCaps(sp *runtime.Spec, c caps) {
	if c.cores > 0 {
		sp.NanoCPUs = max(c.cores*1_000_000, runtime.MinNanoCPUs)
	}
	if c.memMB > 0 {
		sp.MemoryBytes = max(c.memMB<<20, runtime.MinMemoryBytes)
	}
}

// capsFor is capsOf of this machine under the current plan.
func (s *Scheduler) capsFor(j *ledger.Job) caps {
	s.mu.Lock()
	defer s.mu.Unlock()
	return capsOf(s.planIn, s.plan, s.d.Machine, j)
}
