package node

import (
	"sync"

	"github.com/ipfs/go-cid"

	"github.com/cshare/cshare/node/config"
	"github.com/cshare/cshare/node/dispatch"
	"github.com/cshare/cshare/p2p"
)

// leaseBook is other machines' agenda leases, held and released
// (dispatch.Leases says when a released one lapses), under a mutex.
type leaseBook struct {
	mu sync.Mutex
	l  dispatch.Leases
}

// leaseClaims are the instances of a heartbeat that may hold a lease: the
// first maxFinishedInBeat finished items (whose result is on its way; a
// node lists no more), and one running instance per slot the machine has
// (0 <= slot < its total slots, at most config.MaxConcurrentJobsLimit; the
// first instance listed in a slot). A machine that claims items in slots
// it does not have, several in one slot, or more finished items than a
// node lists, holds nothing by those claims: the items go elsewhere. (A
// machine that holds an item in a slot it has and never finishes it holds
// that item until it goes offline or is removed.)
func leaseClaims(hb p2p.Heartbeat) []p2p.RunningInstance {
	out := make([]p2p.RunningInstance, 0, len(hb.Instances))
	taken := map[int64]bool{}
	slots := min(hb.Total.Slots, config.MaxConcurrentJobsLimit)
	finished := 0
	for _, ri := range hb.Instances {
		if ri.Kind == kindFinished {
			if finished++; finished > maxFinishedInBeat {
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

// observe records an accepted heartbeat of another machine.
func (b *leaseBook) observe(hb p2p.Heartbeat) {
	held := make([]dispatch.Lease, 0, len(hb.Instances))
	for _, ri := range leaseClaims(hb) {
		if ri.Item >= 0 {
			held = append(held, dispatch.Lease{Job: ri.Job, Item: ri.Item})
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.l.Observe(hb.Machine, held, hb.Heads)
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
