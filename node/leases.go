package node

import (
	"sync"

	"github.com/ipfs/go-cid"

	"github.com/cshare/cshare/p2p"
)

// Agenda leases (DESIGN §10): a machine holds the items its heartbeat
// announces, running or finished with the result on its way into the
// ledger. A lease must not lapse before this node can see the result: a
// machine drops an item from its heartbeat once the result entry is written
// on its side, but the entry reaches other nodes a little later (gossip,
// then a fetch), and an item that looks pending in the meantime would be run
// again. So an item dropped from a machine's heartbeat stays leased here
// until this node has every ledger head that heartbeat named (those heads
// include the result entry), or until the machine goes offline.

type leaseKey struct {
	job  string
	item int64
}

type releasedLease struct {
	key   leaseKey
	heads []cid.Cid
}

// maxReleased bounds the released leases kept per machine.
const maxReleased = 1 << 14

type leaseBook struct {
	mu   sync.Mutex
	held map[string]map[leaseKey]bool // machine -> items in its latest heartbeat
	gone map[string][]releasedLease   // machine -> items it dropped, with the heads it named then
}

// observe records an accepted heartbeat of another machine.
func (b *leaseBook) observe(hb p2p.Heartbeat) {
	cur := make(map[leaseKey]bool, len(hb.Instances))
	for _, ri := range hb.Instances {
		if ri.Item >= 0 {
			cur[leaseKey{ri.Job, ri.Item}] = true
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held == nil {
		b.held, b.gone = map[string]map[leaseKey]bool{}, map[string][]releasedLease{}
	}
	var heads []cid.Cid
	for k := range b.held[hb.Machine] {
		if cur[k] {
			continue
		}
		if heads == nil {
			heads = make([]cid.Cid, 0, len(hb.Heads))
			for _, h := range hb.Heads {
				if c, err := cid.Decode(h); err == nil {
					heads = append(heads, c)
				}
			}
		}
		b.gone[hb.Machine] = append(b.gone[hb.Machine], releasedLease{key: k, heads: heads})
	}
	if g := b.gone[hb.Machine]; len(g) > maxReleased {
		b.gone[hb.Machine] = append([]releasedLease(nil), g[len(g)-maxReleased:]...)
	}
	b.held[hb.Machine] = cur
}

// released adds to leased the items of job that machine dropped from its
// heartbeat and whose result this node may not have yet: has reports
// whether a ledger entry is here. Released leases whose heads are all here
// are forgotten.
func (b *leaseBook) released(machine, job string, has func(cid.Cid) bool, leased map[int64]bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	g := b.gone[machine]
	keep := g[:0]
	for _, r := range g {
		all := true
		for _, h := range r.heads {
			if !has(h) {
				all = false
				break
			}
		}
		if all {
			continue
		}
		keep = append(keep, r)
		if r.key.job == job {
			leased[r.key.item] = true
		}
	}
	for i := len(keep); i < len(g); i++ {
		g[i] = releasedLease{}
	}
	if len(keep) == 0 {
		delete(b.gone, machine)
	} else {
		b.gone[machine] = keep
	}
}

// holder returns the machine whose latest heartbeat holds item of job, or
// "" (the smallest ID if several do, during a brief disagreement).
func (b *leaseBook) holder(job string, item int64) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var who string
	for m, held := range b.held {
		if held[leaseKey{job, item}] && (who == "" || m < who) {
			who = m
		}
	}
	return who
}

// forget drops what is known of an offline machine's leases: they lapse.
func (b *leaseBook) forget(machine string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.held, machine)
	delete(b.gone, machine)
}
