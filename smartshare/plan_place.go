package smartshare

import (
	"cmp"
	"slices"
)

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
	// Each candidate's cap and floor in compact arrays: the binary search
	// below sums over them a dozen times, and a job's state is ~150 bytes.
	caps, floors := p.sc.caps[:0], p.sc.floors[:0]
	maxC := 0
	for r := range p.jobs {
		j := &p.jobs[r]
		j.t = 0
		if c := p.secCap(j); c > 0 {
			idx = append(idx, int32(r))
			caps = append(caps, int32(c))
			f := 0
			if disabled {
				f = j.rs
			}
			floors = append(floors, int32(f))
			maxC = max(maxC, c)
		}
	}
	p.tmp, p.sc.caps, p.sc.floors = idx, caps, floors
	sumAt := func(L int) int {
		s := 0
		if !disabled {
			for _, c := range caps {
				s += int(min(c, int32(min(L, 1<<30))))
			}
			return s
		}
		for k, c := range caps {
			s += max(int(floors[k]), min(int(c), L))
		}
		return s
	}
	if sumAt(maxC) <= surplus {
		for k, r := range idx {
			p.jobs[r].t = int(caps[k])
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
	for k, r := range idx {
		p.jobs[r].t = max(int(floors[k]), min(int(caps[k]), L))
	}
	eligible := func(k int, j *jobState) bool { return int(floors[k]) <= L && int(caps[k]) > L && j.t == L }
	for k, r := range idx {
		if left == 0 {
			break
		}
		if j := &p.jobs[r]; eligible(k, j) && j.rs >= L+1 {
			j.t++
			left--
		}
	}
	for k, r := range idx {
		if left == 0 {
			break
		}
		if j := &p.jobs[r]; eligible(k, j) {
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
		if m.freeCnt > 0 && (!p.constrained || p.fits(j, m, 0, 0, 0, 0)) {
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
	need := func(g int32) (int64, int64, int64, int64) {
		v := &p.jobs[p.slotJob[g]-1]
		return v.cores, v.mem, v.gpus, v.disk
	}
	var c, mem, gp, dk int64
	k := 0
	for k < len(cands) && !(int(m.freeCnt)+k >= 1 && p.fits(j, m, c, mem, gp, dk)) {
		vc, vm, vg, vd := need(cands[k])
		c, mem, gp, dk = c+vc, mem+vm, gp+vg, dk+vd
		k++
	}
	if !(int(m.freeCnt)+k >= 1 && p.fits(j, m, c, mem, gp, dk)) {
		return -1 // not reached: pcFits(j, m) holds
	}
	chosen := cands[:k]
	for i := len(chosen) - 1; i >= 0; i-- {
		vc, vm, vg, vd := need(chosen[i])
		if int(m.freeCnt)+len(chosen)-1 >= 1 && p.fits(j, m, c-vc, mem-vm, gp-vg, dk-vd) {
			c, mem, gp, dk = c-vc, mem-vm, gp-vg, dk-vd
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
