package replica

import (
	"sort"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/ledger"
)

// The serving side of sync (p2p.SyncSource, p2p.SyncHorizon): what this
// replica answers a peer's fetch with.

// SyncOrg is the org of the ledger ("" before genesis): p2p.SyncSource.
func (r *Replica) SyncOrg() string { return r.Org() }

// Collect returns the raw entries reachable back from want (the heads when
// want is empty), including want, skipping those with clock <= floor, in the
// total order, at most limit of them: p2p.SyncSource.
func (r *Replica) Collect(want []cid.Cid, floor uint64, limit int) [][]byte {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if len(want) == 0 {
		want, _ = r.lg.Heads()
	}
	return r.collectLocked(want, floor, limit)
}

// Horizon is, for a removed or rejected machine p, the entry that removed
// or rejected it (last): such a machine is served only that entry and its
// ancestors (p2p.SyncHorizon). out is false for anyone else; true with an
// undefined CID when the entry is not known (refuse).
func (r *Replica) Horizon(p peer.ID) (last cid.Cid, out bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	m := r.lg.State().Machines[p.String()]
	if m == nil || (m.Status != ledger.MachineRemoved && m.Status != ledger.MachineRejected) {
		return cid.Undef, false
	}
	if k := len(m.History); k > 0 {
		if c, err := cid.Decode(m.History[k-1].Entry); err == nil && r.lg.Has(c) {
			return c, true
		}
	}
	return cid.Undef, true
}

// IsFormer reports whether p is a removed or rejected machine of the org
// (p2p.Former).
func (r *Replica) IsFormer(p peer.ID) bool {
	_, out := r.Horizon(p)
	return out
}

// CollectUpTo is Collect for a peer whose horizon is last: only last and
// its ancestors; want (last when empty) is cut to those
// (p2p.SyncHorizon).
func (r *Replica) CollectUpTo(last cid.Cid, want []cid.Cid, floor uint64, limit int) [][]byte {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if !r.lg.Has(last) {
		return nil
	}
	if len(want) == 0 {
		return r.collectLocked([]cid.Cid{last}, floor, limit)
	}
	// The ancestors of last (and last): a wanted entry among them leads
	// only to them.
	below := map[string]bool{}
	stack := []cid.Cid{last}
	for len(stack) > 0 {
		c := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if below[c.KeyString()] {
			continue
		}
		below[c.KeyString()] = true
		if e := r.lg.Get(c); e != nil {
			stack = append(stack, e.Parents...)
		}
	}
	in := want[:0:0]
	for _, c := range want {
		if below[c.KeyString()] {
			in = append(in, c)
		}
	}
	if len(in) == 0 {
		return nil
	}
	return r.collectLocked(in, floor, limit)
}

// collectLocked is Collect's walk from want, under the read lock.
func (r *Replica) collectLocked(want []cid.Cid, floor uint64, limit int) [][]byte {
	seen := map[string]bool{}
	var found []*ledger.Entry
	stack := append([]cid.Cid(nil), want...)
	for len(stack) > 0 && len(found) < limit {
		c := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		k := c.KeyString()
		if seen[k] {
			continue
		}
		seen[k] = true
		e := r.lg.Get(c)
		if e == nil {
			continue
		}
		found = append(found, e)
		for _, p := range e.Parents {
			if pe := r.lg.Get(p); pe != nil && pe.Clock > floor {
				stack = append(stack, p)
			}
		}
	}
	sort.Slice(found, func(i, j int) bool { return found[i].Key().Less(found[j].Key()) })
	out := make([][]byte, len(found))
	for i, e := range found {
		out[i] = e.Bytes()
	}
	return out
}
