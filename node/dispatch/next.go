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

// PrevFor is how long after a job's owners change Next wants them as they
// were (View.Prev): OwnerGrace for the items that changed owner, and the
// idle clock, which starts again OwnerGrace after the change, needs them
// until its longest wait (twice IdleSteal) has passed.
const PrevFor = OwnerGrace + 2*IdleSteal

// View is what a node knows, at one moment, that decides which item a slot
// takes next. Next only reads it.
type View struct {
	// Items is the job's agenda; item i is RangeStart+i.
	Items      []ledger.Item
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
// owners) since it last took an item; see IdleSteal. The zero Cursor
// starts at the ends.
type Cursor struct {
	Cursor, Tail int
	IdleSince    time.Time
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
// when there are k or fewer, so that thieves do not collide either; items
// whose owner does not run at all are shared out one per idle owner (and
// after IdleSteal modulo them), so none is left behind.
func Next(v View, c *Cursor, now time.Time) (int64, bool) {
	items := v.Items
	if len(items) == 0 {
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
		if b == nil || b.N() != len(items) {
			b = NewBuckets(len(items))
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

	if c.Tail <= 0 || c.Tail >= len(items) {
		c.Tail = len(items) - 1
	}
	c.Cursor = max(0, min(c.Cursor, len(items)))
	free := func(i int) bool {
		return items[i].Status == ledger.ItemPending && !leased(v.RangeStart+int64(i))
	}
	for c.Cursor < len(items) && items[c.Cursor].Status != ledger.ItemPending {
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
		for i := c.Cursor; i < len(items); i++ {
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
		if items[i].Status != ledger.ItemPending {
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
	var orphans []int64
	steal, idle, idleNext, orphan := -1, -1, -1, -1
	runs := func(o int) bool { return isAlive(owners[o]) }
	for k, cd := range cands {
		switch {
		case !isAlive(owners[cd.owner]):
			orphans = append(orphans, v.RangeStart+int64(cd.i))
			if orphan < 0 && ring.TakerOf(cd.i, runs) == rank {
				orphan = cd.i
			}
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
	// An orphan has one taker, the first running owner after it on the
	// ring (Ring.TakerOf), which every node names alike whatever leases it
	// has heard of (sharing orphans out by position among the owners with
	// no free item in sight did not: that depends on the leases each node
	// knows, and two idle slots took one orphan). An idle slot takes the
	// highest orphan it is the taker of; after IdleSteal, any idle slot
	// takes the one at its position modulo the orphans (their takers may
	// be busy): a slot that took it has announced its lease by then.
	pos := 0
	for k := 0; k < rank && k < len(owners); k++ {
		if isAlive(owners[k]) && len(lowest[k]) == 0 {
			pos++
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
		if now.Sub(idleFrom(v, c, now)) >= IdleSteal {
			c.IdleSince = time.Time{}
			return orphans[pos%len(orphans)], true
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
