package smartshare

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"
)

// genInput draws a small valid Input: few machines, slots and jobs, so that
// ties, full farms, caps and (when constrained) resource limits are all
// common. Running instances are drawn at random (they need not come from a
// previous plan): unknown jobs, wrong kinds, over-allocations included.
func genInput(constrained bool) *rapid.Generator[Input] { return genSized(constrained, 5, 7, 6) }

// genSized draws up to maxM machines of up to maxS slots and up to maxJ jobs.
func genSized(constrained bool, maxM, maxS, maxJ int) *rapid.Generator[Input] {
	return rapid.Custom(func(t *rapid.T) Input {
		in := Input{Config: Config{
			Mode:           rapid.SampledFrom([]string{ModeJobs, ModeJobs, ModeJobs, ModeNone}).Draw(t, "mode"),
			PreemptPolicy:  rapid.SampledFrom([]string{PolicyAggressive, PolicyPassive, PolicyDisabled}).Draw(t, "policy"),
			DefaultMaxCPUs: rapid.IntRange(-2, 10).Draw(t, "default_max"),
			MaxCPUsLimit:   rapid.IntRange(0, 14).Draw(t, "limit"),
		}}
		nm := rapid.IntRange(0, maxM).Draw(t, "machines")
		for i := 0; i < nm; i++ {
			m := Machine{ID: fmt.Sprintf("m%d", i), Slots: rapid.IntRange(0, maxS).Draw(t, "slots")}
			if constrained {
				m.Cores = rapid.SampledFrom([]int64{0, 1000, 2000, 4000, 8000}).Draw(t, "m.cores")
				m.MemoryMB = rapid.SampledFrom([]int64{0, 0, 1024, 4096}).Draw(t, "m.mem")
				m.GPUs = rapid.SampledFrom([]int{0, 0, 1, 2, 4}).Draw(t, "m.gpus")
				m.DiskMB = rapid.SampledFrom([]int64{0, 0, 0, 1024, 4096}).Draw(t, "m.disk")
			}
			in.Machines = append(in.Machines, m)
		}
		nj := rapid.IntRange(0, maxJ).Draw(t, "jobs")
		for i := 0; i < nj; i++ {
			j := Job{
				ID:             fmt.Sprintf("j%d", i),
				Priority:       rapid.IntRange(1, 3).Draw(t, "prio"),
				CPUs:           rapid.IntRange(0, 4).Draw(t, "cpus"),
				Submitted:      int64(rapid.IntRange(0, 3).Draw(t, "submitted")),
				ItemsRemaining: rapid.IntRange(0, 2*maxS+2).Draw(t, "items"),
			}
			switch rapid.IntRange(0, 3).Draw(t, "maxkind") {
			case 0: // unset
			case 1:
				j.MaxCPUs = MaxAny
			default:
				j.MaxCPUs = Max(rapid.IntRange(0, 2*maxS+2).Draw(t, "max"))
			}
			if constrained {
				j.Cores = rapid.SampledFrom([]int64{0, 0, 500, 1000, 3000}).Draw(t, "j.cores")
				j.MemoryMB = rapid.SampledFrom([]int64{0, 0, 512, 2048}).Draw(t, "j.mem")
				j.GPUs = rapid.SampledFrom([]int{0, 0, 0, 1, 2}).Draw(t, "j.gpus")
				j.DiskMB = rapid.SampledFrom([]int64{0, 0, 0, 512, 2048}).Draw(t, "j.disk")
			}
			in.Jobs = append(in.Jobs, j)
		}
		for _, m := range in.Machines {
			for s := 0; s < m.Slots; s++ {
				if !rapid.Bool().Draw(t, "running") {
					continue
				}
				job := "gone"
				if nj > 0 && rapid.IntRange(0, 5).Draw(t, "known") > 0 {
					job = fmt.Sprintf("j%d", rapid.IntRange(0, nj-1).Draw(t, "job"))
				}
				in.Instances = append(in.Instances, Instance{Job: job, Machine: m.ID, Slot: s,
					Kind:    rapid.SampledFrom([]string{KindPrimary, KindSecondary}).Draw(t, "kind"),
					Started: int64(rapid.IntRange(0, 4).Draw(t, "started"))})
			}
		}
		if err := in.Validate(); err != nil {
			t.Fatalf("generator made invalid input: %v", err)
		}
		return in
	})
}

// genSettled draws an input and replaces its running instances by the plan
// for it, as a mesh in steady state would have; then it changes the input
// a little (a job leaves or changes, jobs arrive, a machine grows), which is
// how the balancer is used, and which is where preemptions happen.
func genSettled(constrained bool) *rapid.Generator[Input] { return genChanged(constrained, false) }

// genBusy is genSettled on a farm that its jobs fill, so that every change
// needs preemption.
func genBusy(constrained bool) *rapid.Generator[Input] { return genChanged(constrained, true) }

func genChanged(constrained, busy bool) *rapid.Generator[Input] {
	return rapid.Custom(func(t *rapid.T) Input {
		in := rapid.OneOf(genInput(constrained), genSized(constrained, 10, 24, 14)).Draw(t, "input")
		in.Config.MaxCPUsLimit = rapid.IntRange(0, 40).Draw(t, "limit0")
		if busy {
			in.Config.Mode = ModeJobs
			in.Config.MaxCPUsLimit = 100
			for i := range in.Jobs {
				in.Jobs[i].ItemsRemaining = totalSlots(in) + 2
				in.Jobs[i].MaxCPUs = MaxAny
			}
		}
		res := Plan(in)
		in.Instances = applyPlan(in.Instances, res.Instances, 10)
		in.Config.PreemptPolicy = rapid.SampledFrom([]string{PolicyAggressive, PolicyPassive, PolicyDisabled}).Draw(t, "policy2")
		slots := totalSlots(in)
		if len(in.Jobs) > 0 {
			i := rapid.IntRange(0, len(in.Jobs)-1).Draw(t, "changed")
			switch rapid.IntRange(0, 4).Draw(t, "change") {
			case 0:
				in.Jobs = append(in.Jobs[:i:i], in.Jobs[i+1:]...)
			case 1:
				in.Jobs[i].ItemsRemaining = rapid.IntRange(0, slots+2).Draw(t, "items2")
			case 2:
				in.Jobs[i].MaxCPUs = Max(rapid.IntRange(0, slots+2).Draw(t, "max2"))
			case 3:
				in.Jobs[i].CPUs = rapid.IntRange(0, 5).Draw(t, "cpus2")
			case 4:
				in.Jobs[i].Priority = rapid.IntRange(1, 3).Draw(t, "prio2")
			}
		}
		for k := rapid.IntRange(0, 3).Draw(t, "arrivals"); k > 0; k-- {
			j := Job{ID: fmt.Sprintf("new%d", k), Priority: rapid.IntRange(1, 3).Draw(t, "newprio"),
				CPUs: rapid.IntRange(0, 5).Draw(t, "newcpus"), MaxCPUs: MaxAny, Submitted: 5,
				ItemsRemaining: rapid.IntRange(0, slots+2).Draw(t, "newitems")}
			if constrained {
				j.Cores = rapid.SampledFrom([]int64{0, 0, 500, 1000, 3000}).Draw(t, "new.cores")
				j.GPUs = rapid.SampledFrom([]int{0, 0, 0, 1}).Draw(t, "new.gpus")
			}
			in.Jobs = append(in.Jobs, j)
		}
		if len(in.Machines) > 0 && rapid.Bool().Draw(t, "grow") {
			in.Machines[rapid.IntRange(0, len(in.Machines)-1).Draw(t, "grown")].Slots++
		}
		return in
	})
}

// propInputs draws from all the generators: small and medium farms, random
// or settled running instances, with and without machine resources.
func propInputs() *rapid.Generator[Input] {
	return rapid.OneOf(genInput(false), genInput(true), genSettled(false), genSettled(true),
		genSized(false, 10, 24, 14), genSized(true, 10, 24, 14), genBusy(false), genBusy(true))
}

func checkProp(t *testing.T, gen *rapid.Generator[Input], check func(*view) error) {
	rapid.Check(t, func(t *rapid.T) {
		in := gen.Draw(t, "in")
		res := Plan(in)
		if err := check(newView(in, res)); err != nil {
			t.Fatalf("%v\ninput: %+v\nlayout:\n%s", err, in, formatLayout(res.Instances))
		}
	})
}

func TestPropCapacity(t *testing.T)     { checkProp(t, propInputs(), checkCapacity) }
func TestPropPrimaryFloor(t *testing.T) { checkProp(t, propInputs(), checkPrimaryFloor) }
func TestPropCaps(t *testing.T)         { checkProp(t, propInputs(), checkCaps) }
func TestPropBalance(t *testing.T)      { checkProp(t, propInputs(), checkBalance) }
func TestPropNoIdle(t *testing.T)       { checkProp(t, propInputs(), checkNoIdle) }
func TestPropModes(t *testing.T)        { checkProp(t, propInputs(), checkModes) }
func TestPropSummary(t *testing.T)      { checkProp(t, propInputs(), checkSummary) }

// Victim order is checked where no machine resources apply (with them a
// victim is chosen by where the preemptor fits, not by age alone).
func TestPropVictimOrder(t *testing.T) {
	checkProp(t, rapid.OneOf(genInput(false), genSettled(false), genSized(false, 10, 24, 14), genBusy(false)), checkVictimOrder)
}

func TestPropDeterminism(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := propInputs().Draw(t, "in")
		res := Plan(in)
		if err := checkShuffled(in, res, 4); err != nil {
			t.Fatal(err)
		}
		if again := Plan(in); again.Hash != res.Hash {
			t.Fatalf("same input, hash %s then %s", res.Hash, again.Hash)
		}
	})
}

func TestPropFixedPoint(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := propInputs().Draw(t, "in")
		res := Plan(in)
		if err := checkFixedPoint(in, res); err != nil {
			t.Fatalf("%v\ninput: %+v", err, in)
		}
	})
}

// TestPropMonotone: one more slot (on an existing machine or a new one)
// never lowers any job's number of instances. This holds without machine
// resources; with them it does not in general: the extra slot can change
// which machine a job's instance lands on and so what is left for others
// (TestMonotoneFailsWithResources shows a case).
func TestPropMonotone(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := rapid.OneOf(genInput(false), genSettled(false), genSized(false, 10, 24, 14), genBusy(false)).Draw(t, "in")
		res := Plan(in)
		more := cloneInput(in)
		if len(more.Machines) == 0 || rapid.Bool().Draw(t, "newMachine") {
			more.Machines = append(more.Machines, Machine{ID: "extra", Slots: 1})
		} else {
			i := rapid.IntRange(0, len(more.Machines)-1).Draw(t, "grown")
			more.Machines[i].Slots++
		}
		res2 := Plan(more)
		before := map[string]int{}
		for _, j := range res.Jobs {
			before[j.ID] = j.Primaries + j.Secondaries
		}
		for _, j := range res2.Jobs {
			if got := j.Primaries + j.Secondaries; got < before[j.ID] {
				t.Fatalf("job %s: %d instances with one more slot, %d before", j.ID, got, before[j.ID])
			}
		}
	})
}

// TestPropRepairMatchesCountModel: without machine resources, the
// one-at-a-time repair phase (used when resources matter) gives every job
// the same numbers of primaries and secondaries as the count model.
func TestPropRepairMatchesCountModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := rapid.OneOf(genInput(false), genSettled(false), genSized(false, 10, 24, 14), genBusy(false)).Draw(t, "in")
		a := Plan(in)
		b := planWith(&in, true)
		if err := checkAll(in, b); err != nil {
			t.Fatalf("repair path: %v", err)
		}
		for i := range a.Jobs {
			x, y := a.Jobs[i], b.Jobs[i]
			if x.Primaries != y.Primaries || x.Secondaries != y.Secondaries || x.Preempted != y.Preempted {
				t.Fatalf("count model %+v, repair %+v", x, y)
			}
		}
	})
}
