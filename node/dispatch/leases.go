package dispatch

import (
	"cmp"
	"slices"
	"time"

	"github.com/ipfs/go-cid"
)

// Agenda leases (docs/design.md §9): a machine holds the items its heartbeat
// announces, running or finished with the result on its way into the
// ledger. A lease must not lapse before this node can see the result: a
// machine drops an item from its heartbeat once the result entry is written
// on its side, but the entry reaches other nodes a little later (gossip,
// then a fetch), and an item that looks pending in the meantime would be run
// again. So an item dropped from a machine's heartbeat stays leased here
// until this node has every ledger head that heartbeat named (those heads
// include the result entry), or until the machine goes offline.

// Lease is one item of one job.
type Lease struct {
	Job  string
	Item int64
}

type releasedLease struct {
	key   Lease
	heads []cid.Cid
}

// maxReleased bounds the released leases kept per machine.
const maxReleased = 1 << 14

// Leases is what other machines' heartbeats say they hold, and what they
// released: the lease book as data. The zero value is empty and ready. Its
// methods change it in place and do nothing else; a caller shared by
// goroutines locks around them.
type Leases struct {
	held map[string]map[Lease]bool  // machine -> items in its latest heartbeat
	gone map[string][]releasedLease // machine -> items it dropped, with the heads it named then
	// machine -> when this node first saw each of its claims and whether
	// the plan placed it then (see Counts): those it holds, and those it
	// dropped before the plan ever placed them.
	claims map[string]map[Lease]claim
}

// claim is what Counts knows of one claim of one machine: when it was
// first seen, whether the plan placed it, the item's runs in the ledger
// then (-1: not known yet), and whether it outlived its item timeout.
type claim struct {
	since    time.Time
	vetted   bool
	attempts int64
	lapsed   bool
}

// Observe records another machine's heartbeat: the items it holds (those
// of its instances with an item) and the ledger heads it names.
func (l *Leases) Observe(machine string, held []Lease, heads []string) {
	cur := make(map[Lease]bool, len(held))
	for _, k := range held {
		cur[k] = true
	}
	if l.held == nil {
		l.held, l.gone = map[string]map[Lease]bool{}, map[string][]releasedLease{}
	}
	var dropped []Lease
	for k := range l.held[machine] {
		if !cur[k] {
			dropped = append(dropped, k)
		}
	}
	if len(dropped) > 0 {
		// In order, so that which ones maxReleased keeps is no matter of
		// map order.
		slices.SortFunc(dropped, func(a, b Lease) int {
			return cmp.Or(cmp.Compare(a.Job, b.Job), cmp.Compare(a.Item, b.Item))
		})
		hs := make([]cid.Cid, 0, len(heads))
		for _, h := range heads {
			if c, err := cid.Decode(h); err == nil {
				hs = append(hs, c)
			}
		}
		for _, k := range dropped {
			l.gone[machine] = append(l.gone[machine], releasedLease{key: k, heads: hs})
		}
	}
	if g := l.gone[machine]; len(g) > maxReleased {
		l.gone[machine] = append([]releasedLease(nil), g[len(g)-maxReleased:]...)
	}
	l.held[machine] = cur
	// A dropped claim the plan placed is forgotten (a new claim on the item
	// starts afresh); one it never placed, or one that outlived its item
	// timeout, is remembered, so that dropping and claiming an item again
	// buys no new grace. Past maxReleased of those the machine loses that
	// memory (sets only: no map order).
	cs := l.claims[machine]
	doubts := 0
	for k, c := range cs {
		switch {
		case cur[k]:
		case c.vetted && !c.lapsed:
			delete(cs, k)
		default:
			doubts++
		}
	}
	if doubts > maxReleased {
		for k, c := range cs {
			if !cur[k] && (!c.vetted || c.lapsed) {
				delete(cs, k)
			}
		}
	}
}

// Counts reports whether machine's claim on k (an item its heartbeat
// holds) counts at now, and records it: planned reports whether the plan
// places that claim (this node's plan gives the machine an instance of the
// job in the claim's slot, or gave it one in its previous plan shortly
// before). A claim counts once the plan has placed it while this node saw
// it held, until it is dropped, and for grace after this node first saw it
// (an honest machine may follow a plan this node has not computed yet). A
// machine that claims items the plan never gives it holds them for grace
// only, even if it drops and claims them again: they go elsewhere. An
// honest instance the plan stops finishes its item under a vetted lease.
//
// With an item timeout (limit, the job's timeout plus one heartbeat
// interval; 0 for none), no claim counts once limit has passed since it
// was first seen: an honest machine stops its run at the timeout and its
// claim ends with the result, so only a machine that claims an item and
// never finishes it holds it that long, and after that the item goes
// elsewhere. Such a claim stays lapsed though it is dropped and made
// again, until the item's runs in the ledger (attempts; -1: not known
// here) change: a new attempt starts a new claim.
func (l *Leases) Counts(machine string, k Lease, planned bool, now time.Time, grace, limit time.Duration, attempts int64) bool {
	if l.claims == nil {
		l.claims = map[string]map[Lease]claim{}
	}
	cs := l.claims[machine]
	if cs == nil {
		cs = map[Lease]claim{}
		l.claims[machine] = cs
	}
	c, ok := cs[k]
	switch {
	case !ok:
		c = claim{since: now, attempts: attempts}
	case attempts >= 0 && c.attempts < 0:
		c.attempts = attempts
	case attempts >= 0 && c.attempts != attempts:
		// The item ran (and ended) since this claim was first seen: a
		// claim of the next attempt.
		c = claim{since: now, attempts: attempts}
	}
	c.vetted = c.vetted || planned
	if limit > 0 && now.Sub(c.since) >= limit {
		c.lapsed = true
	}
	cs[k] = c
	if c.lapsed {
		return false
	}
	return c.vetted || now.Sub(c.since) < grace
}

// Released adds to leased the items of job that machine dropped from its
// heartbeat and whose result this node may not have yet: has reports
// whether a ledger entry is here. Released leases whose heads are all here
// are forgotten.
func (l *Leases) Released(machine, job string, has func(cid.Cid) bool, leased map[int64]bool) {
	g := l.gone[machine]
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
		if r.key.Job == job {
			leased[r.key.Item] = true
		}
	}
	for i := len(keep); i < len(g); i++ {
		g[i] = releasedLease{}
	}
	if len(keep) == 0 {
		delete(l.gone, machine)
	} else {
		l.gone[machine] = keep
	}
}

// Holder returns the machine whose latest heartbeat holds item of job, or
// "" (the smallest ID if several do, during a brief disagreement).
func (l *Leases) Holder(job string, item int64) string {
	var who string
	for m, held := range l.held {
		if held[Lease{job, item}] && (who == "" || m < who) {
			who = m
		}
	}
	return who
}

// Forget drops what is known of an offline machine's leases: they lapse.
func (l *Leases) Forget(machine string) {
	delete(l.held, machine)
	delete(l.gone, machine)
	delete(l.claims, machine)
}
