package smartshare

import (
	"cmp"
	"slices"
)

// Slot kinds in planner.slotKind.
const (
	kNone uint8 = iota
	kPrimary
	kSecondary
)

// Bits of planner.slotFlag.
const (
	fOrig      uint8 = 1 << iota // the slot still holds its kept running instance
	fPreempted                   // the kept running instance was taken out for another job
	fTier1                       // the running instance is one of its job's excess secondaries
)

// Preemption policies.
const (
	polAggressive = iota
	polPassive
	polDisabled
)

// jkey is a job's sort key in init.
type jkey struct {
	k   uint64
	sub int64
	idx int32
}

// jobState is one job, indexed by rank (priority order).
type jobState struct {
	in               int32 // index in Input.Jobs
	shape            int32 // index of the (cores, memory, gpus) need; 0 when unconstrained
	cores, mem, gpus int64
	disk             int64 // MB of disk per instance
	primWant         int   // min(cpus, items), clamped to the slot count
	secWant          int   // secondaries the job can use, clamped to the slot count
	wanted           int   // reported want (not clamped)
	ssOff            bool
	listOff, listLen int32 // its kept running instances: p.jobList[listOff:listOff+listLen]
	rp, rs           int   // kept running primaries, secondaries
	P, S             int   // target primaries, secondaries (maintained as the plan is built)
	idealP           int   // primaries in the count model
	t                int   // secondaries in the count model
	x                int   // excess running secondaries in the count model
}

// machState is one machine, indexed by its rank in ID order.
type machState struct {
	in                  int32 // index in Input.Machines
	off, slots          int32 // its slots are p.slot*[off:off+slots]
	capC, capM, capG    int64
	remC, remM, remG    int64
	capD, remD          int64 // disk
	primCnt             int32
	primC, primM, primG int64
	primD               int64
	freeCnt             int32 // free slots
	nextFree            int32 // no slot below off+nextFree is free
}

type planner struct {
	in       *Input
	policy   int
	modeNone bool
	defMax   int
	limit    int

	jobs  []jobState // by rank
	mach  []machState
	bf    []int32 // machine ranks in best-fit order
	bfPos []int32 // machine rank -> position in bf

	nSlots int
	// Per global slot (machine rank order, then slot index). Job references
	// are rank+1 (0: none); instance references are index+1.
	slotJob   []int32 // target occupant
	slotRun   []int32 // kept running occupant
	slotInst  []int32 // input instance of the kept running occupant
	slotMach  []int32 // machine rank; only when resources matter
	slotKind  []uint8
	slotFlag  []uint8
	freeTotal int
	jobList   []int32

	constrained bool
	nShapes     int
	shapeJob    []int32 // per shape, a job of that shape (rank)
	fcur        []int32 // free-fit cursor into bf, per shape
	vcur        []int32 // victim cursor into victims, per shape
	victims     []int32
	tier1Len    int
	tier2Built  bool
	forceRepair bool // tests: use the resource-aware path on unconstrained input

	rep *repairState
	tmp []int32
	sc  *scratch // working memory kept between calls (scratch.go)

	ids     []string     // job IDs by rank
	outInst []Instance   // Result.Instances, allocated early (see allocResult)
	outJobs []JobSummary // Result.Jobs
}

// allocResult allocates the Result's two large arrays before planning
// rather than after: the garbage collection their size starts then runs
// while the planner works in its own pointer-free arrays, and is mostly
// over when result fills them with strings, which it would otherwise do
// with every write going through the collector's write barrier. The
// instances are at most the slots, and at most what the jobs want.
func (p *planner) allocResult() {
	want := 0
	for r := range p.jobs {
		if want += p.jobs[r].primWant + p.jobs[r].secWant; want >= p.nSlots {
			want = p.nSlots
			break
		}
	}
	p.outInst = make([]Instance, min(want, p.nSlots))
	p.outJobs = make([]JobSummary, len(p.jobs))
}

// Plan computes the target layout of instances for in. It is a pure
// function: the same Input, with its slices in any order, gives the same
// Result. in must be valid (see Validate).
func Plan(in Input) Result {
	return planWith(&in, false)
}

func planWith(in *Input, forceRepair bool) Result {
	sc := scratchPool.Get().(*scratch)
	defer sc.release()
	p := &planner{in: in, forceRepair: forceRepair, sc: sc, tmp: sc.tmp[:0], victims: sc.victims[:0]}
	defer func() { sc.tmp, sc.victims = p.tmp, p.victims }()
	p.init()
	p.allocResult()
	p.keep()
	p.countModel()
	p.pickExcessVictims()
	p.placePrimaries()
	if p.constrained || p.forceRepair {
		p.repair()
	} else {
		p.placeSecondaries()
	}
	return p.result()
}

func (p *planner) init() {
	in := p.in
	c := in.Config
	p.modeNone = c.Mode == ModeNone
	switch c.PreemptPolicy {
	case PolicyPassive:
		p.policy = polPassive
	case PolicyDisabled:
		p.policy = polDisabled
	default:
		p.policy = polAggressive
	}
	p.defMax = c.DefaultMaxCPUs
	p.limit = max(c.MaxCPUsLimit, 0)

	// Machines in ID order (full-key ties keep invalid input deterministic).
	sc := p.sc
	mo := sized(sc.mo, len(in.Machines))
	sc.mo = mo
	for i := range mo {
		mo[i] = int32(i)
	}
	slices.SortFunc(mo, func(a, b int32) int {
		x, y := &in.Machines[a], &in.Machines[b]
		if c := cmp.Compare(x.ID, y.ID); c != 0 {
			return c
		}
		return cmpMachineRest(x, y)
	})
	p.mach = zeroed(sc.mach, len(mo))
	sc.mach = p.mach
	total := 0
	anyCoresCap, anyMemCap, anyDiskCap := false, false, false
	for r, i := range mo {
		m := &in.Machines[i]
		slots := clampInt(m.Slots, 0, MaxSlotsPerMachine)
		if total+slots > MaxTotalSlots {
			slots = 0
		}
		ms := &p.mach[r]
		ms.in = i
		ms.off = int32(total)
		ms.slots = int32(slots)
		ms.capC = clamp64(m.Cores, 0, MaxResource)
		ms.capM = clamp64(m.MemoryMB, 0, MaxResource)
		ms.capG = clamp64(int64(m.GPUs), 0, MaxGPUs)
		ms.remC, ms.remM, ms.remG = ms.capC, ms.capM, ms.capG
		ms.capD = clamp64(m.DiskMB, 0, MaxResource)
		ms.remD = ms.capD
		anyCoresCap = anyCoresCap || ms.capC > 0
		anyDiskCap = anyDiskCap || ms.capD > 0
		anyMemCap = anyMemCap || ms.capM > 0
		total += slots
	}
	p.nSlots = total

	// Best-fit order: smallest machines first, so that jobs without needs
	// leave GPUs and big machines to the jobs that need them.
	p.bf = sized(sc.bf, len(p.mach))
	sc.bf = p.bf
	for i := range p.bf {
		p.bf[i] = int32(i)
	}
	unl := func(v int64) int64 {
		if v == 0 {
			return MaxResource + 1
		}
		return v
	}
	slices.SortFunc(p.bf, func(a, b int32) int {
		x, y := &p.mach[a], &p.mach[b]
		if c := cmp.Compare(x.capG, y.capG); c != 0 {
			return c
		}
		if c := cmp.Compare(unl(x.capC), unl(y.capC)); c != 0 {
			return c
		}
		if c := cmp.Compare(unl(x.capM), unl(y.capM)); c != 0 {
			return c
		}
		if c := cmp.Compare(unl(x.capD), unl(y.capD)); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	p.bfPos = sized(sc.bfPos, len(p.mach))
	sc.bfPos = p.bfPos
	for i, m := range p.bf {
		p.bfPos[m] = int32(i)
	}

	// Jobs in rank order: priority, submission, ID (then the rest, so that
	// invalid duplicates still sort deterministically).
	// The key packs priority and submission time into one integer when the
	// submission times allow it (they span less than 2^49).
	keys := sized(sc.keys, len(in.Jobs))
	sc.keys = keys
	minSub, maxSub := int64(0), int64(0)
	for i := range in.Jobs {
		s := in.Jobs[i].Submitted
		if i == 0 || s < minSub {
			minSub = s
		}
		if i == 0 || s > maxSub {
			maxSub = s
		}
	}
	packed := len(in.Jobs) > 0 && uint64(maxSub)-uint64(minSub) < 1<<49
	for i := range in.Jobs {
		j := &in.Jobs[i]
		k := uint64(effPriority(j.Priority))
		if packed {
			k = k<<49 | (uint64(j.Submitted) - uint64(minSub))
		}
		keys[i] = jkey{k, j.Submitted, int32(i)}
	}
	cmpKeys := func(a, b jkey) int {
		if a.k != b.k {
			return cmp.Compare(a.k, b.k)
		}
		if a.sub != b.sub {
			return cmp.Compare(a.sub, b.sub)
		}
		x, y := &in.Jobs[a.idx], &in.Jobs[b.idx]
		if c := cmp.Compare(x.ID, y.ID); c != 0 {
			return c
		}
		return cmpJobRest(x, y)
	}
	if packed && len(keys) > 256 {
		// Radix sort on the packed key, then order runs of equal keys.
		tmp := sized(sc.keysTmp, len(keys))
		sc.keysTmp = tmp
		radixSort(keys, tmp, func(x *jkey) uint64 { return x.k })
		for i := 0; i < len(keys); {
			k := i + 1
			for k < len(keys) && keys[k].k == keys[i].k {
				k++
			}
			if k-i > 1 {
				slices.SortFunc(keys[i:k], cmpKeys)
			}
			i = k
		}
	} else {
		slices.SortFunc(keys, cmpKeys)
	}
	p.jobs = zeroed(sc.jobs, len(keys))
	sc.jobs = p.jobs
	// Job IDs by rank, for the result: read here, where each job is read
	// in rank order anyway (a second pass in that order costs a cache miss
	// a job at 100k jobs).
	p.ids = sized(sc.ids, len(keys))
	sc.ids = p.ids
	anyNeed := false
	for r, k := range keys {
		j := &in.Jobs[k.idx]
		js := &p.jobs[r]
		js.in = k.idx
		p.ids[r] = j.ID
		js.cores = clamp64(j.Cores, 0, MaxResource)
		js.mem = clamp64(j.MemoryMB, 0, MaxResource)
		js.gpus = clamp64(int64(j.GPUs), 0, MaxGPUs)
		js.disk = clamp64(j.DiskMB, 0, MaxResource)
		if js.gpus > 0 || (anyCoresCap && js.cores > 0) || (anyMemCap && js.mem > 0) || (anyDiskCap && js.disk > 0) {
			anyNeed = true
		}
		cpus := max(j.CPUs, 0)
		items := max(j.ItemsRemaining, 0)
		prim := min(cpus, items)
		effMax := p.effectiveMax(j.MaxCPUs)
		sec := 0
		if !p.modeNone && effMax > cpus {
			sec = min(effMax-cpus, items-prim)
		}
		js.ssOff = (p.modeNone || effMax == 0) && items > cpus
		js.wanted = prim + sec
		js.primWant = min(prim, total)
		js.secWant = min(sec, total)
	}
	p.constrained = anyNeed
	p.nShapes = 1
	if p.constrained {
		type shapeKey struct{ c, m, g, d int64 }
		shapes := make(map[shapeKey]int32)
		for r := range p.jobs {
			js := &p.jobs[r]
			k := shapeKey{js.cores, js.mem, js.gpus, js.disk}
			s, ok := shapes[k]
			if !ok {
				s = int32(len(shapes))
				shapes[k] = s
				p.shapeJob = append(p.shapeJob, int32(r))
			}
			js.shape = s
		}
		p.nShapes = len(shapes)
	} else {
		// Needs that no machine constrains are irrelevant.
		for r := range p.jobs {
			js := &p.jobs[r]
			js.cores, js.mem, js.gpus, js.disk = 0, 0, 0, 0
		}
	}
	if p.shapeJob == nil {
		p.shapeJob = []int32{0}
	}
	p.fcur = make([]int32, p.nShapes)
	p.vcur = make([]int32, p.nShapes)
}
