package smartshare

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cshare/cshare/internal/cputime"
)

// benchInput builds a farm of nSlots slots (machines of 64 slots) and nJobs
// jobs with mixed priorities, cpus, max_cpus and items, about half of the
// slots already running instances of them. With resources, a quarter of the
// machines declare cores, memory and GPUs, and some jobs need them.
func benchInput(nJobs, nSlots int, resources bool) Input {
	rng := rand.New(rand.NewPCG(uint64(nJobs), uint64(nSlots)))
	in := Input{Config: DefaultConfig()}
	const per = 64
	for i := 0; i*per < nSlots; i++ {
		m := Machine{ID: fmt.Sprintf("m%07d", i), Slots: min(per, nSlots-i*per)}
		if resources && i%4 == 0 {
			m.Cores, m.MemoryMB, m.GPUs = 64000, 262144, 8
		}
		in.Machines = append(in.Machines, m)
	}
	prios := []int{1, 5, 10, 50, 100, 9999, 9999, 9999}
	for i := 0; i < nJobs; i++ {
		j := Job{ID: fmt.Sprintf("job%07d", i), Priority: prios[rng.IntN(len(prios))], CPUs: 1 + rng.IntN(8),
			Submitted: int64(i), ItemsRemaining: 1 + rng.IntN(500)}
		switch rng.IntN(3) {
		case 0:
		case 1:
			j.MaxCPUs = MaxAny
		default:
			j.MaxCPUs = Max(j.CPUs + rng.IntN(40))
		}
		if resources && rng.IntN(10) == 0 {
			j.Cores, j.MemoryMB = int64(1000*(1+rng.IntN(4))), int64(1024*(1+rng.IntN(8)))
			if rng.IntN(2) == 0 {
				j.GPUs = 1
			}
		}
		in.Jobs = append(in.Jobs, j)
	}
	// Half the slots run instances: jobs in random order take a few slots
	// each, primaries first, in machine order.
	slot, m := 0, 0
	for _, ji := range rng.Perm(nJobs) {
		j := in.Jobs[ji]
		n := min(j.ItemsRemaining, 1+rng.IntN(j.CPUs+4))
		for k := 0; k < n && len(in.Instances) < nSlots/2; k++ {
			kind := KindSecondary
			if k < j.CPUs {
				kind = KindPrimary
			}
			in.Instances = append(in.Instances, Instance{Job: j.ID, Machine: in.Machines[m].ID, Slot: slot, Kind: kind,
				Started: int64(rng.IntN(1000))})
			slot += 2 // every other slot: running and free slots interleave
			if slot >= in.Machines[m].Slots {
				m, slot = m+1, 0
			}
		}
	}
	return in
}

// benchPlan also reports cpu-ns/op, the process's CPU time a plan (with
// the garbage collection it causes): on a shared, loaded machine wall time
// also measures the neighbours.
func benchPlan(b *testing.B, nJobs, nSlots int, resources bool) {
	in := benchInput(nJobs, nSlots, resources)
	b.ReportAllocs()
	b.ResetTimer()
	var res Result
	n := 0
	cpu := cputime.Now()
	for b.Loop() {
		res = Plan(in)
		n++
	}
	if c := cputime.Now() - cpu; c > 0 && n > 0 {
		b.ReportMetric(float64(c.Nanoseconds())/float64(n), "cpu-ns/op")
	}
	b.ReportMetric(float64(len(res.Instances)), "instances")
	b.ReportMetric(float64(len(res.Preempt)), "preemptions")
}

func BenchmarkPlan10kJobs100kSlots(b *testing.B)          { benchPlan(b, 10_000, 100_000, false) }
func BenchmarkPlan100kJobs1MSlots(b *testing.B)           { benchPlan(b, 100_000, 1_000_000, false) }
func BenchmarkPlanResources10kJobs100kSlots(b *testing.B) { benchPlan(b, 10_000, 100_000, true) }

// BenchmarkPlanSlots: fixed jobs, growing slots; the cost should grow about
// linearly in slots (no jobs x slots term).
func BenchmarkPlanSlots(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("jobs=10k/slots=%d", n), func(b *testing.B) { benchPlan(b, 10_000, n, false) })
	}
}

// BenchmarkPlanJobs: fixed slots, growing jobs.
func BenchmarkPlanJobs(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("jobs=%d/slots=100k", n), func(b *testing.B) { benchPlan(b, n, 100_000, false) })
	}
}
