package sched

import (
	"slices"
	"sync"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/dispatch"
	"github.com/cshare/cshare/smartshare"
)

// nextItem picks the instance's next agenda item among the free ones:
// pending in the ledger, not leased by an online machine's heartbeat (nor
// released by one whose result this node may not have yet, see leases.go),
// not running or finished here. The choice is dispatch.Next's; this
// gathers its view under the scheduler's locks, with the caches below.
//
// An owner runs if its machine announces it, or has not announced this plan
// yet (it may be starting it); one whose machine announces this plan
// without it cannot run it, and one whose machine is offline is gone.
func (s *Scheduler) nextItem(in *instance) (int64, bool) {
	now := s.now()
	leased := map[int64]bool{} // this machine's leases; remote ones are in rv
	me := s.d.Machine
	self := dispatch.Slot{Machine: me, Slot: in.slot}
	alive := map[dispatch.Slot]bool{}
	s.mu.Lock()
	for _, o := range s.slots {
		if o.job != in.job {
			continue
		}
		alive[dispatch.Slot{Machine: me, Slot: o.slot}] = true
		if it, _ := o.current(); it >= 0 && o != in {
			leased[it] = true
		}
	}
	for _, r := range s.results[in.job] {
		if !r.Stopped { // a stopped run's item is back on the agenda
			leased[r.Item] = true
		}
	}
	jo := s.cache.ownersOf(in.job, s.plan.Hash, s.plan.Instances)
	myPlan := s.plan.Hash
	// The job's owners before they last changed matter only for
	// dispatch.PrevFor after the change (see dispatch.View.Prev).
	var prev *jobOwners
	var planAge time.Duration
	if mv, ok := s.moves[in.job]; ok {
		if planAge = now.Sub(mv.at); planAge < dispatch.PrevFor {
			if pj := s.cache.ownersOf(in.job, mv.hash, mv.insts); len(pj.Slots) > 0 {
				prev = pj
			}
		}
	}
	s.mu.Unlock()
	// The State as of the DAG that says which releases are in the
	// ledger: the snapshot taken under the log's lock.
	lg, unlock := s.d.Ledger.ReadLog()
	st := s.d.Ledger.Snapshot().State
	j := st.Jobs[in.job]
	if j == nil || j.State != ledger.JobActive || j.Items.Len() == 0 {
		unlock()
		return 0, false
	}
	jl := jobLeases{limit: claimLimit(ItemTimeout(st, j), s.d.Interval), items: j.Items, start: j.Spec.RangeStart}
	rv := s.cache.remoteView(in.job, myPlan, jo.Slots, s.placed.at(now), now, jl)
	for _, id := range rv.online {
		s.leases.released(id, in.job, lg.Has, leased)
	}
	unlock()
	v := dispatch.View{
		Items:      j.Items,
		RangeStart: j.Spec.RangeStart,
		Leased:     func(it int64) bool { return leased[it] || rv.leased[it] },
		Alive:      func(k dispatch.Slot) bool { return alive[k] || rv.alive[k] },
		Slot:       self,
		Owners:     jo.Owners,
	}
	if rank, ok := jo.Rank[self]; ok {
		v.Mine = s.cache.itemsOf(jo.ring, rank, j.Items.Len())
	}
	if prev != nil {
		v.Prev, v.PlanAge = prev.Owners, planAge
	}
	return dispatch.Next(v, &in.cursor, now)
}

// ownerMoves holds, per job, the plan under which the job last had other
// owners (instances) than it has now, and when this node's plan changed
// them: dispatch.View.Prev and PlanAge. A plan change that leaves a job's
// instances as they were (another job's change, a primary relabelled)
// changes nothing for it: it neither cuts short the grace of the items its
// owners took over at the change before, nor starts idle slots' clocks
// again. Entries go PrevFor after their change. Under the scheduler's mu.
type ownerMoves map[string]ownerMove

type ownerMove struct {
	hash  string                // the plan before the change
	insts []smartshare.Instance // its instances (shared, read only)
	at    time.Time
}

// update records the jobs whose owners differ between the plans old and
// cur, as cur becomes the plan at now.
func (m *ownerMoves) update(old, cur smartshare.Result, now time.Time) {
	if *m == nil {
		*m = ownerMoves{}
	}
	for job, mv := range *m {
		if now.Sub(mv.at) >= dispatch.PrevFor {
			delete(*m, job)
		}
	}
	before, after := jobSlots(old.Instances), jobSlots(cur.Instances)
	for job, sl := range before {
		if !slices.Equal(sl, after[job]) {
			(*m)[job] = ownerMove{hash: old.Hash, insts: old.Instances, at: now}
		}
	}
}

// jobSlots returns each job's instances in plan order.
func jobSlots(insts []smartshare.Instance) map[string][]dispatch.Slot {
	out := map[string][]dispatch.Slot{}
	for _, pi := range insts {
		out[pi.Job] = append(out[pi.Job], dispatch.Slot{Machine: pi.Machine, Slot: pi.Slot})
	}
	return out
}

// jobOwners is a job's owners under one plan, with the node's memo of
// their ring.
type jobOwners struct {
	*dispatch.Owners
	ring *ownerRing
}

// dispatchCache is nextItem's memo: the owners of each job under a plan,
// the remote view of each job, item buckets and owner rings.
type dispatchCache struct {
	owners  smallCache[string, *jobOwners] // by job and plan hash (under the scheduler's mu)
	viewMu  sync.Mutex
	views   smallCache[string, *remoteView] // by job
	ringMu  sync.Mutex
	buckets smallCache[int, *dispatch.Buckets] // by item count: they depend on nothing else (under ringMu)
	rings   smallCache[uint64, *ownerRing]     // consistent-hash rings by their seeds (under ringMu)

	peers  Peers
	leases *leaseBook
	me     string // this machine's ID
}

// ownersOf returns the job's owners under the plan with this hash and
// instances (the current plan or the previous one), cached per plan. The
// scheduler's mu must be held.
func (s *dispatchCache) ownersOf(job, hash string, insts []smartshare.Instance) *jobOwners {
	return s.owners.getOr(job+"\x00"+hash, 64, func() *jobOwners {
		var slots []dispatch.Slot
		for _, pi := range insts {
			if pi.Job == job {
				slots = append(slots, dispatch.Slot{Machine: pi.Machine, Slot: pi.Slot})
			}
		}
		r := s.ringFor(dispatch.Seeds(job, slots))
		return &jobOwners{Owners: dispatch.NewOwners(slots, r.Ring), ring: r}
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
	alive  map[dispatch.Slot]bool
	online []string
}

const remoteViewTTL = 100 * time.Millisecond

// jobLeases is what vets claims on a job's items beside the plan: the
// claim limit of its item timeout (claimLimit) and its items, whose runs
// in the ledger start a claim afresh. Read from a snapshot.
type jobLeases struct {
	limit time.Duration
	items ledger.ItemList
	start int64 // the item number of items.At(0)
}

// attempts returns the runs the ledger knows of item, -1 if it is no item
// of the job.
func (jl jobLeases) attempts(item int64) int64 {
	if i := item - jl.start; i >= 0 && i < int64(jl.items.Len()) {
		return jl.items.At(int(i)).Attempts
	}
	return -1
}

// remoteView returns the job's remote view under plan, whose owners are
// the job's planned instances; pl and jl vet the lease claims (see
// placements, jobLeases). The caller holds the ledger's read lock.
func (s *dispatchCache) remoteView(job, plan string, owners []dispatch.Slot, pl placements, now time.Time, jl jobLeases) *remoteView {
	gen := s.peers.Gen()
	s.viewMu.Lock()
	if v, _ := s.views.get(job); v != nil && v.plan == plan && v.gen == gen && now.Sub(v.at) < remoteViewTTL && now.Sub(v.at) >= 0 {
		s.viewMu.Unlock()
		return v
	}
	s.viewMu.Unlock()
	me := s.me
	v := &remoteView{plan: plan, gen: gen, at: now, leased: map[int64]bool{}, alive: map[dispatch.Slot]bool{}}
	planned := map[string][]dispatch.Slot{}
	for _, o := range owners {
		planned[o.Machine] = append(planned[o.Machine], o)
	}
	for _, m := range s.peers.All() {
		id := m.Heartbeat.Machine
		if id == me {
			continue
		}
		if _, _, ok := s.peers.Liveness(id, now); !ok {
			s.leases.forget(id) // its leases lapse
			continue
		}
		v.online = append(v.online, id)
		if m.Heartbeat.PlanHash != plan {
			for _, o := range planned[id] {
				v.alive[o] = true
			}
		}
		for _, ri := range leaseClaims(m.Heartbeat) {
			if ri.Job != job {
				continue
			}
			counts := ri.Item < 0 || s.leases.counts(id, ri, pl, now, jl.limit, jl.attempts(ri.Item))
			if ri.Item >= 0 && counts {
				v.leased[ri.Item] = true
			}
			// A slot whose claim no longer counts (it outlived the item
			// timeout, or the plan never placed it) is not a running owner
			// either: its items are orphans, which any running owner
			// takes. Counted alive, it would keep its items reserved, and
			// an item it backs up would wait for it forever.
			if ri.Kind != KindFinished && counts {
				v.alive[dispatch.Slot{Machine: id, Slot: int(ri.Slot)}] = true
			}
		}
	}
	s.viewMu.Lock()
	s.views.put(job, v, 64)
	s.viewMu.Unlock()
	return v
}

// ownerRing is a dispatch.Ring with the node's memo of each owner's items
// (dispatch.Ring.ItemsOf costs a walk of the owner's arcs; nextItem asks
// for them on every item).
type ownerRing struct {
	*dispatch.Ring

	mu   sync.Mutex
	mine map[int][]int32 // rank -> its item indexes, ascending
	n    int             // the item count mine was computed for
}

// itemsOf returns the indexes (below n) of the items that rank owns on
// r, ascending (memoised).
func (s *dispatchCache) itemsOf(r *ownerRing, rank, n int) []int32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == n && r.mine != nil {
		if m, ok := r.mine[rank]; ok {
			return m
		}
	} else {
		r.n, r.mine = n, map[int][]int32{}
	}
	m := r.Ring.ItemsOf(s.bucketsFor(n), rank)
	r.mine[rank] = m
	return m
}

// bucketsFor returns the item buckets of n items (cached: item hashes do
// not depend on the job, so jobs of one size share them).
func (s *dispatchCache) bucketsFor(n int) *dispatch.Buckets {
	s.ringMu.Lock()
	defer s.ringMu.Unlock()
	return s.buckets.getOr(n, 16, func() *dispatch.Buckets { return dispatch.NewBuckets(n) })
}

// ringFor returns the (cached) ring of a set of seeds.
func (s *dispatchCache) ringFor(seeds []uint64) *ownerRing {
	key := uint64(len(seeds))
	for _, sd := range seeds {
		key = ringKeyMix(key ^ sd)
	}
	s.ringMu.Lock()
	defer s.ringMu.Unlock()
	return s.rings.getOr(key, 64, func() *ownerRing { return &ownerRing{Ring: dispatch.NewRing(seeds)} })
}

// ringKeyMix is splitmix64's finaliser, to key the ring cache by seeds.
func ringKeyMix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
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
