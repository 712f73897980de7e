package smartshare

// repairState is the bookkeeping of the resource-aware secondary phase.
type repairState struct {
	secHead []int32 // per job: first slot+1 of its secondaries
	secNext []int32 // per slot: next slot+1 in its job's list
	secPrev []int32 // per slot: previous slot+1
	cand    idxHeap // jobs that may grow: fewest secondaries first, then rank
	vict    idxHeap // jobs with secondaries: most first, then lowest priority
	// Per shape, a cached failure: a job of that shape with failLvl or more
	// secondaries can grow neither into a free slot nor by a swap. It stays
	// true until a machine gains room or some job reaches failLvl+2
	// secondaries (a new possible victim).
	failSet []bool
	failLvl []int

	cands    [][]int32 // per shape: candMachines
	candsSet []bool
}

func (s *repairState) invalidateAll() { clear(s.failSet) }

func (s *repairState) added(p *planner, g, r int32) {
	s.secNext[g] = s.secHead[r]
	s.secPrev[g] = 0
	if h := s.secHead[r]; h != 0 {
		s.secPrev[h-1] = g + 1
	}
	s.secHead[r] = g + 1
	// Job r now has n secondaries: for a cached failure at level b, its
	// secondaries became possible victims if n == b+2, and this new one is
	// a possible victim if n > b+2 and a job of that shape could ever take
	// its machine.
	n := p.jobs[r].S
	for sh, set := range s.failSet {
		if !set || n < s.failLvl[sh]+2 {
			continue
		}
		if n == s.failLvl[sh]+2 || p.pcFits(&p.jobs[p.shapeJob[sh]], &p.mach[p.slotMach[g]]) {
			s.failSet[sh] = false
		}
	}
	s.cand.fix(r)
	if s.vict.has(r) {
		s.vict.fix(r)
	} else {
		s.vict.push(r)
	}
}

func (s *repairState) removed(p *planner, g, r int32) {
	next, prev := s.secNext[g], s.secPrev[g]
	if prev != 0 {
		s.secNext[prev-1] = next
	} else {
		s.secHead[r] = next
	}
	if next != 0 {
		s.secPrev[next-1] = prev
	}
	s.secNext[g], s.secPrev[g] = 0, 0
	s.cand.fix(r)
	if p.jobs[r].S == 0 {
		s.vict.remove(r)
	} else {
		s.vict.fix(r)
	}
}

// repair places secondaries one at a time where machine resources matter.
// It is water-filling done by hand: the job with the fewest secondaries
// (then the highest rank) takes a free slot that fits it, or else (unless
// preemption is disabled) the slot of a secondary of a job that has at
// least two more, the job with the most first, then the lowest priority;
// a job that can do neither waits. Passes repeat until one changes
// nothing, so the result is stable: no free slot fits a job below its cap,
// and no such job fits in place of a secondary of a job two or more ahead
// of it. Every change adds an instance or strictly lowers the sum of
// squared secondary counts, so the loop ends.
func (p *planner) repair() {
	n := len(p.jobs)
	s := &repairState{
		secHead: make([]int32, n),
		secNext: make([]int32, p.nSlots),
		secPrev: make([]int32, p.nSlots),
		failSet: make([]bool, p.nShapes),
		failLvl: make([]int, p.nShapes),
	}
	s.cand = newIdxHeap(n, func(a, b int32) bool {
		x, y := p.jobs[a].S, p.jobs[b].S
		return x < y || (x == y && a < b)
	})
	s.vict = newIdxHeap(n, func(a, b int32) bool {
		x, y := p.jobs[a].S, p.jobs[b].S
		return x > y || (x == y && a > b)
	})
	for g := int32(p.nSlots) - 1; g >= 0; g-- {
		if p.slotKind[g] == kSecondary {
			r := p.slotJob[g] - 1
			s.secNext[g] = s.secHead[r]
			if h := s.secHead[r]; h != 0 {
				s.secPrev[h-1] = g + 1
			}
			s.secHead[r] = g + 1
		}
	}
	for r := range p.jobs {
		if p.jobs[r].S > 0 {
			s.vict.push(int32(r))
		}
	}
	p.rep = s
	defer func() { p.rep = nil }()
	canGrow := func(r int32) bool {
		j := &p.jobs[r]
		return j.P >= j.primWant && j.S < j.secWant
	}
	for {
		changed := false
		for r := range p.jobs {
			if canGrow(int32(r)) {
				s.cand.push(int32(r))
			}
		}
		for s.cand.len() > 0 {
			r := s.cand.pop()
			if p.tryGrow(r) {
				changed = true
				if canGrow(r) {
					s.cand.push(r)
				}
			}
		}
		if !changed {
			return
		}
	}
}

// tryGrow gives job r one more secondary if it can.
func (p *planner) tryGrow(r int32) bool {
	s := p.rep
	j := &p.jobs[r]
	b := j.S
	sh := j.shape
	// A shape that failed at a level fails at any higher one (fewer jobs
	// are two ahead), until the cache is invalidated.
	if s.failSet[sh] && b >= s.failLvl[sh] {
		return false
	}
	if g := p.freeFit(r); g >= 0 {
		p.occupy(g, r, kSecondary)
		return true
	}
	if p.policy != polDisabled {
		if g := p.findSwap(r); g >= 0 {
			v := &p.jobs[p.slotJob[g]-1]
			gained := v.cores > j.cores || v.mem > j.mem || v.gpus > j.gpus || v.disk > j.disk
			p.vacate(g)
			p.occupy(g, r, kSecondary)
			if gained {
				p.gain(p.slotMach[g])
			}
			return true
		}
	}
	if s.failSet[sh] {
		s.failLvl[sh] = min(s.failLvl[sh], b)
	} else {
		s.failSet[sh], s.failLvl[sh] = true, b
	}
	return false
}

// findSwap finds a secondary of another job with at least two more
// secondaries than job r, whose slot fits r once it is gone.
func (p *planner) findSwap(r int32) int32 {
	s := p.rep
	j := &p.jobs[r]
	b := j.S
	if s.vict.len() == 0 || p.jobs[s.vict.items[0]].S < b+2 {
		return -1
	}
	if j.cores == 0 && j.mem == 0 && j.gpus == 0 && j.disk == 0 {
		return p.bestVictim(s.vict.items[0], j)
	}
	// Look at the machines this shape could ever take a slot of (those it
	// fits counting only primaries, which do not change here), and pick the
	// best victim by the order of the zero-need case: the job with the most
	// secondaries, then the lowest priority, then victimBefore.
	cands := s.candMachines(p, j.shape)
	best := int32(-1)
	var bestJob *jobState
	for _, mr := range cands {
		m := &p.mach[mr]
		for g := m.off; g < m.off+m.slots; g++ {
			if p.slotKind[g] != kSecondary {
				continue
			}
			i := p.slotJob[g] - 1
			v := &p.jobs[i]
			if v.S < b+2 || !p.fits(j, m, v.cores, v.mem, v.gpus, v.disk) {
				continue
			}
			if best >= 0 {
				bi := p.slotJob[best] - 1
				if v.S < bestJob.S || (v.S == bestJob.S && (i < bi || (i == bi && !p.victimBefore(g, best)))) {
					continue
				}
			}
			best, bestJob = g, v
		}
	}
	return best
}

// candMachines lists, once per repair, the machines a job of shape sh
// would fit with all their secondaries gone.
func (s *repairState) candMachines(p *planner, sh int32) []int32 {
	if s.cands == nil {
		s.cands = make([][]int32, p.nShapes)
		s.candsSet = make([]bool, p.nShapes)
	}
	if !s.candsSet[sh] {
		s.candsSet[sh] = true
		j := &p.jobs[p.shapeJob[sh]]
		for mr := range p.mach {
			if p.pcFits(j, &p.mach[mr]) {
				s.cands[sh] = append(s.cands[sh], int32(mr))
			}
		}
	}
	return s.cands[sh]
}

// bestVictim picks, among job i's secondaries whose slot would fit j, one
// not yet running if any, else the most recently started.
func (p *planner) bestVictim(i int32, j *jobState) int32 {
	s := p.rep
	v := &p.jobs[i]
	best := int32(-1)
	for x := s.secHead[i]; x != 0; x = s.secNext[x-1] {
		g := x - 1
		if !p.fits(j, &p.mach[p.slotMach[g]], v.cores, v.mem, v.gpus, v.disk) {
			continue
		}
		if best < 0 || p.victimBefore(g, best) {
			best = g
		}
	}
	return best
}

// victimBefore orders secondaries of one job: instances not yet running
// first, then most recently started, then machine and slot descending.
func (p *planner) victimBefore(a, b int32) bool {
	oa, ob := p.slotFlag[a]&fOrig, p.slotFlag[b]&fOrig
	if oa != ob {
		return oa == 0
	}
	if sa, sb := p.started(a), p.started(b); oa != 0 && sa != sb {
		return sa > sb
	}
	return a > b
}

// idxHeap is a binary heap of job ranks with O(log n) fix and remove.
type idxHeap struct {
	items []int32
	pos   []int32 // rank -> index+1, 0 when absent
	less  func(a, b int32) bool
}

func newIdxHeap(n int, less func(a, b int32) bool) idxHeap {
	return idxHeap{pos: make([]int32, n), less: less}
}

func (h *idxHeap) len() int         { return len(h.items) }
func (h *idxHeap) has(r int32) bool { return h.pos[r] != 0 }

func (h *idxHeap) push(r int32) {
	if h.pos[r] != 0 {
		h.fix(r)
		return
	}
	h.items = append(h.items, r)
	h.pos[r] = int32(len(h.items))
	h.up(len(h.items) - 1)
}

func (h *idxHeap) pop() int32 {
	r := h.items[0]
	h.remove(r)
	return r
}

func (h *idxHeap) remove(r int32) {
	i := int(h.pos[r]) - 1
	if i < 0 {
		return
	}
	last := len(h.items) - 1
	h.swap(i, last)
	h.items = h.items[:last]
	h.pos[r] = 0
	if i < last {
		h.down(i)
		h.up(i)
	}
}

func (h *idxHeap) fix(r int32) {
	i := int(h.pos[r]) - 1
	if i < 0 {
		return
	}
	h.down(i)
	h.up(i)
}

func (h *idxHeap) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.pos[h.items[i]] = int32(i + 1)
	h.pos[h.items[j]] = int32(j + 1)
}

func (h *idxHeap) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !h.less(h.items[i], h.items[parent]) {
			return
		}
		h.swap(i, parent)
		i = parent
	}
}

func (h *idxHeap) down(i int) {
	n := len(h.items)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		c := l
		if r := l + 1; r < n && h.less(h.items[r], h.items[l]) {
			c = r
		}
		if !h.less(h.items[c], h.items[i]) {
			return
		}
		h.swap(i, c)
		i = c
	}
}
