package dispatch

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestItemsOfMatchesOwnerOf: the items an owner enumerates from its arcs are
// exactly those OwnerOf gives it, for any owners and item count.
func TestItemsOfMatchesOwnerOf(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		seeds := rapid.SliceOfN(rapid.Uint64(), 0, 40).Draw(t, "seeds")
		n := rapid.IntRange(1, 3000).Draw(t, "items")
		r := NewRing(seeds)
		b := NewBuckets(n)
		want := map[int][]int32{}
		for i := 0; i < n; i++ {
			o := r.OwnerOf(i)
			want[o] = append(want[o], int32(i))
		}
		total := 0
		for rank := 0; rank < max(1, len(seeds)); rank++ {
			got := r.ItemsOf(b, rank)
			if got == nil || !slices.Equal(got, want[rank]) {
				t.Fatalf("rank %d: ItemsOf %v, OwnerOf %v", rank, got, want[rank])
			}
			total += len(got)
		}
		if total != n {
			t.Fatalf("%d items enumerated, want %d", total, n)
		}
	})
}

// TestItemsOfTiedPoints: owners with the same seed have their points at
// the same places, ordered by owner; each finds its own.
func TestItemsOfTiedPoints(t *testing.T) {
	seeds := []uint64{5, 9, 5, 5, 9}
	r, b := NewRing(seeds), NewBuckets(500)
	for rank := range seeds {
		var want []int32
		for i := range 500 {
			if r.OwnerOf(i) == rank {
				want = append(want, int32(i))
			}
		}
		if got := r.ItemsOf(b, rank); !slices.Equal(got, want) {
			t.Errorf("rank %d: ItemsOf %v, OwnerOf %v", rank, got, want)
		}
	}
}

// TestNilRing: the nil ring, like a ring of no seeds, gives every item to
// owner 0.
func TestNilRing(t *testing.T) {
	b := NewBuckets(5)
	for _, r := range []*Ring{nil, NewRing(nil)} {
		if got := r.ItemsOf(b, 0); !slices.Equal(got, []int32{0, 1, 2, 3, 4}) {
			t.Errorf("ItemsOf(0) = %v", got)
		}
		if got := r.ItemsOf(b, 1); got == nil || len(got) != 0 {
			t.Errorf("ItemsOf(1) = %#v, want empty", got)
		}
		if o := r.OwnerOf(3); o != 0 {
			t.Errorf("OwnerOf(3) = %d", o)
		}
	}
}

// BenchmarkItemsOf: a fresh ring of 2,000 owners over 20,000 items (a
// 100-machine, 20-slot job with ten items per slot), every owner's items.
func BenchmarkItemsOf(b *testing.B) {
	seeds := make([]uint64, 2000)
	for k := range seeds {
		seeds[k] = OwnerSeed("job", "machine", k)
	}
	bk := NewBuckets(20000)
	for b.Loop() {
		r := NewRing(seeds)
		for rank := range seeds {
			r.ItemsOf(bk, rank)
		}
	}
}

// TestOwnerSeedIsFNV: the allocation-free seed is FNV-1a of
// "job\x00machine\x00slot", as every node of the org computes it.
func TestOwnerSeedIsFNV(t *testing.T) {
	for _, c := range []struct {
		job, machine string
		slot         int
	}{{"0123456789ab", "12D3KooWQYhTNQdmr3ArTeUHRYzFg94BKyTkoWBDWez9kSCVe2Xo", 0}, {"", "", -5}, {"x", "y", 123456}} {
		h := fnv.New64a()
		fmt.Fprintf(h, "%s\x00%s\x00%d", c.job, c.machine, c.slot)
		if got := OwnerSeed(c.job, c.machine, c.slot); got != h.Sum64() {
			t.Errorf("OwnerSeed(%q, %q, %d) = %x, want %x", c.job, c.machine, c.slot, got, h.Sum64())
		}
	}
}

// BenchmarkOwnerRing: the ring of a 2,000-instance job (every node builds
// one when a wide job starts).
func BenchmarkOwnerRing(b *testing.B) {
	seeds := make([]uint64, 2000)
	for k := range seeds {
		seeds[k] = OwnerSeed("job", "machine", k)
	}
	for b.Loop() {
		NewRing(seeds)
	}
}

// TestOwnerRingSorted: the ring built in place holds every seed's points
// ordered exactly as a comparison sort by (place, owner) orders them.
func TestOwnerRingSorted(t *testing.T) {
	type point struct {
		h uint64
		k int32
	}
	rapid.Check(t, func(t *rapid.T) {
		seeds := rapid.SliceOfN(rapid.Uint64(), 0, 300).Draw(t, "seeds")
		var want []point
		for k, sd := range seeds {
			for v := uint64(0); v < ringVNodes; v++ {
				want = append(want, point{ringPlace(sd, v), int32(k)})
			}
		}
		slices.SortFunc(want, func(a, b point) int {
			if a.h != b.h {
				return cmp.Compare(a.h, b.h)
			}
			return cmp.Compare(a.k, b.k)
		})
		r := NewRing(seeds)
		if len(r.points) != len(want) || len(r.owners) != len(want) {
			t.Fatalf("ring has %d points and %d owners, want %d", len(r.points), len(r.owners), len(want))
		}
		for x, p := range want {
			if r.points[x] != p.h || r.owners[x] != p.k {
				t.Fatalf("point %d: (%x, %d), want (%x, %d)", x, r.points[x], r.owners[x], p.h, p.k)
			}
		}
	})
}

// TestSortRingBucket: a bucket's insertion sort orders by (place, owner),
// ties and repeated places included, and moves each owner with its place.
func TestSortRingBucket(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 40).Draw(t, "n")
		points, owners := make([]uint64, n), make([]int32, n)
		type pair struct {
			h uint64
			k int32
		}
		want := make([]pair, n)
		for i := range points {
			points[i] = rapid.Uint64Range(0, 4).Draw(t, "h")
			owners[i] = rapid.Int32Range(0, 5).Draw(t, "k")
			want[i] = pair{points[i], owners[i]}
		}
		slices.SortFunc(want, func(a, b pair) int {
			if a.h != b.h {
				return cmp.Compare(a.h, b.h)
			}
			return cmp.Compare(a.k, b.k)
		})
		sortRingBucket(points, owners)
		for i, w := range want {
			if points[i] != w.h || owners[i] != w.k {
				t.Fatalf("at %d: (%d, %d), want (%d, %d)", i, points[i], owners[i], w.h, w.k)
			}
		}
	})
}

// TestBackupOf: an item's backup is another owner (none on a ring of one),
// and the backups spread over the owners.
func TestBackupOf(t *testing.T) {
	if b := NewRing([]uint64{1}).BackupOf(3); b != -1 {
		t.Fatalf("one owner: backup %d, want -1", b)
	}
	if b := (*Ring)(nil).BackupOf(3); b != -1 {
		t.Fatalf("nil ring: backup %d, want -1", b)
	}
	seeds := []uint64{11, 22, 33, 44, 55}
	r := NewRing(seeds)
	count := make([]int, len(seeds))
	for i := 0; i < 5000; i++ {
		b := r.BackupOf(i)
		if b < 0 || b >= len(seeds) || b == r.OwnerOf(i) {
			t.Fatalf("item %d: owner %d, backup %d", i, r.OwnerOf(i), b)
		}
		count[b]++
	}
	for o, c := range count {
		if c < 500 {
			t.Errorf("owner %d backs up only %d of 5000 items: %v", o, c, count)
		}
	}
}

// TestTakers: an item's takers are distinct running owners, the first is
// TakerOf's, and asked for all they are every running owner once.
func TestTakers(t *testing.T) {
	if got := (*Ring)(nil).Takers(3, func(int) bool { return true }, 2, nil); len(got) != 0 {
		t.Fatalf("nil ring: %v", got)
	}
	r := NewRing([]uint64{11, 22, 33, 44, 55, 66})
	for _, down := range [][]int{nil, {2}, {0, 5}, {1, 2, 3, 4}, {0, 1, 2, 3, 4, 5}} {
		runs := func(o int) bool { return !slices.Contains(down, o) }
		for i := range 500 {
			all := r.Takers(i, runs, 10, nil)
			if len(all) != 6-len(down) {
				t.Fatalf("down %v, item %d: takers %v", down, i, all)
			}
			seen := map[int]bool{}
			for _, o := range all {
				if seen[o] || !runs(o) {
					t.Fatalf("down %v, item %d: takers %v", down, i, all)
				}
				seen[o] = true
			}
			if first := r.TakerOf(i, runs); len(all) > 0 && all[0] != first || len(all) == 0 && first != -1 {
				t.Fatalf("down %v, item %d: takers %v, TakerOf %d", down, i, all, first)
			}
			if two := r.Takers(i, runs, 2, []int{99}); !slices.Equal(two[1:], all[:min(2, len(all))]) || two[0] != 99 {
				t.Fatalf("down %v, item %d: the first two appended to [99]: %v of %v", down, i, two, all)
			}
		}
	}
}
