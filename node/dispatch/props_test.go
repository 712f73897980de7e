package dispatch

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	"pgregory.net/rapid"

	"github.com/cshare/cshare/ledger"
)

// world is a job, a plan and the leases held before a round.
type world struct {
	job    string
	start  int64
	items  []ledger.Item
	slots  []Slot // the plan's instances of the job, in plan order
	owners *Owners
	leased map[int64]string // item -> machine holding it
}

func drawWorld(t *rapid.T) *world {
	w := &world{job: rapid.StringMatching(`[a-f0-9]{4}`).Draw(t, "job"), start: rapid.Int64Range(0, 1000).Draw(t, "start")}
	for m := range rapid.IntRange(1, 4).Draw(t, "machines") {
		for s := range rapid.IntRange(1, 3).Draw(t, "slots") {
			w.slots = append(w.slots, Slot{fmt.Sprintf("m%d", m), s})
		}
	}
	w.slots = rapid.Permutation(w.slots).Draw(t, "plan order")
	w.owners = NewOwners(w.slots, NewRing(Seeds(w.job, w.slots)))
	w.items = make([]ledger.Item, rapid.IntRange(0, 80).Draw(t, "items"))
	for i := range w.items {
		w.items[i].Status = rapid.SampledFrom([]uint8{ledger.ItemPending, ledger.ItemPending, ledger.ItemPending, ledger.ItemDone, ledger.ItemFailed}).Draw(t, "status")
	}
	w.leased = map[int64]string{}
	for i, it := range w.items {
		if it.Status == ledger.ItemPending && rapid.IntRange(0, 4).Draw(t, "leased") == 0 {
			w.leased[w.start+int64(i)] = rapid.SampledFrom(w.slots).Draw(t, "holder").Machine
		}
	}
	return w
}

func (w *world) view(sl Slot, leased func(int64) bool, alive func(Slot) bool) View {
	return View{Items: ledger.ItemsOf(w.items...), RangeStart: w.start, Leased: leased, Alive: alive, Slot: sl, Owners: w.owners}
}

func (w *world) ownerOf(it int64) Slot { return w.slots[w.owners.Ring.OwnerOf(int(it-w.start))] }

// drawKnowledge draws, for each machine of slots, the leases it has heard
// of: its own always, each other one or not.
func drawKnowledge(t *rapid.T, w *world, slots []Slot) map[string]map[int64]bool {
	knows := map[string]map[int64]bool{}
	for _, sl := range slots {
		if knows[sl.Machine] != nil {
			continue
		}
		k := map[int64]bool{}
		for _, it := range slices.Sorted(maps.Keys(w.leased)) {
			if w.leased[it] == sl.Machine || rapid.Bool().Draw(t, "sees") {
				k[it] = true
			}
		}
		knows[sl.Machine] = k
	}
	return knows
}

// TestPropNoCollisionWhilePlansAgree: while the plans agree and every owner
// runs, slots deciding at once from the same leases never take the same
// item, round after round (each round's picks leased for the next), until
// IdleSteal lets idle thieves take reserved items.
func TestPropNoCollisionWhilePlansAgree(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := drawWorld(t)
		alive := func(k Slot) bool { _, ok := w.owners.Rank[k]; return ok }
		leased := map[int64]bool{}
		for it := range w.leased {
			leased[it] = true
		}
		cursors := map[Slot]*Cursor{}
		now := epoch
		for round := range rapid.IntRange(1, 5).Draw(t, "rounds") {
			took := map[int64]Slot{}
			for _, sl := range w.slots {
				if cursors[sl] == nil {
					cursors[sl] = &Cursor{}
				}
				it, ok := Next(w.view(sl, func(it int64) bool { return leased[it] }, alive), cursors[sl], now)
				if !ok {
					continue
				}
				if leased[it] {
					t.Fatalf("round %d: %s took %d, leased", round, sl, it)
				}
				if o, dup := took[it]; dup {
					t.Fatalf("round %d: %s and %s both took %d", round, o, sl, it)
				}
				took[it] = sl
			}
			for it := range took {
				leased[it] = true
			}
			// Idle thieves take reserved items after IdleSteal, modulo: that
			// is the one collision allowed, so the rounds end before.
			now = now.Add(time.Duration(rapid.IntRange(0, 400).Draw(t, "ms")) * time.Millisecond)
		}
	})
}

// TestPropOwnersBlind: whatever each machine knows of the others' leases
// (its own it always knows), an owner takes an item of its own, never one
// another owner takes, and no thief that knows at least the leases the
// owner knows takes it; two thieves never take the same item, whatever
// each knows (each item has one backup, see Ring.BackupOf).
func TestPropOwnersBlind(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := drawWorld(t)
		alive := func(k Slot) bool { _, ok := w.owners.Rank[k]; return ok }
		knows := drawKnowledge(t, w, w.slots)      // machine -> the leases it sees
		subset := func(a, b map[int64]bool) bool { // a ⊆ b
			for it := range a {
				if !b[it] {
					return false
				}
			}
			return true
		}
		type pick struct {
			sl  Slot
			it  int64
			own bool
		}
		var picks []pick
		for _, sl := range w.slots {
			k := knows[sl.Machine]
			it, ok := Next(w.view(sl, func(it int64) bool { return k[it] }, alive), &Cursor{}, epoch)
			if ok {
				picks = append(picks, pick{sl, it, w.ownerOf(it) == sl})
			}
		}
		for x, a := range picks {
			for _, b := range picks[x+1:] {
				if a.it != b.it {
					continue
				}
				ka, kb := knows[a.sl.Machine], knows[b.sl.Machine]
				switch {
				case a.own && b.own:
					t.Fatalf("owners %s and %s both took %d", a.sl, b.sl, a.it)
				case a.own && subset(ka, kb), b.own && subset(kb, ka):
					t.Fatalf("%s (own) and %s (a thief that knows as much) both took %d", a.sl, b.sl, a.it)
				case !a.own && !b.own:
					t.Fatalf("thieves %s and %s both took %d", a.sl, b.sl, a.it)
				}
			}
		}
	})
}

// TestPropEveryItemTaken: every pending item is taken by some running slot
// within bounded time, whichever owners are gone, whatever the previous
// plan, with or without a slot the plan left out.
func TestPropEveryItemTaken(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := drawWorld(t)
		var run []Slot // the slots that run, and ask
		for _, sl := range w.slots {
			if rapid.IntRange(0, 2).Draw(t, "dead") > 0 {
				run = append(run, sl)
			}
		}
		if len(run) == 0 || rapid.Bool().Draw(t, "extra") {
			run = append(run, Slot{"m9", 0}) // not in the plan
		}
		isRun := map[Slot]bool{}
		for _, sl := range run {
			isRun[sl] = true
		}
		alive := func(k Slot) bool { return isRun[k] }
		var prev *Owners
		if rapid.Bool().Draw(t, "prev") {
			ps := rapid.SliceOfNDistinct(rapid.SampledFrom(append(slices.Clone(w.slots), Slot{"m8", 0})), 0, 6, func(s Slot) Slot { return s }).Draw(t, "prev slots")
			prev = NewOwners(ps, NewRing(Seeds(w.job, ps)))
		}
		age := time.Duration(rapid.IntRange(0, 1500).Draw(t, "age ms")) * time.Millisecond
		items := slices.Clone(w.items)
		leased := map[int64]bool{} // the dead machines' leases lapsed
		cursors := map[Slot]*Cursor{}
		step := time.Duration(rapid.IntRange(50, 700).Draw(t, "step ms")) * time.Millisecond
		now := epoch
		pending := func() int {
			n := 0
			for _, it := range items {
				if it.Status == ledger.ItemPending {
					n++
				}
			}
			return n
		}
		for round := 0; pending() > 0; round++ {
			if round > 10*len(items)+50 {
				t.Fatalf("%d items still pending after %d rounds", pending(), round)
			}
			var took []int64
			for _, sl := range run {
				if cursors[sl] == nil {
					cursors[sl] = &Cursor{}
				}
				v := View{Items: ledger.ItemsOf(items...), RangeStart: w.start, Leased: func(it int64) bool { return leased[it] }, Alive: alive,
					Slot: sl, Owners: w.owners, Prev: prev, PlanAge: age + now.Sub(epoch)}
				if it, ok := Next(v, cursors[sl], now); ok {
					leased[it] = true
					took = append(took, it)
				}
			}
			for _, it := range took { // done by the next round
				items[it-w.start].Status = ledger.ItemDone
				delete(leased, it)
			}
			now = now.Add(step)
		}
	})
}

// TestPropMapOrder: Next's result and cursor do not depend on the order
// maps were filled or are walked in, nor on whether the caller passes its
// memo of the slot's items.
func TestPropMapOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := drawWorld(t)
		sl := rapid.SampledFrom(append(slices.Clone(w.slots), Slot{"m9", 0})).Draw(t, "slot")
		var live []Slot
		for _, s := range w.slots {
			if rapid.Bool().Draw(t, "alive") {
				live = append(live, s)
			}
		}
		leasedItems := slices.Sorted(maps.Keys(w.leased))
		build := func(order func([]Slot) []Slot, items []int64) View {
			o := &Owners{Slots: w.slots, Ring: w.owners.Ring, Rank: map[Slot]int{}}
			for _, s := range order(w.slots) {
				o.Rank[s] = w.owners.Rank[s]
			}
			al := map[Slot]bool{}
			for _, s := range order(live) {
				al[s] = true
			}
			le := map[int64]bool{}
			for _, it := range items {
				le[it] = true
			}
			v := w.view(sl, func(it int64) bool { return le[it] }, func(k Slot) bool { return al[k] })
			v.Owners = o
			return v
		}
		v1 := build(func(s []Slot) []Slot { return s }, leasedItems)
		v2 := build(func(s []Slot) []Slot { return rapid.Permutation(s).Draw(t, "order") }, rapid.Permutation(leasedItems).Draw(t, "lease order"))
		if r, ok := w.owners.Rank[sl]; ok && rapid.Bool().Draw(t, "memo") {
			v2.Mine = w.owners.Ring.ItemsOf(NewBuckets(len(w.items)), r)
		}
		c0 := Cursor{Cursor: rapid.IntRange(0, len(w.items)).Draw(t, "cursor"), Tail: rapid.IntRange(0, len(w.items)).Draw(t, "tail")}
		if rapid.Bool().Draw(t, "idle") {
			c0.IdleSince = epoch
		}
		now := epoch.Add(time.Duration(rapid.IntRange(0, 3000).Draw(t, "now ms")) * time.Millisecond)
		c1 := c0
		it1, ok1 := Next(v1, &c1, now)
		for range 3 {
			c2 := c0
			it2, ok2 := Next(v2, &c2, now)
			if it1 != it2 || ok1 != ok2 || c1 != c2 {
				t.Fatalf("(%d, %v, %+v) then (%d, %v, %+v)", it1, ok1, c1, it2, ok2, c2)
			}
		}
	})
}

// TestPropLeasesOrder: the lease book's answers do not depend on the order
// machines' heartbeats arrive in (each machine's own stay in order).
func TestPropLeasesOrder(t *testing.T) {
	head := cid.NewCidV1(cid.Raw, []byte{0x00, 0x00}) // identity multihash of nothing
	rapid.Check(t, func(t *rapid.T) {
		type hb struct {
			m     string
			held  []Lease
			heads []string
		}
		var beats []hb
		for m := range rapid.IntRange(1, 4).Draw(t, "machines") {
			for range rapid.IntRange(1, 4).Draw(t, "beats") {
				var held []Lease
				for _, it := range rapid.SliceOfN(rapid.Int64Range(0, 8), 0, 6).Draw(t, "held") {
					held = append(held, Lease{rapid.SampledFrom([]string{"a", "b"}).Draw(t, "job"), it})
				}
				var heads []string
				if rapid.Bool().Draw(t, "named") {
					heads = []string{head.String()}
				}
				beats = append(beats, hb{fmt.Sprintf("m%d", m), held, heads})
			}
		}
		// Interleave the machines' sequences another way: a stable sort by
		// a random key per machine keeps each machine's order.
		key := map[string]int{}
		for _, b := range beats {
			if _, ok := key[b.m]; !ok {
				key[b.m] = rapid.IntRange(0, 100).Draw(t, "key")
			}
		}
		other := slices.Clone(beats)
		slices.SortStableFunc(other, func(a, b hb) int { return key[a.m] - key[b.m] })
		var l1, l2 Leases
		for _, b := range beats {
			l1.Observe(b.m, b.held, b.heads)
		}
		for _, b := range other {
			l2.Observe(b.m, b.held, b.heads)
		}
		has := rapid.Bool().Draw(t, "has")
		for _, job := range []string{"a", "b"} {
			for it := range int64(9) {
				if h1, h2 := l1.Holder(job, it), l2.Holder(job, it); h1 != h2 {
					t.Fatalf("holder of %s/%d: %q then %q", job, it, h1, h2)
				}
			}
			for m := range 4 {
				r1, r2 := map[int64]bool{}, map[int64]bool{}
				l1.Released(fmt.Sprintf("m%d", m), job, func(cid.Cid) bool { return has }, r1)
				l2.Released(fmt.Sprintf("m%d", m), job, func(cid.Cid) bool { return has }, r2)
				if !maps.Equal(r1, r2) {
					t.Fatalf("released by m%d of %s: %v then %v", m, job, r1, r2)
				}
			}
		}
	})
}

// TestPropThievesAcrossAPlanChange: for OwnerGrace after a plan change the
// machines' plans may differ (some have the new one, some still the old);
// two thieves then still never take the same item, whatever plan each
// decides by (a thief on the new plan steals only items it backs up under
// both plans).
func TestPropThievesAcrossAPlanChange(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		// A job near its end (few pending items, so that slots run out of
		// their own and steal) on a few one-slot machines.
		w := &world{job: rapid.StringMatching(`[a-f0-9]{4}`).Draw(t, "job"), leased: map[int64]string{}}
		for m := range rapid.IntRange(2, 5).Draw(t, "machines") {
			w.slots = append(w.slots, Slot{fmt.Sprintf("m%d", m), 0})
		}
		w.slots = rapid.Permutation(w.slots).Draw(t, "plan order")
		w.owners = NewOwners(w.slots, NewRing(Seeds(w.job, w.slots)))
		w.items = make([]ledger.Item, rapid.IntRange(1, 40).Draw(t, "items"))
		for i := range w.items {
			w.items[i].Status = ledger.ItemDone
		}
		for range rapid.IntRange(1, 4).Draw(t, "pending") {
			w.items[rapid.IntRange(0, len(w.items)-1).Draw(t, "pending item")].Status = ledger.ItemPending
		}
		old := rapid.Permutation(w.slots).Draw(t, "old plan order")
		if n := len(old); n > 1 && rapid.Bool().Draw(t, "old plan one fewer") {
			old = old[:n-1]
		}
		if rapid.Bool().Draw(t, "old plan one more") {
			old = append(old, Slot{"m8", 0})
		}
		prev := NewOwners(old, NewRing(Seeds(w.job, old)))
		machines := map[string]bool{} // on the new plan
		for _, sl := range append(slices.Clone(w.slots), old...) {
			if _, seen := machines[sl.Machine]; !seen {
				machines[sl.Machine] = rapid.Bool().Draw(t, "on the new plan")
			}
		}
		leased := func(it int64) bool { _, ok := w.leased[it]; return ok }
		type pick struct {
			sl Slot
			it int64
		}
		var thieves []pick
		ask := func(sl Slot, v View, owners *Owners) {
			if _, in := owners.Rank[sl]; !in {
				return
			}
			it, ok := Next(v, &Cursor{}, epoch)
			if ok && owners.Slots[owners.Ring.OwnerOf(int(it-w.start))] != sl {
				thieves = append(thieves, pick{sl, it})
			}
		}
		for _, sl := range w.slots {
			if machines[sl.Machine] {
				v := w.view(sl, leased, func(k Slot) bool { _, ok := w.owners.Rank[k]; return ok })
				v.Prev, v.PlanAge = prev, OwnerGrace/2
				ask(sl, v, w.owners)
			}
		}
		for _, sl := range old {
			if !machines[sl.Machine] {
				v := View{Items: ledger.ItemsOf(w.items...), RangeStart: w.start, Leased: leased, Slot: sl, Owners: prev,
					Alive: func(k Slot) bool { _, ok := prev.Rank[k]; return ok }}
				ask(sl, v, prev)
			}
		}
		for x, a := range thieves {
			for _, b := range thieves[x+1:] {
				if a.it == b.it {
					t.Fatalf("thieves %s and %s both took %d (plans differ)", a.sl, b.sl, a.it)
				}
			}
		}
	})
}

// TestThiefLeavesAnItemTheOldPlanBacksUp is the case
// TestPropThievesAcrossAPlanChange found (1 in about 12,000 worlds): m8/0
// left the plan a moment ago; m0/0, already on the new plan, backs up item
// 16 there, but m8/0's machine, still on the old plan, backs it up there
// and steals it at the same moment.
func TestThiefLeavesAnItemTheOldPlanBacksUp(t *testing.T) {
	const job = "0357"
	plan := []Slot{{"m0", 0}, {"m1", 0}}
	old := []Slot{{"m0", 0}, {"m1", 0}, {"m8", 0}}
	owners, prev := NewOwners(plan, NewRing(Seeds(job, plan))), NewOwners(old, NewRing(Seeds(job, old)))
	items := make([]ledger.Item, 17)
	for i := range items {
		items[i].Status = ledger.ItemDone
	}
	for _, i := range []int{1, 2, 3, 16} {
		items[i].Status = ledger.ItemPending
	}
	alive := func(o *Owners) func(Slot) bool { return func(k Slot) bool { _, ok := o.Rank[k]; return ok } }
	onOld, ok := Next(View{Items: ledger.ItemsOf(items...), Slot: Slot{"m8", 0}, Owners: prev, Alive: alive(prev)}, &Cursor{}, epoch)
	if !ok || onOld != 16 || prev.Slots[prev.Ring.OwnerOf(16)] == (Slot{"m8", 0}) {
		t.Fatalf("the case changed: m8/0 on the old plan takes %d (%v), as a thief", onOld, ok)
	}
	v := View{Items: ledger.ItemsOf(items...), Slot: Slot{"m0", 0}, Owners: owners, Alive: alive(owners), Prev: prev, PlanAge: OwnerGrace / 2}
	if it, ok := Next(v, &Cursor{}, epoch); ok && it == onOld {
		t.Fatalf("m0/0 on the new plan took %d too", it)
	}
	v.PlanAge = OwnerGrace
	if it, ok := Next(v, &Cursor{}, epoch); !ok || it != 16 {
		t.Fatalf("after the grace m0/0 takes %d (%v); want 16", it, ok)
	}
}

// TestPropOneWakeAfterAnOwnersChange: every node changes plans on the same
// ledger entry and wakes its idle slots, so slots decide at once just after
// the job's owners change, and some have been idle for long. Until
// OwnerGrace+IdleSteal after the change they never take the same item from
// one view, however long they have been idle (the items an idle slot takes
// after IdleSteal were reserved for others under the old owners, and an
// owner may take its own the moment the change lets it).
func TestPropOneWakeAfterAnOwnersChange(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := drawWorld(t)
		// The old owners: the new ones with one more (that left) or one
		// fewer (that joined), as when the plan shrinks or grows, or any.
		var old []Slot
		switch rapid.IntRange(0, 2).Draw(t, "change") {
		case 0:
			old = slices.Insert(slices.Clone(w.slots), rapid.IntRange(0, len(w.slots)).Draw(t, "at"), Slot{"m8", 0})
		case 1:
			k := rapid.IntRange(0, len(w.slots)-1).Draw(t, "joined")
			old = slices.Delete(slices.Clone(w.slots), k, k+1)
		default:
			old = rapid.SliceOfNDistinct(rapid.SampledFrom(append(slices.Clone(w.slots), Slot{"m8", 0}, Slot{"m9", 1})), 1, 8,
				func(s Slot) Slot { return s }).Draw(t, "old owners")
		}
		prev := NewOwners(old, NewRing(Seeds(w.job, old)))
		// Near a job's end: some owners have none of their items left
		// and steal.
		w.items = slices.Clone(w.items)
		for k := range w.slots {
			if rapid.Bool().Draw(t, "done with its own") {
				for i := range w.items {
					if w.owners.Ring.OwnerOf(i) == k {
						w.items[i].Status = ledger.ItemDone
					}
				}
			}
		}
		dead, run := drawDead(t, w)
		alive := func(k Slot) bool { return !dead[k] }
		leased := func(it int64) bool { _, ok := w.leased[it]; return ok }
		age := time.Duration(rapid.Int64Range(0, int64(OwnerGrace+IdleSteal)-1).Draw(t, "plan age"))
		now := epoch.Add(time.Minute)
		took := map[int64]Slot{}
		for _, sl := range run {
			v := w.view(sl, leased, alive)
			v.Prev, v.PlanAge = prev, age
			c := &Cursor{IdleSince: epoch} // idle for a minute
			it, ok := Next(v, c, now)
			if !ok {
				continue
			}
			if o, dup := took[it]; dup {
				t.Fatalf("%s and %s both took %d, %s after the owners changed", o, sl, it, age)
			}
			took[it] = sl
		}
	})
}
