package dispatch

import (
	"time"

	"github.com/cshare/cshare/ledger"
)

// IdleSteal is how long an idle instance leaves items reserved for their
// running owners before it takes one itself.
const IdleSteal = 2 * time.Second

// OwnerGrace is how long after a plan change an instance leaves alone the
// items it took over from another instance: about the time a lease takes
// to reach every node in a heartbeat on a busy host.
const OwnerGrace = time.Second

// OwnReserve is how many of its lowest free items a running owner keeps
// from thieves (see Next).
const OwnReserve = 3

// OrphanTakers is how many running owners after an orphan's taker may
// take it while the taker does not (see Next and Ring.Takers).
const OrphanTakers = 3

// PrevFor is how long after a job's owners change Next wants them as they
// were (View.Prev): OwnerGrace for the items that changed owner, and the
// idle clock, which starts again OwnerGrace after the change, needs them
// until its longest wait (twice IdleSteal) has passed.
const PrevFor = OwnerGrace + 2*IdleSteal

// View is what a node knows, at one moment, that decides which item a slot
// takes next. Next only reads it.
type View struct {
	// Items is the job's agenda; item i is RangeStart+i.
	Items      ledger.ItemList
	RangeStart int64
	// Leased reports whether an item is leased: running or finished (its
	// result not yet seen) on this machine or another online one. Nil: none.
	Leased func(item int64) bool
	// Alive reports whether an owner runs: an instance of the job on this
	// machine, one another online machine announces, or one planned on a
	// machine that has not announced this plan yet (it may be starting it).
	// Nil: none.
	Alive func(Slot) bool

	// Slot is the slot asking.
	Slot Slot
	// Owners is the job's owners under the current plan; nil or without
	// Slot means Slot is not in the plan (any more): everything is its own.
	Owners *Owners
	// Buckets, if not nil, are NewBuckets(len(Items)), which a caller may
	// keep (Next builds them when it needs them and Mine is nil).
	Buckets *Buckets
	// Mine, if not nil, is Owners.Ring.ItemsOf(buckets, rank of Slot): a
	// memo a caller may keep for the plan and item count.
	Mine []int32

	// Prev is the job's owners before they last changed (under the
	// previous plan) and PlanAge the time since they changed: items that
	// changed owner less than OwnerGrace ago are left alone for now, and
	// an idle slot's clock (IdleSteal) starts OwnerGrace after the change.
	// Nil, or without slots: no previous owners. A caller may leave Prev
	// nil once PlanAge is PrevFor or more: it changes nothing then.
	Prev    *Owners
	PlanAge time.Duration
}

// Cursor is a slot's position in the agenda, owned by its instance and
// advanced by Next: below Cursor and above Tail every item of the job is
// done or failed for good. IdleSince is when Next first found nothing the
// slot may take while free items remained (reserved for their running
// owners) since it last took an item; see IdleSteal. Orphans identifies
// the orphans (free items whose owner does not run) Next last saw for the
// slot and OrphansSince is when they last changed: an idle slot's clock
// for orphans starts there. The zero Cursor starts at the ends.
type Cursor struct {
	Cursor, Tail int
	IdleSince    time.Time
	Orphans      uint64
	OrphansSince time.Time
}

// Next picks the slot's next agenda item among the free ones: pending, and
// not leased. It advances c and reads nothing but v and now.
//
// Each item has an owner among the job's planned instances (see Ring),
// which every node computes alike from the plan: an instance takes its
// lowest free item, so two instances never race for one item while the
// plans agree, whatever each node knows of the others' leases, and when
// the plan changes (a machine dies, a job arrives) only the items of the
// instances that went change owner, so nodes whose plans briefly differ
// still mostly agree. An instance with nothing of its own steals, the
// highest items first (their owners reach them last), never an item its
// running owner takes next: instance k takes the k-th candidate, and none
// when there are k or fewer, so that thieves do not collide either. An
// item whose owner does not run at all (an orphan) has takers instead, the
// running owners in the order the ring meets them after it (Ring.Takers),
// which every node names alike whatever leases it knows: the first takes
// it when idle, and each of the next OrphanTakers in its own span of an
// idle slot's clock, so that none is left behind and two slots that wake
// together never take the same one.
func Next(v View, c *Cursor, now time.Time) (int64, bool) {
	items := v.Items
	if items.Len() == 0 {
		return 0, false
	}
	rank := -1
	var owners []Slot
	var ring *Ring
	if v.Owners != nil {
		if r, ok := v.Owners.Rank[v.Slot]; ok {
			rank, owners, ring = r, v.Owners.Slots, v.Owners.Ring
		}
	}
	mine := v.Mine
	all := rank < 0
	if all {
		// Not in the plan: the only owner (of the nil ring).
		rank, owners, ring, mine = 0, []Slot{v.Slot}, nil, nil
	} else if mine == nil {
		b := v.Buckets
		if b == nil || b.N() != items.Len() {
			b = NewBuckets(items.Len())
		}
		mine = ring.ItemsOf(b, rank)
	}
	var prevRing *Ring
	prevRank := -1
	if v.Prev != nil && len(v.Prev.Slots) > 0 && v.PlanAge < OwnerGrace {
		prevRing = v.Prev.Ring
		if r, ok := v.Prev.Rank[v.Slot]; ok {
			prevRank = r
		}
	}
	leased := func(int64) bool { return false }
	if v.Leased != nil {
		leased = v.Leased
	}
	isAlive := func(Slot) bool { return false }
	if v.Alive != nil {
		isAlive = v.Alive
	}

	if c.Tail <= 0 || c.Tail >= items.Len() {
		c.Tail = items.Len() - 1
	}
	c.Cursor = max(0, min(c.Cursor, items.Len()))
	free := func(i int) bool {
		return items.Status(i) == ledger.ItemPending && !leased(v.RangeStart+int64(i))
	}
	for c.Cursor < items.Len() && items.Status(c.Cursor) != ledger.ItemPending {
		c.Cursor++ // done for good: skip it from now on
	}
	// Its own items, lowest first.
	own := func(i int) bool {
		if i < c.Cursor || !free(i) {
			return false
		}
		// Items that changed owner with a plan change less than OwnerGrace
		// ago may have been taken by their previous owner an instant ago,
		// before its lease could reach us: later.
		return prevRing == nil || prevRing.OwnerOf(i) == prevRank
	}
	if all {
		for i := c.Cursor; i < items.Len(); i++ {
			if own(i) {
				c.IdleSince = time.Time{}
				return v.RangeStart + int64(i), true
			}
		}
	}
	for _, i32 := range mine {
		if own(int(i32)) {
			c.IdleSince = time.Time{} // busy: a later idle spell waits anew
			return v.RangeStart + int64(i32), true
		}
	}
	// Steal, from the top down: an owner takes its lowest free items
	// first, so its highest are the last it would reach. Each item has one
	// backup among the owners (Ring.BackupOf), the same on every node while
	// the plans agree, and an idle slot takes only items it backs up: two
	// idle slots never take the same one, whatever each knows of the
	// other's leases. A running owner's lease reaches a thief only after a
	// heartbeat (a few hundred milliseconds on a busy host), so each running
	// owner keeps its OwnReserve lowest free items. Items whose owner does
	// not run at all (orphans) are shared out among the slots.
	//
	// For OwnerGrace after the owners change, a running owner leaves alone
	// the items it took over (see own), and so does every thief: their
	// previous owner may take one at this moment. The owner's reserve is
	// then its lowest items it may take: counted among all its free items,
	// the reserve was the items it leaves alone, and a thief stole the
	// item the owner took instead, on the same wake-up.
	prevRanks := make([]int, 0, len(owners)) // owner -> its rank in Prev (-1: none), filled as needed
	heldBack := func(i, o int) bool {
		if prevRing == nil {
			return false
		}
		for len(prevRanks) <= o {
			r, ok := v.Prev.Rank[owners[len(prevRanks)]]
			if !ok {
				r = -1
			}
			prevRanks = append(prevRanks, r)
		}
		return prevRing.OwnerOf(i) != prevRanks[o] && isAlive(owners[o])
	}
	type cand struct{ i, owner int }
	var cands []cand
	lowest := map[int][]int{} // owner -> indexes in cands of its lowest free items seen, lowest last
	for i := c.Tail; i >= c.Cursor && len(cands) < (OwnReserve+4)*len(owners)+64; i-- {
		if items.Status(i) != ledger.ItemPending {
			if i == c.Tail {
				c.Tail--
			}
			continue
		}
		if !free(i) {
			continue
		}
		o := ring.OwnerOf(i)
		if heldBack(i, o) {
			continue
		}
		lowest[o] = append(lowest[o], len(cands))
		cands = append(cands, cand{i, o})
	}
	reserved := map[int]bool{}  // indexes in cands
	next := map[int]bool{}      // indexes in cands of each running owner's next item
	for o, ks := range lowest { // sets only: order does not matter
		if isAlive(owners[o]) {
			for _, k := range ks[max(0, len(ks)-OwnReserve):] {
				reserved[k] = true
			}
			if len(ks) > 0 {
				next[ks[len(ks)-1]] = true
			}
		}
	}
	var orphans []int                                                   // indexes of the free items whose owner does not run, highest first
	runs := func(o int) bool { return o == rank || isAlive(owners[o]) } // the asking slot runs
	steal, idle, idleNext := -1, -1, -1
	for k, cd := range cands {
		switch {
		case !runs(cd.owner):
			orphans = append(orphans, cd.i)
		case ring.BackupOf(cd.i) != rank:
		case prevRing != nil && prevRing.BackupOf(cd.i) >= 0 && prevRing.BackupOf(cd.i) != prevRank:
			// The plan changed less than OwnerGrace ago, and a machine
			// still on the previous one steals by it: an item another slot
			// backs up there may be that thief's at this moment.
		case !reserved[k]:
			if steal < 0 {
				steal = cd.i
			}
		case !next[k]:
			if idle < 0 {
				idle = cd.i
			}
		default:
			if idleNext < 0 {
				idleNext = cd.i
			}
		}
	}
	// An orphan's takers are the running owners in the order the ring
	// meets them after it (Ring.Takers): they depend on the ring and on
	// which owners run, not on the leases a node has heard of, so every
	// node names them alike while the plans agree. The first takes it as
	// soon as it has nothing of its own, the lowest first; the k-th after
	// it (1 <= k <= OrphanTakers) takes it, the highest first, while the
	// slot's orphan clock is in its k-th span of IdleSteal, the spans
	// repeating: slots that wake together are in one span, so at most one
	// of them may take each orphan. The clock starts when the slot is
	// idle, OwnerGrace after the job's owners changed, and whenever the
	// orphans it sees change: an owner that dies makes orphans on every
	// node at once while slots may have been idle for long, and the first
	// taker takes one at once. (Shared out by position among the owners
	// with no free item in sight, modulo the orphans, two idle slots took
	// one: the position depends on the leases each node knows and wraps
	// around.) The first taker and a later one take from opposite ends:
	// a first taker busy with its own items may take its next orphan at
	// any moment, and a later one that took the same would run it twice.
	if fp := orphansPrint(orphans); fp != c.Orphans {
		c.Orphans, c.OrphansSince = fp, now
	}
	orphan := -1
	for _, i := range orphans {
		if ring.TakerOf(i, runs) == rank {
			orphan = i // the lowest, in the end
		}
	}
	switch {
	case steal >= 0:
		c.IdleSince = time.Time{}
		return v.RangeStart + int64(steal), true
	case orphan >= 0:
		c.IdleSince = time.Time{}
		return v.RangeStart + int64(orphan), true
	case len(orphans) > 0:
		if c.IdleSince.IsZero() {
			c.IdleSince = now
		}
		if k := orphanSpan(v, c, now); k > 0 {
			var takers []int
			for _, i := range orphans {
				if takers = ring.Takers(i, runs, k+1, takers[:0]); len(takers) > k && takers[k] == rank {
					c.IdleSince = time.Time{}
					return v.RangeStart + int64(i), true
				}
			}
		}
		fallthrough
	case idle >= 0 || idleNext >= 0:
		// Only items reserved for running owners are left that this slot
		// backs up. An owner that wanted one has had time to announce its
		// lease: no slot sits idle while an item waits, so take one. An
		// owner's very next item (it takes that when its current one ends)
		// only after twice as long: the owner may be about to.
		if c.IdleSince.IsZero() {
			c.IdleSince = now
		}
		switch idled := now.Sub(idleFrom(v, c, now)); {
		case idle >= 0 && idled >= IdleSteal:
			c.IdleSince = time.Time{}
			return v.RangeStart + int64(idle), true
		case idle < 0 && idleNext >= 0 && idled >= 2*IdleSteal:
			c.IdleSince = time.Time{}
			return v.RangeStart + int64(idleNext), true
		}
	}
	return 0, false
}

// idleFrom is when the slot's idle clock started: when it found nothing
// it may take (c.IdleSince), or OwnerGrace after the job's owners last
// changed if that is later. The items a thief may take after IdleSteal are
// reserved for somebody (a running owner's lowest, an orphan's taker), and
// waiting is meant to give that somebody time to take them and announce
// its lease; a change of owners reserves them anew, for slots that leave
// the items they took over alone for OwnerGrace. Counted from before the
// change, a slot idle for long took an owner's very next item the moment
// the change let the owner take it, and as every node changes plans on
// the same ledger entry, both slots chose on the same wake-up.
func idleFrom(v View, c *Cursor, now time.Time) time.Time {
	from := c.IdleSince
	if v.Prev != nil && len(v.Prev.Slots) > 0 {
		if t := now.Add(OwnerGrace - v.PlanAge); t.After(from) {
			from = t
		}
	}
	return from
}

// orphansPrint identifies a list of orphans (0 for none), for a slot to
// notice when the orphans it sees change.
func orphansPrint(orphans []int) uint64 {
	h := uint64(len(orphans))
	for _, i := range orphans {
		h = mix64(h ^ uint64(i)*0x9E3779B97F4A7C15)
	}
	return h
}

// orphanSpan is which of an orphan's later takers may take it now (1 to
// OrphanTakers), by the slot's orphan clock, or 0 for none: the k-th while
// the clock shows between k and k+1 times IdleSteal (modulo OrphanTakers
// times IdleSteal). The clock starts when the slot went idle, OwnerGrace
// after the job's owners changed (idleFrom), or when the orphans it sees
// last changed, whichever is last.
func orphanSpan(v View, c *Cursor, now time.Time) int {
	from := idleFrom(v, c, now)
	if c.OrphansSince.After(from) {
		from = c.OrphansSince
	}
	d := now.Sub(from)
	if d < IdleSteal {
		return 0
	}
	return 1 + int((d-IdleSteal)/IdleSteal)%OrphanTakers
}
