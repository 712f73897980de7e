package dispatch

import (
	"math"
	"slices"
	"sort"
	"strconv"
)

// ringVNodes is how many points each owner holds on a Ring.
const ringVNodes = 16

// OwnerSeed is an instance's seed in the owner ring: FNV-1a (64) of
// "job\x00machine\x00slot", computed without allocating (a node computes
// one per planned instance of a job, and a wide job has thousands).
func OwnerSeed(job, machine string, slot int) uint64 {
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	add := func(s string) {
		for i := 0; i < len(s); i++ {
			h = (h ^ uint64(s[i])) * prime
		}
	}
	add(job)
	h *= prime // the 0x00 separator: h ^ 0 == h
	add(machine)
	h *= prime // the 0x00 separator: h ^ 0 == h
	var buf [20]byte
	for _, c := range strconv.AppendInt(buf[:0], int64(slot), 10) {
		h = (h ^ uint64(c)) * prime
	}
	return h
}

// Ring maps agenda items to owners by consistent hashing: each owner (a
// planned instance, by its seed) holds ringVNodes points on a ring, and an
// item belongs to the owner of the first point at or after the item's hash.
// Adding or removing an instance moves only about 1/n of the items, and a
// lookup is a binary search, so dispatch stays cheap for wide jobs.
//
// A Ring is immutable once built and safe for concurrent use. The nil Ring,
// like a Ring of no seeds, gives every item to owner 0.
type Ring struct {
	points []uint64
	owners []int32
	seeds  []uint64 // owner k's seed, to find its points
}

// NewRing places ringVNodes points per seed (owner k is seeds[k]) and sorts
// them by (place, owner), in place in the ring's own two arrays: a counting
// pass by the top bits of the place into about one bucket per point, then an
// insertion sort within each bucket (places are uniform, so buckets hold one
// or two). Every node builds the ring of a wide job when it starts (32,000
// points for 2,000 instances), so it allocates just the ring, a copy of the
// seeds and the bucket starts.
func NewRing(seeds []uint64) *Ring {
	n := len(seeds) * ringVNodes
	r := &Ring{points: make([]uint64, n), owners: make([]int32, n), seeds: slices.Clone(seeds)}
	if n == 0 {
		return r
	}
	bits := uint(1)
	for 1<<bits < n && bits < 24 {
		bits++
	}
	shift := 64 - bits
	// next[b] is where bucket b's next point goes: first the bucket's start
	// (counts, then sums), and once every point is placed, its end.
	next := make([]int32, 1<<bits)
	for _, sd := range seeds {
		for v := uint64(0); v < ringVNodes; v++ {
			if b := ringPlace(sd, v) >> shift; b+1 < uint64(len(next)) {
				next[b+1]++
			}
		}
	}
	for b := 1; b < len(next); b++ {
		next[b] += next[b-1]
	}
	for k, sd := range seeds {
		for v := uint64(0); v < ringVNodes; v++ {
			h := ringPlace(sd, v)
			b := h >> shift
			x := next[b]
			next[b]++
			r.points[x], r.owners[x] = h, int32(k)
		}
	}
	lo := int32(0)
	for _, hi := range next {
		sortRingBucket(r.points[lo:hi], r.owners[lo:hi])
		lo = hi
	}
	return r
}

// ringPlace is the place on the ring of a seed's v-th point.
func ringPlace(seed, v uint64) uint64 { return mix64(seed ^ (v+1)*0x9E3779B97F4A7C15) }

// sortRingBucket sorts one bucket's points by (place, owner), moving the
// owners along: an insertion sort, for the few points of a bucket.
func sortRingBucket(points []uint64, owners []int32) {
	for x := 1; x < len(points); x++ {
		for y := x; y > 0 && (points[y] < points[y-1] || points[y] == points[y-1] && owners[y] < owners[y-1]); y-- {
			points[y], points[y-1] = points[y-1], points[y]
			owners[y], owners[y-1] = owners[y-1], owners[y]
		}
	}
}

// OwnerOf is the owner of item index i (an index into the seeds).
func (r *Ring) OwnerOf(i int) int {
	if r == nil || len(r.points) == 0 {
		return 0
	}
	h := itemHash(i)
	k := sort.Search(len(r.points), func(x int) bool { return r.points[x] >= h })
	if k == len(r.points) {
		k = 0
	}
	return int(r.owners[k])
}

// TakerOf is who takes item i while its owner is gone: the owner of the
// first point from i's (clockwise, wrapping) whose owner runs, or -1 when
// none runs. It depends only on the item and on which owners run, not on
// which items anyone leases, so two nodes that agree on who runs name the
// same taker whatever leases each has heard of.
func (r *Ring) TakerOf(i int, runs func(owner int) bool) int {
	if r == nil || len(r.points) == 0 {
		return -1
	}
	h := itemHash(i)
	n := len(r.points)
	k := sort.Search(n, func(x int) bool { return r.points[x] >= h })
	for d := range n {
		if o := int(r.owners[(k+d)%n]); runs(o) {
			return o
		}
	}
	return -1
}

// Takers appends to dst the first n distinct owners that run, in the order
// the ring meets them clockwise from item i's place, and returns it: the
// first is TakerOf's, the next ones take the item, one after the other,
// when those before them do not (see Next). Like TakerOf it depends only on
// the item and on which owners run. It walks the ring until it has n, or
// all the way round.
func (r *Ring) Takers(i int, runs func(owner int) bool, n int, dst []int) []int {
	if r == nil || len(r.points) == 0 || n <= 0 {
		return dst
	}
	h := itemHash(i)
	np := len(r.points)
	k := sort.Search(np, func(x int) bool { return r.points[x] >= h })
	base := len(dst)
	for d := 0; d < np && len(dst)-base < n; d++ {
		if o := int(r.owners[(k+d)%np]); !slices.Contains(dst[base:], o) && runs(o) {
			dst = append(dst, o)
		}
	}
	return dst
}

// BackupOf is item i's backup owner: the owner of the first point after
// its owner's (clockwise, wrapping) that belongs to another owner, or -1 on
// a ring of fewer than two owners. Every item has one backup, the same on
// every node for one plan, so an idle slot that takes only the items it
// backs up never takes one another idle slot takes (see Next).
func (r *Ring) BackupOf(i int) int {
	if r == nil || len(r.points) == 0 {
		return -1
	}
	h := itemHash(i)
	n := len(r.points)
	k := sort.Search(n, func(x int) bool { return r.points[x] >= h })
	if k == n {
		k = 0
	}
	own := r.owners[k]
	for d := 1; d < n; d++ {
		if o := r.owners[(k+d)%n]; o != own {
			return int(o)
		}
	}
	return -1
}

// ItemsOf returns the indexes of the items among b's that rank owns,
// ascending: exactly the i below b.N() with r.OwnerOf(i) == rank. It finds
// rank's points from its seed (a binary search each) and the items on their
// arcs from b, without hashing every item nor walking the ring. The result
// is never nil, so a caller may keep it as a memo and tell it from none.
func (r *Ring) ItemsOf(b *Buckets, rank int) []int32 {
	n := b.N()
	if r == nil || len(r.points) == 0 {
		if rank != 0 {
			return []int32{}
		}
		out := make([]int32, n) // a ring without owners gives everything to rank 0
		for i := range out {
			out[i] = int32(i)
		}
		return out
	}
	out := []int32{}
	last := r.points[len(r.points)-1]
	if rank < 0 || rank >= len(r.seeds) {
		return out
	}
	seed := r.seeds[rank]
	for v := uint64(0); v < ringVNodes; v++ {
		// Find the point: the first at its place held by rank (points are
		// sorted by place, then owner).
		h := ringPlace(seed, v)
		k, _ := slices.BinarySearch(r.points, h)
		for int(r.owners[k]) != rank {
			k++
		}
		// OwnerOf gives h to the first point >= h (wrapping to point 0
		// past the last): point k owns (points[k-1], points[k]].
		if k > 0 {
			out = b.inRange(r.points[k-1], r.points[k], false, out)
			continue
		}
		if last < math.MaxUint64 {
			out = b.inRange(last, math.MaxUint64, false, out)
		}
		out = b.inRange(0, r.points[0], true, out)
	}
	slices.Sort(out)
	return out
}

// itemHash places item index i on the ring.
func itemHash(i int) uint64 { return mix64(uint64(i)*0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) }

// Buckets groups the item indexes 0..n-1 by the top bits of their ring
// hash, so the items on an arc of the ring are found without hashing every
// item: an owner's items are those on its arcs. Item hashes depend on
// nothing but the index, so jobs of one size share Buckets. Immutable once
// built.
type Buckets struct {
	shift uint
	start []int32 // bucket b holds order[start[b]:start[b+1]]
	order []int32
}

// NewBuckets returns the Buckets of n items.
func NewBuckets(n int) *Buckets {
	idx := make([]int32, n)
	for i := range idx {
		idx[i] = int32(i)
	}
	b := &Buckets{}
	b.order, b.shift, b.start = bucketByTopBits(idx, 2, func(i int32) uint64 { return itemHash(int(i)) })
	return b
}

// N is the item count b was built for.
func (b *Buckets) N() int { return len(b.order) }

// bucketByTopBits orders xs by the top bits of their keys, a counting sort:
// the keys are hashes, spread evenly, so about perBucket share a bucket.
// Bucket b is out[start[b]:start[b+1]]; a key k is in bucket k>>shift.
func bucketByTopBits[T any](xs []T, perBucket int, key func(T) uint64) (out []T, shift uint, start []int32) {
	bits := uint(1)
	for 1<<bits < len(xs)/perBucket && bits < 24 {
		bits++
	}
	shift = 64 - bits
	start = make([]int32, 1<<bits+1)
	for _, x := range xs {
		start[key(x)>>shift+1]++
	}
	for b := 1; b < len(start); b++ {
		start[b] += start[b-1]
	}
	fill := append([]int32(nil), start[:len(start)-1]...)
	out = make([]T, len(xs))
	for _, x := range xs {
		b := key(x) >> shift
		out[fill[b]] = x
		fill[b]++
	}
	return out, shift, start
}

// inRange appends the items whose hash h satisfies lo < h <= hi (lo <= h
// when loIncl).
func (b *Buckets) inRange(lo, hi uint64, loIncl bool, out []int32) []int32 {
	if hi < lo {
		return out
	}
	for k := lo >> b.shift; ; k++ {
		for _, i := range b.order[b.start[k]:b.start[k+1]] {
			if h := itemHash(int(i)); (h > lo || loIncl && h == lo) && h <= hi {
				out = append(out, i)
			}
		}
		if k == hi>>b.shift {
			return out
		}
	}
}

// mix64 is splitmix64's finaliser: cheap, and equal on every node.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}
