package smartshare

import (
	"cmp"
	"slices"
	"unsafe"
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

// jobState is one job, indexed by rank (priority order).
type jobState struct {
	in               int32 // index in Input.Jobs
	shape            int32 // index of the (cores, memory, gpus) need; 0 when unconstrained
	cores, mem, gpus int64
	primWant         int // min(cpus, items), clamped to the slot count
	secWant          int // secondaries the job can use, clamped to the slot count
	wanted           int // reported want (not clamped)
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
	primCnt             int32
	primC, primM, primG int64
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
}

// Plan computes the target layout of instances for in. It is a pure
// function: the same Input, with its slices in any order, gives the same
// Result. in must be valid (see Validate).
func Plan(in Input) Result {
	return planWith(&in, false)
}

func planWith(in *Input, forceRepair bool) Result {
	p := &planner{in: in, forceRepair: forceRepair}
	p.init()
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
	mo := make([]int32, len(in.Machines))
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
	p.mach = make([]machState, len(mo))
	total := 0
	anyCoresCap, anyMemCap := false, false
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
		anyCoresCap = anyCoresCap || ms.capC > 0
		anyMemCap = anyMemCap || ms.capM > 0
		total += slots
	}
	p.nSlots = total

	// Best-fit order: smallest machines first, so that jobs without needs
	// leave GPUs and big machines to the jobs that need them.
	p.bf = make([]int32, len(p.mach))
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
		return cmp.Compare(a, b)
	})
	p.bfPos = make([]int32, len(p.mach))
	for i, m := range p.bf {
		p.bfPos[m] = int32(i)
	}

	// Jobs in rank order: priority, submission, ID (then the rest, so that
	// invalid duplicates still sort deterministically).
	// The key packs priority and submission time into one integer when the
	// submission times allow it (they span less than 2^49).
	type jkey struct {
		k   uint64
		sub int64
		idx int32
	}
	keys := make([]jkey, len(in.Jobs))
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
		tmp := make([]jkey, len(keys))
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
	p.jobs = make([]jobState, len(keys))
	anyNeed := false
	for r, k := range keys {
		j := &in.Jobs[k.idx]
		js := &p.jobs[r]
		js.in = k.idx
		js.cores = clamp64(j.Cores, 0, MaxResource)
		js.mem = clamp64(j.MemoryMB, 0, MaxResource)
		js.gpus = clamp64(int64(j.GPUs), 0, MaxGPUs)
		if js.gpus > 0 || (anyCoresCap && js.cores > 0) || (anyMemCap && js.mem > 0) {
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
		type shapeKey struct{ c, m, g int64 }
		shapes := make(map[shapeKey]int32)
		for r := range p.jobs {
			js := &p.jobs[r]
			k := shapeKey{js.cores, js.mem, js.gpus}
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
			js.cores, js.mem, js.gpus = 0, 0, 0
		}
	}
	if p.shapeJob == nil {
		p.shapeJob = []int32{0}
	}
	p.fcur = make([]int32, p.nShapes)
	p.vcur = make([]int32, p.nShapes)
}

// radixSort sorts s by key (LSD, 11 bits a pass, skipping passes where all
// keys share the digit); tmp is scratch of the same length.
func radixSort[T any](s, tmp []T, key func(*T) uint64) {
	const bits = 11
	var or, and uint64 = 0, ^uint64(0)
	for i := range s {
		k := key(&s[i])
		or |= k
		and &= k
	}
	var count [1 << bits]int
	for shift := uint(0); shift < 64; shift += bits {
		if (or^and)>>shift&(1<<bits-1) == 0 {
			continue // every key has the same digit here
		}
		clear(count[:])
		for i := range s {
			count[key(&s[i])>>shift&(1<<bits-1)]++
		}
		sum := 0
		for d := range count {
			sum, count[d] = sum+count[d], sum
		}
		for i := range s {
			d := key(&s[i]) >> shift & (1<<bits - 1)
			tmp[count[d]] = s[i]
			count[d]++
		}
		copy(s, tmp)
	}
}

// sameString reports whether a and b are the same string in memory: a cheap
// test that, when false, says nothing (the caller looks the string up).
func sameString(a, b string) bool {
	return len(a) == len(b) && unsafe.StringData(a) == unsafe.StringData(b)
}

func effPriority(p int) int {
	if p <= 0 {
		return DefaultPriority
	}
	return p
}

// effectiveMax is a job's max_cpus after the default and the limit.
func (p *planner) effectiveMax(m MaxCPUs) int {
	v := p.defMax
	if m.Set {
		v = m.N
	}
	if v < 0 || v > p.limit {
		v = p.limit
	}
	return v
}

func cmpMachineRest(x, y *Machine) int {
	return cmp.Or(cmp.Compare(x.Slots, y.Slots), cmp.Compare(x.Cores, y.Cores),
		cmp.Compare(x.MemoryMB, y.MemoryMB), cmp.Compare(x.GPUs, y.GPUs))
}

func cmpJobRest(x, y *Job) int {
	return cmp.Or(cmp.Compare(x.CPUs, y.CPUs), cmp.Compare(x.MaxCPUs.N, y.MaxCPUs.N),
		cmpBool(x.MaxCPUs.Set, y.MaxCPUs.Set), cmp.Compare(x.ItemsRemaining, y.ItemsRemaining),
		cmp.Compare(x.Cores, y.Cores), cmp.Compare(x.MemoryMB, y.MemoryMB), cmp.Compare(x.GPUs, y.GPUs))
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

func clampInt(v, lo, hi int) int { return min(max(v, lo), hi) }

func clamp64(v, lo, hi int64) int64 { return min(max(v, lo), hi) }

// started is the start time of the kept running instance in slot g.
func (p *planner) started(g int32) int64 {
	if i := p.slotInst[g]; i != 0 {
		return p.in.Instances[i-1].Started
	}
	return 0
}

// keep decides which running instances stay: those of known jobs, at most
// what each job wants (oldest first, primaries before secondaries), within
// the machine's capacity; it labels each job's first min(kept, cpus) as
// primaries.
func (p *planner) keep() {
	in := p.in
	S := p.nSlots
	// One allocation for the int32 per-slot arrays.
	buf := make([]int32, 3*S)
	p.slotJob, p.slotRun, p.slotInst = buf[:S:S], buf[S:2*S:2*S], buf[2*S:]
	bb := make([]uint8, 2*S)
	p.slotKind, p.slotFlag = bb[:S:S], bb[S:]
	if p.constrained || p.forceRepair {
		p.slotMach = make([]int32, S)
		for r := range p.mach {
			m := &p.mach[r]
			for g := m.off; g < m.off+m.slots; g++ {
				p.slotMach[g] = int32(r)
			}
		}
	}
	if len(in.Instances) == 0 {
		p.finishKeep()
		return
	}

	// Indexes over input positions (built in input order, which is cheap to
	// walk); the first in rank order wins for repeated IDs.
	mRank := make([]int32, len(in.Machines))
	for r := range p.mach {
		mRank[p.mach[r].in] = int32(r)
	}
	jRank := make([]int32, len(in.Jobs))
	for r := range p.jobs {
		jRank[p.jobs[r].in] = int32(r)
	}
	mIdx := newIDIndex(len(in.Machines), func(i int32) string { return in.Machines[i].ID }, func(i int32) int32 { return mRank[i] })
	jIdx := newIDIndex(len(in.Jobs), func(i int32) string { return in.Jobs[i].ID }, func(i int32) int32 { return jRank[i] })

	// Place every running instance of a known job in its slot (slotRun is
	// the candidate here; conflicts on a slot, only possible in invalid
	// input, are settled by content).
	lastM, lastR := "", int32(-1)
	lastJ, lastJR := "", int32(-1)
	for i := range in.Instances {
		x := &in.Instances[i]
		mr := lastR
		if !sameString(x.Machine, lastM) || mr < 0 {
			v := mIdx.get(x.Machine)
			if v < 0 {
				continue
			}
			v = mRank[v]
			lastM, lastR, mr = x.Machine, v, v
		}
		m := &p.mach[mr]
		if x.Slot < 0 || x.Slot >= int(m.slots) {
			continue
		}
		jr := lastJR
		if !sameString(x.Job, lastJ) || jr < 0 {
			v := jIdx.get(x.Job)
			if v < 0 {
				continue
			}
			v = jRank[v]
			lastJ, lastJR, jr = x.Job, v, v
		}
		kind := kSecondary
		if x.Kind == KindPrimary {
			kind = kPrimary
		}
		g := m.off + int32(x.Slot)
		if cur := p.slotRun[g]; cur != 0 {
			y := &in.Instances[p.slotInst[g]-1]
			if c := cmp.Or(cmp.Compare(jr, cur-1), cmp.Compare(kind, p.slotKind[g]), cmp.Compare(x.Started, y.Started)); c >= 0 {
				continue
			}
		}
		p.slotRun[g] = jr + 1
		p.slotInst[g] = int32(i + 1)
		p.slotKind[g] = kind
	}

	// Bucket the slots by job (counting sort; slots ascend within a job).
	cnt := make([]int32, len(p.jobs)+1)
	for g := 0; g < S; g++ {
		if r := p.slotRun[g]; r != 0 {
			cnt[r]++
		}
	}
	var off int32
	for r := range p.jobs {
		p.jobs[r].listOff = off
		off += cnt[r+1]
		cnt[r+1] = p.jobs[r].listOff
	}
	p.jobList = make([]int32, off)
	for g := 0; g < S; g++ {
		if r := p.slotRun[g]; r != 0 {
			p.jobList[cnt[r]] = int32(g)
			cnt[r]++
		}
	}
	for r := range p.jobs {
		j := &p.jobs[r]
		j.listLen = cnt[r+1] - j.listOff
		if j.listLen == 0 {
			continue
		}
		list := p.jobList[j.listOff : j.listOff+j.listLen]
		n := len(list)
		keepN := min(n, j.primWant+j.secWant)
		primN := min(keepN, j.primWant)
		nPrim := 0
		for _, g := range list {
			if p.slotKind[g] == kPrimary {
				nPrim++
			}
		}
		if n > keepN || nPrim != primN {
			p.sortKeepOrder(list)
			for k, g := range list {
				switch {
				case k < primN:
					p.slotKind[g] = kPrimary
				case k < keepN:
					p.slotKind[g] = kSecondary
				default: // released: the job no longer wants it
					p.slotRun[g], p.slotInst[g], p.slotKind[g] = 0, 0, kNone
				}
			}
			j.listLen = int32(keepN)
		}
		j.P, j.S = primN, keepN-primN
	}
	for g := int32(0); g < int32(S); g++ {
		if r := p.slotRun[g]; r != 0 {
			p.slotJob[g] = r
			p.slotFlag[g] = fOrig
			if p.constrained {
				p.accountMachine(g, &p.jobs[r-1], p.slotKind[g], 1)
			}
		}
	}
	if p.constrained {
		p.enforceCapacity()
	}
	p.finishKeep()
}

// sortKeepOrder sorts running instances of one job by how much the job
// keeps them: primaries first, then oldest, then by slot.
func (p *planner) sortKeepOrder(list []int32) {
	slices.SortFunc(list, func(a, b int32) int {
		return cmp.Or(cmp.Compare(p.slotKind[a], p.slotKind[b]), cmp.Compare(p.started(a), p.started(b)), cmp.Compare(a, b))
	})
}

// account adds (d=1) or removes (d=-1) the occupant of slot g to its
// machine's and job's counters.
func (p *planner) account(g, r int32, kind uint8, d int) {
	j := &p.jobs[r]
	if kind == kPrimary {
		j.P += d
	} else {
		j.S += d
	}
	if p.constrained {
		p.accountMachine(g, j, kind, d)
	}
}

// accountMachine tracks machine resources (only needed, and only kept,
// when resources constrain placement).
func (p *planner) accountMachine(g int32, j *jobState, kind uint8, d int) {
	m := &p.mach[p.slotMach[g]]
	d64 := int64(d)
	m.remC -= d64 * j.cores
	m.remM -= d64 * j.mem
	m.remG -= d64 * j.gpus
	if kind == kPrimary {
		m.primCnt += int32(d)
		m.primC += d64 * j.cores
		m.primM += d64 * j.mem
		m.primG += d64 * j.gpus
	}
}

// enforceCapacity drops kept instances from machines whose capacity they
// exceed (the machine shrank or the job's needs grew): primaries and
// higher-priority jobs stay first.
func (p *planner) enforceCapacity() {
	var dirty []int32
	for r := range p.mach {
		m := &p.mach[r]
		if (m.capC == 0 || m.remC >= 0) && (m.capM == 0 || m.remM >= 0) && m.remG >= 0 {
			continue
		}
		var list []int32
		for g := m.off; g < m.off+m.slots; g++ {
			if p.slotJob[g] != 0 {
				list = append(list, g)
				p.account(g, p.slotJob[g]-1, p.slotKind[g], -1)
			}
		}
		slices.SortFunc(list, func(a, b int32) int {
			return cmp.Or(cmp.Compare(p.slotKind[a], p.slotKind[b]), cmp.Compare(p.slotJob[a], p.slotJob[b]),
				cmp.Compare(p.started(a), p.started(b)), cmp.Compare(a, b))
		})
		for _, g := range list {
			jr := p.slotJob[g] - 1
			if p.fits(&p.jobs[jr], m, 0, 0, 0) {
				p.account(g, jr, p.slotKind[g], 1)
				continue
			}
			p.slotJob[g], p.slotRun[g], p.slotInst[g], p.slotKind[g], p.slotFlag[g] = 0, 0, 0, kNone, 0
			dirty = append(dirty, jr)
		}
	}
	slices.Sort(dirty)
	dirty = slices.Compact(dirty)
	for _, r := range dirty {
		j := &p.jobs[r]
		list := p.jobList[j.listOff : j.listOff+j.listLen]
		n := 0
		for _, g := range list {
			if p.slotRun[g] == r+1 {
				list[n] = g
				n++
			}
		}
		list = list[:n]
		j.listLen = int32(n)
		if j.P < j.primWant && j.S > 0 {
			// Promote the oldest secondaries to fill the primary floor.
			p.sortKeepOrder(list)
			for k, g := range list {
				want := kSecondary
				if k < j.primWant {
					want = kPrimary
				}
				if p.slotKind[g] != want {
					p.account(g, r, p.slotKind[g], -1)
					p.slotKind[g] = want
					p.account(g, r, want, 1)
				}
			}
		}
	}
}

func (p *planner) finishKeep() {
	for r := range p.jobs {
		j := &p.jobs[r]
		j.rp, j.rs = j.P, j.S
	}
	for r := range p.mach {
		m := &p.mach[r]
		for g := m.off; g < m.off+m.slots; g++ {
			if p.slotJob[g] == 0 {
				m.freeCnt++
			}
		}
		p.freeTotal += int(m.freeCnt)
	}
}

// fitsCap: with capacity cap (0: unconstrained) and remaining rem, is there
// room for need?
func fitsCap(rem, cap, need int64) bool { return need == 0 || cap == 0 || rem >= need }

// fits reports whether one instance of j fits machine m's remaining
// capacity plus (c, mem, gp) (resources a victim would give back). Slots
// are not checked.
func (p *planner) fits(j *jobState, m *machState, c, mem, gp int64) bool {
	if j.gpus > 0 && m.remG+gp < j.gpus {
		return false
	}
	return fitsCap(m.remC+c, m.capC, j.cores) && fitsCap(m.remM+mem, m.capM, j.mem)
}

// pcFits reports whether one more primary of j could ever fit m, counting
// only the primaries on it (every secondary can be preempted).
func (p *planner) pcFits(j *jobState, m *machState) bool {
	if m.slots-m.primCnt < 1 {
		return false
	}
	if j.gpus > 0 && m.capG-m.primG < j.gpus {
		return false
	}
	return fitsCap(m.capC-m.primC, m.capC, j.cores) && fitsCap(m.capM-m.primM, m.capM, j.mem)
}

// countModel computes, ignoring machine resources, how many primaries and
// secondaries each job gets: primaries in rank order, then the surplus
// water-filled over secondaries (see waterfill). The excess x of a job is
// how many of its running secondaries it must give up.
func (p *planner) countModel() {
	sumRp, sumRs := 0, 0
	for r := range p.jobs {
		sumRp += p.jobs[r].rp
		sumRs += p.jobs[r].rs
	}
	avail := p.nSlots - sumRp
	if p.policy == polDisabled {
		avail = p.freeTotal
	}
	taken, sumP := 0, 0
	for r := range p.jobs {
		j := &p.jobs[r]
		take := min(j.primWant-j.rp, avail)
		take = max(take, 0)
		avail -= take
		taken += take
		j.idealP = j.rp + take
		sumP += j.idealP
	}
	surplus := p.nSlots - sumP
	if p.policy == polDisabled {
		surplus = p.freeTotal - taken + sumRs
	}
	p.waterfill(surplus)
	for r := range p.jobs {
		j := &p.jobs[r]
		j.x = max(j.rs-j.t, 0)
	}
}

// secCap is the most secondaries j can have in the count model.
func (p *planner) secCap(j *jobState) int {
	if j.idealP < j.primWant {
		return 0
	}
	return j.secWant
}

// waterfill sets each job's t: the largest level L such that giving every
// job min(cap, L) secondaries (but never fewer than it runs, when
// preemption is disabled) fits in surplus; the r slots left over go one
// each to jobs below their cap, first to those already running L+1 (so
// that an imbalance of one never causes a preemption), then by rank.
func (p *planner) waterfill(surplus int) {
	disabled := p.policy == polDisabled
	idx := p.tmp[:0]
	maxC := 0
	for r := range p.jobs {
		j := &p.jobs[r]
		j.t = 0
		if c := p.secCap(j); c > 0 {
			idx = append(idx, int32(r))
			maxC = max(maxC, c)
		}
	}
	p.tmp = idx
	floor := func(j *jobState) int {
		if disabled {
			return j.rs
		}
		return 0
	}
	sumAt := func(L int) int {
		s := 0
		for _, r := range idx {
			j := &p.jobs[r]
			s += max(floor(j), min(p.secCap(j), L))
		}
		return s
	}
	if sumAt(maxC) <= surplus {
		for _, r := range idx {
			j := &p.jobs[r]
			j.t = p.secCap(j)
		}
		return
	}
	lo, hi := 0, maxC // sumAt(lo) <= surplus < sumAt(hi)
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if sumAt(mid) <= surplus {
			lo = mid
		} else {
			hi = mid
		}
	}
	L := lo
	left := surplus - sumAt(L)
	for _, r := range idx {
		j := &p.jobs[r]
		j.t = max(floor(j), min(p.secCap(j), L))
	}
	eligible := func(j *jobState) bool { return floor(j) <= L && p.secCap(j) > L && j.t == L }
	for _, r := range idx {
		if left == 0 {
			break
		}
		if j := &p.jobs[r]; eligible(j) && j.rs >= L+1 {
			j.t++
			left--
		}
	}
	for _, r := range idx {
		if left == 0 {
			break
		}
		if j := &p.jobs[r]; eligible(j) {
			j.t++
			left--
		}
	}
}

// pickExcessVictims lists every job's excess secondaries, lowest-priority
// job first, most recently started first within a job.
func (p *planner) pickExcessVictims() {
	for r := len(p.jobs) - 1; r >= 0; r-- {
		j := &p.jobs[r]
		if j.x == 0 {
			continue
		}
		secs := p.tmp[:0]
		for _, g := range p.jobList[j.listOff : j.listOff+j.listLen] {
			if p.slotKind[g] == kSecondary {
				secs = append(secs, g)
			}
		}
		p.sortRecentFirst(secs)
		for _, g := range secs[:min(j.x, len(secs))] {
			p.slotFlag[g] |= fTier1
			p.victims = append(p.victims, g)
		}
		p.tmp = secs
	}
	p.tier1Len = len(p.victims)
}

// sortRecentFirst orders slots of one job by victim order: most recently
// started first, then machine and slot descending.
func (p *planner) sortRecentFirst(s []int32) {
	slices.SortFunc(s, func(a, b int32) int {
		return cmp.Or(cmp.Compare(p.started(b), p.started(a)), cmp.Compare(b, a))
	})
}

// buildTier2 appends every other running secondary to the victim list, in
// victim order: lowest-priority job first, then most recently started.
func (p *planner) buildTier2() {
	p.tier2Built = true
	start := len(p.victims)
	for g := int32(0); g < int32(p.nSlots); g++ {
		if p.slotFlag[g]&(fOrig|fTier1) == fOrig && p.slotKind[g] == kSecondary {
			p.victims = append(p.victims, g)
		}
	}
	t2 := p.victims[start:]
	slices.SortFunc(t2, func(a, b int32) int {
		return cmp.Or(cmp.Compare(p.slotJob[b], p.slotJob[a]), cmp.Compare(p.started(b), p.started(a)), cmp.Compare(b, a))
	})
}

// isVictim: slot g still holds its running secondary.
func (p *planner) isVictim(g int32) bool {
	return p.slotFlag[g]&fOrig != 0 && p.slotKind[g] == kSecondary
}

func (p *planner) occupy(g, r int32, kind uint8) {
	p.slotJob[g] = r + 1
	p.slotKind[g] = kind
	p.account(g, r, kind, 1)
	if p.rep != nil && kind == kSecondary {
		p.rep.added(p, g, r)
	}
}

// vacate empties slot g; a running instance taken out this way is a
// preemption.
func (p *planner) vacate(g int32) {
	r := p.slotJob[g] - 1
	kind := p.slotKind[g]
	p.account(g, r, kind, -1)
	if p.slotFlag[g]&fOrig != 0 {
		p.slotFlag[g] = p.slotFlag[g]&^fOrig | fPreempted
	}
	p.slotJob[g] = 0
	p.slotKind[g] = kNone
	if p.rep != nil && kind == kSecondary {
		p.rep.removed(p, g, r)
	}
}

// pushFree notes that slot g (now empty) is free.
func (p *planner) pushFree(g int32) {
	mr := p.slotMach[g]
	m := &p.mach[mr]
	m.freeCnt++
	m.nextFree = min(m.nextFree, g-m.off)
	p.freeTotal++
	p.gain(mr)
}

// popFree takes machine m's lowest free slot; the caller occupies it.
func (p *planner) popFree(m *machState) int32 {
	g := m.off + m.nextFree
	for p.slotJob[g] != 0 {
		g++
	}
	m.nextFree = g - m.off + 1
	m.freeCnt--
	p.freeTotal--
	return g
}

// gain notes that machine mr has more room than before, so free-fit
// cursors that passed it must look again.
func (p *planner) gain(mr int32) {
	if p.rep != nil {
		p.rep.invalidateAll()
	}
	pos := p.bfPos[mr]
	for s := range p.fcur {
		if p.fcur[s] > pos {
			p.fcur[s] = pos
		}
	}
}

// freeFit takes a free slot that fits one instance of job r, or returns -1.
func (p *planner) freeFit(r int32) int32 {
	if p.freeTotal == 0 {
		return -1
	}
	j := &p.jobs[r]
	c := p.fcur[j.shape]
	for ; int(c) < len(p.bf); c++ {
		m := &p.mach[p.bf[c]]
		if m.freeCnt > 0 && (!p.constrained || p.fits(j, m, 0, 0, 0)) {
			break
		}
	}
	p.fcur[j.shape] = c
	if int(c) == len(p.bf) {
		return -1
	}
	return p.popFree(&p.mach[p.bf[c]])
}

// placePrimaries gives every job, in rank order, its missing primaries:
// a free slot that fits, else (unless preemption is disabled) the slot of a
// running secondary of another job.
func (p *planner) placePrimaries() {
	for r := range p.jobs {
		j := &p.jobs[r]
		for j.P < j.primWant {
			g := p.freeFit(int32(r))
			if g < 0 && p.policy != polDisabled {
				g = p.preemptForPrimary(int32(r))
			}
			if g < 0 {
				break
			}
			p.occupy(g, int32(r), kPrimary)
		}
	}
}

// preemptForPrimary frees a slot for a primary of job r by preempting
// running secondaries in victim order (excess secondaries first), and
// returns it, or -1. A machine qualifies when the primary would fit it
// with all its secondaries gone; on it, victims are taken in victim order
// until the primary fits, and then any that turn out not to be needed are
// spared.
func (p *planner) preemptForPrimary(r int32) int32 {
	j := &p.jobs[r]
	vc := p.vcur[j.shape]
	defer func() { p.vcur[j.shape] = vc }()
	for {
		if int(vc) == len(p.victims) {
			if p.tier2Built {
				return -1
			}
			p.buildTier2()
			if int(vc) == len(p.victims) {
				return -1
			}
		}
		g := p.victims[vc]
		if !p.isVictim(g) {
			vc++
			continue
		}
		if !p.constrained {
			p.vacate(g)
			return g
		}
		mr := p.slotMach[g]
		if !p.pcFits(j, &p.mach[mr]) {
			vc++
			continue
		}
		return p.preemptOn(r, mr)
	}
}

// preemptOn makes room for one primary of job r on machine mr (which
// pcFits), preempting as few of its secondaries as victim order allows.
func (p *planner) preemptOn(r, mr int32) int32 {
	j := &p.jobs[r]
	m := &p.mach[mr]
	var cands []int32
	for g := m.off; g < m.off+m.slots; g++ {
		if p.slotKind[g] == kSecondary {
			cands = append(cands, g)
		}
	}
	slices.SortFunc(cands, func(a, b int32) int {
		ta, tb := p.slotFlag[a]&fTier1, p.slotFlag[b]&fTier1
		return cmp.Or(cmp.Compare(tb, ta), cmp.Compare(p.slotJob[b], p.slotJob[a]),
			cmp.Compare(p.started(b), p.started(a)), cmp.Compare(b, a))
	})
	need := func(g int32) (int64, int64, int64) {
		v := &p.jobs[p.slotJob[g]-1]
		return v.cores, v.mem, v.gpus
	}
	var c, mem, gp int64
	k := 0
	for k < len(cands) && !(int(m.freeCnt)+k >= 1 && p.fits(j, m, c, mem, gp)) {
		vc, vm, vg := need(cands[k])
		c, mem, gp = c+vc, mem+vm, gp+vg
		k++
	}
	if !(int(m.freeCnt)+k >= 1 && p.fits(j, m, c, mem, gp)) {
		return -1 // not reached: pcFits(j, m) holds
	}
	chosen := cands[:k]
	for i := len(chosen) - 1; i >= 0; i-- {
		vc, vm, vg := need(chosen[i])
		if int(m.freeCnt)+len(chosen)-1 >= 1 && p.fits(j, m, c-vc, mem-vm, gp-vg) {
			c, mem, gp = c-vc, mem-vm, gp-vg
			chosen = slices.Delete(chosen, i, i+1)
		}
	}
	if len(chosen) == 0 {
		// Not reached: a free slot that fits would have been found first.
		return p.popFree(m)
	}
	for _, g := range chosen {
		p.vacate(g)
	}
	for _, g := range chosen[1:] {
		p.pushFree(g)
	}
	p.gain(mr)
	return chosen[0]
}

// placeSecondaries realises the count model when no resources constrain
// placement: each job, in rank order, fills its deficit from free slots,
// then from other jobs' excess secondaries.
func (p *planner) placeSecondaries() {
	vc := 0
	for r := range p.jobs {
		j := &p.jobs[r]
		if j.P < j.primWant {
			continue
		}
		for j.S < j.t {
			g := p.freeFit(int32(r))
			if g < 0 {
				for vc < p.tier1Len && !p.isVictim(p.victims[vc]) {
					vc++
				}
				if vc == p.tier1Len {
					break
				}
				g = p.victims[vc]
				p.vacate(g)
			}
			p.occupy(g, int32(r), kSecondary)
		}
	}
}
