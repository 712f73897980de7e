package node

import (
	"math"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/smartshare"
)

// nextItem picks the instance's next agenda item among the free ones:
// pending in the ledger, not leased by an online machine's heartbeat (nor
// released by one whose result this node may not have yet, see leases.go),
// not running or finished here.
//
// Each item has an owner among the job's planned instances, by rendezvous
// hashing (the instance with the highest hash of item and instance), which
// every node computes alike from the plan: an instance takes its lowest free
// item, so two instances never race for one item while the plans agree,
// whatever each node knows of the others' leases, and when the plan changes
// (a machine dies, a job arrives) only the items of the instances that went
// change owner, so nodes whose plans briefly differ still mostly agree. An
// instance with nothing of its own steals, the highest items first (their
// owners reach them last), never an item its running owner takes next:
// instance k takes the k-th candidate, and none when there are k or fewer,
// so that thieves do not collide either; only items whose owner does not
// run at all are shared out modulo the candidates, so none is left behind.
// An owner runs if its machine announces it, or has not announced this plan
// yet (it may be starting it); one whose machine announces this plan
// without it cannot run it, and one whose machine is offline is gone.
func (s *scheduler) nextItem(in *instance) (int64, bool) {
	n := s.n
	now := time.Now()
	leased := map[int64]bool{} // this machine's leases; remote ones are in rv
	me := n.id.String()
	rank := -1
	var owners []slotKey // the job's planned instances, in plan order
	alive := map[slotKey]bool{}
	s.mu.Lock()
	for _, o := range s.slots {
		if o.job != in.job {
			continue
		}
		alive[slotKey{me, o.slot}] = true
		if it, _ := o.current(); it >= 0 && o != in {
			leased[it] = true
		}
	}
	for _, r := range s.results[in.job] {
		leased[r.Item] = true
	}
	jo := s.ownersOf(in.job, s.plan.Hash, s.plan.Instances)
	owners, ring := jo.owners, jo.ring
	if r, ok := jo.rank[slotKey{me, in.slot}]; ok {
		rank = r
	}
	myPlan := s.plan.Hash
	// Items that changed owner with a plan change less than ownerGrace ago
	// may have been taken by their previous owner an instant ago, before
	// its lease could reach us: wait before taking those.
	var prevRing *ownerRing
	prevRank := -1
	if time.Since(s.planAt) < ownerGrace {
		if pj := s.ownersOf(in.job, s.prevHash, s.prevInst); len(pj.owners) > 0 {
			prevRing = pj.ring
			if r, ok := pj.rank[slotKey{me, in.slot}]; ok {
				prevRank = r
			}
		}
	}
	s.mu.Unlock()
	if rank < 0 {
		// Not in the plan (any more): everything is its own.
		rank, owners = 0, []slotKey{{me, in.slot}}
		ring = s.ringFor([]uint64{ownerSeed(in.job, me, in.slot)})
	}
	rv := s.remoteView(in.job, myPlan, owners, now)
	lg, unlock := n.rep.ReadLog()
	defer unlock()
	for _, id := range rv.online {
		s.leases.released(id, in.job, lg.Has, leased)
	}
	isAlive := func(k slotKey) bool { return alive[k] || rv.alive[k] }
	j := lg.State().Jobs[in.job]
	if j == nil || j.State != ledger.JobActive || len(j.Items) == 0 {
		return 0, false
	}
	items := j.Items
	if in.tail <= 0 || in.tail >= len(items) {
		in.tail = len(items) - 1
	}
	in.cursor = min(in.cursor, len(items))
	free := func(i int) bool {
		it := j.Spec.RangeStart + int64(i)
		return items[i].Status == ledger.ItemPending && !leased[it] && !rv.leased[it]
	}
	for in.cursor < len(items) && items[in.cursor].Status != ledger.ItemPending {
		in.cursor++ // done for good: skip it from now on
	}
	// Its own items, lowest first.
	for _, i32 := range s.itemsOf(ring, rank, len(items)) {
		i := int(i32)
		if i < in.cursor || !free(i) {
			continue
		}
		if prevRing != nil && prevRing.ownerOf(i) != prevRank {
			continue // it just changed owner: later (see ownerGrace)
		}
		return j.Spec.RangeStart + int64(i), true
	}
	// Steal: candidates from the top down. A running owner takes its
	// lowest free items next, one after the other, and a thief's lease
	// reaches it only after a heartbeat (a few hundred milliseconds on a
	// busy host): leave each running owner its ownReserve lowest free items.
	type cand struct{ i, owner int }
	var cands []cand
	lowest := map[int][]int{} // owner -> indexes in cands of its lowest free items seen, lowest last
	for i := in.tail; i >= in.cursor && len(cands) < (ownReserve+4)*len(owners)+64; i-- {
		if items[i].Status != ledger.ItemPending {
			if i == in.tail {
				in.tail--
			}
			continue
		}
		if !free(i) {
			continue
		}
		o := ring.ownerOf(i)
		lowest[o] = append(lowest[o], len(cands))
		cands = append(cands, cand{i, o})
	}
	skip := map[int]bool{}
	for o, ks := range lowest {
		if isAlive(owners[o]) {
			for _, k := range ks[max(0, len(ks)-ownReserve):] {
				skip[k] = true
			}
		}
	}
	var top, orphans []int64
	for k, c := range cands {
		if skip[k] {
			continue
		}
		top = append(top, j.Spec.RangeStart+int64(c.i))
		if !isAlive(owners[c.owner]) {
			orphans = append(orphans, j.Spec.RangeStart+int64(c.i))
		}
	}
	switch {
	case rank < len(top):
		in.idleSince = time.Time{}
		return top[rank], true
	case len(orphans) > 0:
		in.idleSince = time.Time{}
		return orphans[rank%len(orphans)], true
	case len(cands) > 0:
		// Only items reserved for running owners are left. An owner that
		// wanted one has had time to announce its lease: no instance sits
		// idle while an item is pending, so take one.
		if in.idleSince.IsZero() {
			in.idleSince = now
		}
		if now.Sub(in.idleSince) >= idleSteal {
			in.idleSince = time.Time{}
			return j.Spec.RangeStart + int64(cands[rank%len(cands)].i), true
		}
	}
	return 0, false
}

type slotKey struct {
	m string
	s int
}

// jobOwners is a job's planned instances in plan order (the owners of its
// items), their ring and each one's rank, for one plan.
type jobOwners struct {
	owners []slotKey
	rank   map[slotKey]int
	ring   *ownerRing
}

// ownersOf returns the job's owners under the plan with this hash and
// instances (the current plan or the previous one), cached per plan. s.mu
// must be held.
func (s *scheduler) ownersOf(job, hash string, insts []smartshare.Instance) *jobOwners {
	return s.owners.getOr(job+"\x00"+hash, 64, func() *jobOwners {
		jo := &jobOwners{rank: map[slotKey]int{}}
		var seeds []uint64
		for _, pi := range insts {
			if pi.Job != job {
				continue
			}
			k := slotKey{pi.Machine, pi.Slot}
			jo.rank[k] = len(jo.owners)
			jo.owners = append(jo.owners, k)
			seeds = append(seeds, ownerSeed(job, pi.Machine, pi.Slot))
		}
		jo.ring = s.ringFor(seeds)
		return jo
	})
}

// remoteView is what other machines' heartbeats say about one job: the
// items they lease, their live instances of it (and their planned ones while
// they have not announced this plan: those may be starting), and which
// machines are online. Every instance of the job asks for it on each item,
// and a wide job starts many at once, so it is cached until a heartbeat
// arrives, the plan changes, or remoteViewTTL passes (liveness is a matter
// of time).
type remoteView struct {
	plan   string
	gen    uint64
	at     time.Time
	leased map[int64]bool
	alive  map[slotKey]bool
	online []string
}

const remoteViewTTL = 100 * time.Millisecond

func (s *scheduler) remoteView(job, plan string, owners []slotKey, now time.Time) *remoteView {
	n := s.n
	gen := n.live.Gen()
	s.viewMu.Lock()
	if v, _ := s.views.get(job); v != nil && v.plan == plan && v.gen == gen && now.Sub(v.at) < remoteViewTTL && now.Sub(v.at) >= 0 {
		s.viewMu.Unlock()
		return v
	}
	s.viewMu.Unlock()
	me := n.id.String()
	v := &remoteView{plan: plan, gen: gen, at: now, leased: map[int64]bool{}, alive: map[slotKey]bool{}}
	planned := map[string][]slotKey{}
	for _, o := range owners {
		planned[o.m] = append(planned[o.m], o)
	}
	for _, m := range n.live.All() {
		id := m.Heartbeat.Machine
		if id == me {
			continue
		}
		if _, _, ok := n.liveness(id, now); !ok {
			s.leases.forget(id) // its leases lapse
			continue
		}
		v.online = append(v.online, id)
		if m.Heartbeat.PlanHash != plan {
			for _, o := range planned[id] {
				v.alive[o] = true
			}
		}
		for _, ri := range m.Heartbeat.Instances {
			if ri.Job != job {
				continue
			}
			if ri.Item >= 0 {
				v.leased[ri.Item] = true
			}
			if ri.Kind != kindFinished {
				v.alive[slotKey{id, int(ri.Slot)}] = true
			}
		}
	}
	s.viewMu.Lock()
	s.views.put(job, v, 64)
	s.viewMu.Unlock()
	return v
}

// idleSteal is how long an idle instance leaves items reserved for their
// running owners before it takes one itself.
const idleSteal = 2 * time.Second

// ownerGrace is how long after a plan change an instance leaves alone the
// items it took over from another instance: about the time a lease takes
// to reach every node in a heartbeat on a busy host.
const ownerGrace = time.Second

// ownerSeed is an instance's seed in rendezvous hashing.
// It is FNV-1a (64) of "job\x00machine\x00slot", computed without
// allocating: nextItem computes one per planned instance of the job.
func ownerSeed(job, machine string, slot int) uint64 {
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

// ownReserve is how many of its lowest free items a running owner keeps
// from thieves (see nextItem).
const ownReserve = 3

// ownerRing maps agenda items to owners by consistent hashing: each owner
// (a planned instance, by its seed) holds ringVNodes points on a ring, and an
// item belongs to the owner of the first point at or after the item's hash.
// Adding or removing an instance moves only about 1/n of the items, and a
// lookup is a binary search, so dispatch stays cheap for wide jobs.
type ownerRing struct {
	points []uint64
	owners []int32

	mu   sync.Mutex
	mine map[int][]int32 // rank -> its item indexes, ascending (see itemsOf)
	n    int             // the item count mine was computed for
}

// itemHash places item index i on the ring.
func itemHash(i int) uint64 { return mix64(uint64(i)*0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) }

// itemBuckets groups the item indexes 0..n-1 by the top bits of their ring
// hash, so the items on an arc of the ring are found without hashing every
// item: an owner's items are those on its arcs. Built once per item count.
type itemBuckets struct {
	shift uint
	start []int32 // bucket b holds order[start[b]:start[b+1]]
	order []int32
}

func newItemBuckets(n int) *itemBuckets {
	idx := make([]int32, n)
	for i := range idx {
		idx[i] = int32(i)
	}
	ib := &itemBuckets{}
	ib.order, ib.shift, ib.start = bucketByTopBits(idx, 2, func(i int32) uint64 { return itemHash(int(i)) })
	return ib
}

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
func (ib *itemBuckets) inRange(lo, hi uint64, loIncl bool, out []int32) []int32 {
	if hi < lo {
		return out
	}
	for b := lo >> ib.shift; ; b++ {
		for _, i := range ib.order[ib.start[b]:ib.start[b+1]] {
			if h := itemHash(int(i)); (h > lo || loIncl && h == lo) && h <= hi {
				out = append(out, i)
			}
		}
		if b == hi>>ib.shift {
			return out
		}
	}
}

// itemsOf returns the indexes (below n) of the items that rank owns on
// ring, ascending: exactly the i with ring.ownerOf(i) == rank.
func (s *scheduler) itemsOf(r *ownerRing, rank, n int) []int32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == n && r.mine != nil {
		if m, ok := r.mine[rank]; ok {
			return m
		}
	} else {
		r.n, r.mine = n, map[int][]int32{}
	}
	var out []int32
	if len(r.points) == 0 {
		out = make([]int32, n) // a ring without owners gives everything to rank 0
		for i := range out {
			out[i] = int32(i)
		}
		if rank != 0 {
			out = nil
		}
	} else {
		ib := s.bucketsFor(n)
		last := r.points[len(r.points)-1]
		for k, o := range r.owners {
			if int(o) != rank {
				continue
			}
			// ownerOf gives h to the first point >= h (wrapping to point
			// 0 past the last): point k owns (points[k-1], points[k]].
			if k > 0 {
				out = ib.inRange(r.points[k-1], r.points[k], false, out)
				continue
			}
			if last < math.MaxUint64 {
				out = ib.inRange(last, math.MaxUint64, false, out)
			}
			out = ib.inRange(0, r.points[0], true, out)
		}
		slices.Sort(out)
	}
	r.mine[rank] = out
	return out
}

// bucketsFor returns the item buckets of n items (cached: item hashes do
// not depend on the job, so jobs of one size share them).
func (s *scheduler) bucketsFor(n int) *itemBuckets {
	s.ringMu.Lock()
	defer s.ringMu.Unlock()
	return s.buckets.getOr(n, 16, func() *itemBuckets { return newItemBuckets(n) })
}

const ringVNodes = 16

func mix64(z uint64) uint64 {
	// splitmix64: cheap, and equal on every node.
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// newOwnerRing places ringVNodes points per seed and sorts them by (place,
// owner), in place in the ring's own two arrays: a counting pass by the top
// bits of the place into about one bucket per point, then an insertion sort
// within each bucket (places are uniform, so buckets hold one or two). Every
// node builds the ring of a wide job when it starts (32,000 points for 2,000
// instances), so it allocates just the ring and the bucket starts.
func newOwnerRing(seeds []uint64) *ownerRing {
	n := len(seeds) * ringVNodes
	r := &ownerRing{points: make([]uint64, n), owners: make([]int32, n)}
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

// ownerOf is the owner of item index i (an index into the seeds).
func (r *ownerRing) ownerOf(i int) int {
	if len(r.points) == 0 {
		return 0
	}
	h := itemHash(i)
	k := sort.Search(len(r.points), func(x int) bool { return r.points[x] >= h })
	if k == len(r.points) {
		k = 0
	}
	return int(r.owners[k])
}

// smallCache is a map that is emptied when it is full: the scheduler's
// caches hold a few entries for the current plan and jobs, and an entry is
// cheap to rebuild. The zero value is ready; callers lock.
type smallCache[K comparable, V any] struct{ m map[K]V }

func (c *smallCache[K, V]) get(k K) (V, bool) {
	v, ok := c.m[k]
	return v, ok
}

// getOr returns the value under k, building and storing it if missing.
func (c *smallCache[K, V]) getOr(k K, max int, build func() V) V {
	if v, ok := c.m[k]; ok {
		return v
	}
	v := build()
	c.put(k, v, max)
	return v
}

// put stores v under k, first emptying the cache if it holds max entries.
func (c *smallCache[K, V]) put(k K, v V, max int) {
	if c.m == nil || len(c.m) >= max {
		c.m = make(map[K]V)
	}
	c.m[k] = v
}

// ringFor returns the (cached) ring of a set of seeds.
func (s *scheduler) ringFor(seeds []uint64) *ownerRing {
	key := uint64(len(seeds))
	for _, sd := range seeds {
		key = mix64(key ^ sd)
	}
	s.ringMu.Lock()
	defer s.ringMu.Unlock()
	return s.rings.getOr(key, 64, func() *ownerRing { return newOwnerRing(seeds) })
}
