package dispatch

import (
	"testing"

	"pgregory.net/rapid"
)

// TestPropNoCollisionOnOrphans: with some owners gone (their items
// orphans), the running slots deciding at once from the same view never
// take the same item: orphans are shared out by position, not by rank
// modulo their number (with one orphan every idle slot took it).
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
