package sched

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/cshare/cshare/node/config"
	"github.com/cshare/cshare/node/dispatch"
	"github.com/cshare/cshare/p2p"
	"github.com/cshare/cshare/smartshare"
)

// leaseBook is other machines' agenda leases, held and released
// (dispatch.Leases says when a released one lapses), under a mutex.
type leaseBook struct {
	mu sync.Mutex
	l  dispatch.Leases
}

// leaseClaims are the instances of a heartbeat that may hold a lease: the
// first MaxFinishedInBeat finished items (whose result is on its way; a
// node lists no more), and one running instance per slot the machine has
// (0 <= slot < its total slots, at most config.MaxConcurrentJobsLimit; the
// first instance listed in a slot). A machine that claims items in slots
// it does not have, several in one slot, or more finished items than a
// node lists, holds nothing by those claims: the items go elsewhere. A
// claim the plan does not place lapses after leaseGrace (see
// placements.counts). A machine that holds an item the plan gave it and
// never finishes it holds that item until it goes offline or is removed,
// or, when the job has an item timeout, for the timeout plus one heartbeat
// interval (claimLimit).
func leaseClaims(hb p2p.Heartbeat) []p2p.RunningInstance {
	out := make([]p2p.RunningInstance, 0, len(hb.Instances))
	taken := map[int64]bool{}
	slots := min(hb.Total.Slots, config.MaxConcurrentJobsLimit)
	finished := 0
	for _, ri := range hb.Instances {
		if ri.Kind == KindFinished {
			if finished++; finished > MaxFinishedInBeat {
				continue
			}
		} else {
			if ri.Slot < 0 || ri.Slot >= slots || taken[ri.Slot] {
				continue
			}
			taken[ri.Slot] = true
		}
		out = append(out, ri)
	}
	return out
}

// observe records an accepted heartbeat of another machine, vetting its
// claims against the plan as it is now (pl, at now).
func (b *leaseBook) observe(hb p2p.Heartbeat, pl placements, now time.Time) {
	claims := leaseClaims(hb)
	held := make([]dispatch.Lease, 0, len(claims))
	for _, ri := range claims {
		if ri.Item >= 0 {
			held = append(held, dispatch.Lease{Job: ri.Job, Item: ri.Item})
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.l.Observe(hb.Machine, held, hb.Heads)
	for _, ri := range claims {
		if ri.Item >= 0 {
			b.l.Counts(hb.Machine, dispatch.Lease{Job: ri.Job, Item: ri.Item}, pl.places(hb.Machine, ri), now, pl.grace, 0, -1)
		}
	}
}

// counts reports whether machine's claim ri (one of leaseClaims) holds its
// item now (see dispatch.Leases.Counts): limit is the job's claimLimit,
// attempts the item's runs in the ledger.
func (b *leaseBook) counts(machine string, ri p2p.RunningInstance, pl placements, now time.Time, limit time.Duration, attempts int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.l.Counts(machine, dispatch.Lease{Job: ri.Job, Item: ri.Item}, pl.places(machine, ri), now, pl.grace, limit, attempts)
}

// claimLimit is how long any machine's claim on an item of a job with item
// timeout d counts here: d plus one heartbeat interval (this node's), so
// that a machine that claims an item in its heartbeats and never finishes
// it holds it no longer (0: no limit).
func claimLimit(d, interval time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return d + interval
}

// released adds to leased the items of job that machine released and
// whose result this node may not have yet (has reports whether a ledger
// entry is here).
func (b *leaseBook) released(machine, job string, has func(cid.Cid) bool, leased map[int64]bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.l.Released(machine, job, has, leased)
}

// holder returns the machine whose latest heartbeat holds item of job, or
// "" (the smallest ID if several do).
func (b *leaseBook) holder(job string, item int64) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.l.Holder(job, item)
}

// forget drops what is known of an offline machine's leases: they lapse.
func (b *leaseBook) forget(machine string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.l.Forget(machine)
}

// placement is an instance of a job in a slot of a machine, as a plan
// places it; slot -1 stands for any slot of the machine (a finished item's
// claim names none).
type placement struct {
	machine, job string
	slot         int64
}

// placements are where this node's plan puts instances, and its previous
// plan within grace of the change (nil otherwise), against which it vets
// other machines' lease claims: a claim counts if the plan placed it while
// it was held, or for grace after it was first seen (dispatch.Leases.Counts).
// The maps are shared (planPlaces): read only.
type placements struct {
	cur, prev map[placement]bool
	grace     time.Duration
}

// places reports whether the plans place machine's claim ri.
func (p placements) places(machine string, ri p2p.RunningInstance) bool {
	k := placement{machine: machine, job: ri.Job, slot: ri.Slot}
	if ri.Kind == KindFinished {
		k.slot = -1
	}
	return p.cur[k] || p.prev[k]
}

// places holds where the plans put instances (planPlaces).
type places struct {
	placed   atomic.Pointer[planPlaces]
	interval time.Duration // the heartbeat interval
}

// leaseGrace is how long a lease claim the plan does not place counts: a
// machine may follow a plan this node has not computed yet (a heartbeat or
// ledger entry away), or take an item under the plan this node just left.
func (p *places) leaseGrace() time.Duration { return max(3*p.interval, 3*time.Second) }

// planPlaces is where the current plan puts instances, where the one
// before did, and when the plan changed: published by reconcile, read
// without the scheduler's lock (heartbeats are vetted on arrival).
type planPlaces struct {
	cur, prev map[placement]bool
	at        time.Time
}

// publish records plan's placements, as it becomes the plan at now.
// The scheduler's mu must be held (reconcile).
func (p *places) publish(plan smartshare.Result, now time.Time) {
	pp := &planPlaces{cur: placedBy(plan.Instances), at: now}
	if old := p.placed.Load(); old != nil {
		pp.prev = old.cur
	}
	p.placed.Store(pp)
}

// at returns the placements to vet claims against at now.
func (p *places) at(now time.Time) placements {
	pl := placements{grace: p.leaseGrace()}
	if pp := p.placed.Load(); pp != nil {
		pl.cur = pp.cur
		if now.Sub(pp.at) < pl.grace {
			pl.prev = pp.prev
		}
	}
	return pl
}

// placedBy returns the placements of a plan's instances.
func placedBy(insts []smartshare.Instance) map[placement]bool {
	m := make(map[placement]bool, 2*len(insts))
	for _, pi := range insts {
		m[placement{pi.Machine, pi.Job, int64(pi.Slot)}] = true
		m[placement{pi.Machine, pi.Job, -1}] = true
	}
	return m
}
