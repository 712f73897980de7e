package dispatch

import (
	"maps"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestPropNoCollisionOnOrphans: with some owners gone (their items
// orphans), the running slots deciding at once from the same view never
// take the same item: each orphan has its takers, not one by rank modulo
// the orphans (with one orphan every idle slot took it).
func TestPropNoCollisionOnOrphans(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := drawWorld(t)
		dead, run := drawDead(t, w)
		alive := func(k Slot) bool { return !dead[k] }
		leased := func(it int64) bool { _, ok := w.leased[it]; return ok }
		took := map[int64]Slot{}
		for _, sl := range run {
			it, ok := Next(w.view(sl, leased, alive), &Cursor{}, epoch)
			if !ok {
				continue
			}
			if o, dup := took[it]; dup {
				t.Fatalf("%s and %s both took %d", o, sl, it)
			}
			took[it] = sl
		}
	})
}

// TestPropOrphansBlind: the machines know different subsets of the leases
// (each its own); two slots still never take the same orphan (an item
// whose owner is gone).
func TestPropOrphansBlind(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := drawWorld(t)
		dead, run := drawDead(t, w)
		alive := func(k Slot) bool { return !dead[k] }
		knows := drawKnowledge(t, w, run)
		took := map[int64]Slot{}
		for _, sl := range run {
			k := knows[sl.Machine]
			it, ok := Next(w.view(sl, func(it int64) bool { return k[it] }, alive), &Cursor{}, epoch)
			if !ok || !dead[w.ownerOf(it)] {
				continue
			}
			if o, dup := took[it]; dup {
				t.Fatalf("%s and %s both took orphan %d", o, sl, it)
			}
			took[it] = sl
		}
	})
}

// drawDead draws which of the plan's slots are gone (about one in three)
// and returns them and the slots that run, in plan order.
func drawDead(t *rapid.T, w *world) (dead map[Slot]bool, run []Slot) {
	dead = map[Slot]bool{}
	for _, sl := range w.slots {
		if rapid.IntRange(0, 2).Draw(t, "dead") == 0 {
			dead[sl] = true
		} else {
			run = append(run, sl)
		}
	}
	return dead, run
}

// TestPropOrphansOneWake: owners die while slots on several machines are
// idle (some for long, some just done with an item), and every node wakes
// its slots at once; each decides from its own machine's view (its own
// leases and any subset of the others'). A while later the slots that took
// nothing wake again together, knowing the first picks if a lease has had
// OwnerGrace to reach them, any subset of them otherwise. No orphan is
// taken twice, at either wake-up: an orphan's takers (Ring.Takers) depend
// on the ring and on which owners run, not on the leases a node knows, and
// slots that wake together are in one span of the orphan clock. (Shared
// out by position modulo the orphans after IdleSteal, two slots idle for
// long took one: the position depends on the leases each machine knows,
// and wraps around.)
func TestPropOrphansOneWake(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := drawWorld(t)
		dead, run := drawDead(t, w)
		alive := func(k Slot) bool { return !dead[k] }
		knows := drawKnowledge(t, w, run) // machine -> the leases it sees
		cursors := map[Slot]*Cursor{}
		for _, sl := range run {
			c := &Cursor{}
			if rapid.Bool().Draw(t, "idle for long") {
				c.IdleSince = epoch
			}
			cursors[sl] = c
		}
		took := map[int64]Slot{} // orphans taken, by whom
		picks := map[int64]Slot{}
		wake := func(now time.Time, slots []Slot) {
			for _, sl := range slots {
				k := knows[sl.Machine]
				it, ok := Next(w.view(sl, func(it int64) bool { return k[it] }, alive), cursors[sl], now)
				if !ok {
					continue
				}
				picks[it] = sl
				if !dead[w.ownerOf(it)] {
					continue
				}
				if o, dup := took[it]; dup {
					t.Fatalf("%s and %s both took orphan %d, %s after the deaths", o, sl, it, now.Sub(epoch.Add(time.Minute)))
				}
				took[it] = sl
			}
		}
		deaths := epoch.Add(time.Minute)
		wake(deaths, run)
		// The first picks run on; the others wake again.
		later := deaths.Add(time.Duration(rapid.Int64Range(0, int64(2*OrphanTakers*IdleSteal)).Draw(t, "later")))
		busy := map[Slot]bool{}
		for _, sl := range picks {
			busy[sl] = true
		}
		var idle []Slot
		for _, sl := range run {
			if !busy[sl] {
				idle = append(idle, sl)
			}
		}
		for _, it := range slices.Sorted(maps.Keys(picks)) {
			for _, m := range slices.Sorted(maps.Keys(knows)) {
				if m == picks[it].Machine || later.Sub(deaths) >= OwnerGrace || rapid.Bool().Draw(t, "heard") {
					knows[m][it] = true
				}
			}
		}
		wake(later, idle)
	})
}
