package smartshare

import (
	"cmp"
	"slices"
)

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
	sc := p.sc
	buf := zeroed(sc.slot32, 3*S)
	sc.slot32 = buf
	p.slotJob, p.slotRun, p.slotInst = buf[:S:S], buf[S:2*S:2*S], buf[2*S:]
	bb := zeroed(sc.slot8, 2*S)
	sc.slot8 = bb
	p.slotKind, p.slotFlag = bb[:S:S], bb[S:]
	if p.constrained || p.forceRepair {
		p.slotMach = sized(sc.slotMach, S)
		sc.slotMach = p.slotMach
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

	// Indexes of the machines' and the jobs' IDs by rank: the first in
	// rank order wins for repeated IDs.
	mIDs := sized(sc.mIDs, len(p.mach))
	sc.mIDs = mIDs
	for r := range p.mach {
		mIDs[r] = in.Machines[p.mach[r].in].ID
	}
	mIdx := newIDIndex(&sc.mIdx, mIDs)
	jIdx := newIDIndex(&sc.jIdx, p.ids)
	jrs := sized(sc.jrs, len(in.Instances)) // each instance's job's rank, or -1
	sc.jrs = jrs
	jIdx.getEach(len(in.Instances), func(i int) string { return in.Instances[i].Job }, jrs)

	// Place every running instance of a known job in its slot (slotRun is
	// the candidate here; conflicts on a slot, only possible in invalid
	// input, are settled by content).
	lastM, lastR := "", int32(-1)
	for i := range in.Instances {
		x := &in.Instances[i]
		mr := lastR
		if !sameString(x.Machine, lastM) || mr < 0 {
			v := mIdx.get(x.Machine)
			if v < 0 {
				continue
			}
			lastM, lastR, mr = x.Machine, v, v
		}
		m := &p.mach[mr]
		if x.Slot < 0 || x.Slot >= int(m.slots) {
			continue
		}
		jr := jrs[i]
		if jr < 0 {
			continue
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
	cnt := zeroed(sc.cnt, len(p.jobs)+1)
	sc.cnt = cnt
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
	p.jobList = sized(sc.jobList, int(off))
	sc.jobList = p.jobList
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
	m.remD -= d64 * j.disk
	if kind == kPrimary {
		m.primCnt += int32(d)
		m.primC += d64 * j.cores
		m.primM += d64 * j.mem
		m.primG += d64 * j.gpus
		m.primD += d64 * j.disk
	}
}

// enforceCapacity drops kept instances from machines whose capacity they
// exceed (the machine shrank or the job's needs grew): primaries and
// higher-priority jobs stay first.
func (p *planner) enforceCapacity() {
	var dirty []int32
	for r := range p.mach {
		m := &p.mach[r]
		if (m.capC == 0 || m.remC >= 0) && (m.capM == 0 || m.remM >= 0) && m.remG >= 0 && (m.capD == 0 || m.remD >= 0) {
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
			if p.fits(&p.jobs[jr], m, 0, 0, 0, 0) {
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
// capacity plus (c, mem, gp, dk) (resources a victim would give back).
// Slots are not checked.
func (p *planner) fits(j *jobState, m *machState, c, mem, gp, dk int64) bool {
	if j.gpus > 0 && m.remG+gp < j.gpus {
		return false
	}
	return fitsCap(m.remC+c, m.capC, j.cores) && fitsCap(m.remM+mem, m.capM, j.mem) && fitsCap(m.remD+dk, m.capD, j.disk)
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
	return fitsCap(m.capC-m.primC, m.capC, j.cores) && fitsCap(m.capM-m.primM, m.capM, j.mem) && fitsCap(m.capD-m.primD, m.capD, j.disk)
}
