package replica

import (
	"context"
	"sort"

	"github.com/ipfs/go-cid"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/store"
)

// Writing entries of this machine, importing, and the membership questions
// p2p asks (p2p.Membership).

// Write signs a new entry with this machine's key, stores it durably, folds
// it, and announces the new heads with the entry pushed inline when small.
// The error is the fold's verdict when the entry had no effect (it stays in
// the DAG, as every entry does); the entry is returned then too.
func (r *Replica) Write(ctx context.Context, kind string, payload any) (*ledger.Entry, error) {
	return r.write(ctx, kind, func(heads []cid.Cid) (any, error) { return payload, nil })
}

// write is Write with the payload made by payloadAt from the Log as the
// parents see it (under the read lock; heads are the parents).
func (r *Replica) write(ctx context.Context, kind string, payloadAt func(heads []cid.Cid) (any, error)) (*ledger.Entry, error) {
	r.writeMu.Lock()
	defer r.writeMu.Unlock()
	// Every entry folded so far is durable before this one names it: a
	// pushed entry is folded before its write ends (see takePushed).
	if r.Capped(r.signer.ID()) {
		return nil, ErrCapped // cap.go
	}
	r.persisting.Lock()
	r.mu.RLock()
	org := r.lg.Org()
	heads, clock := r.parentsLocked()
	payload, err := payloadAt(heads)
	r.mu.RUnlock()
	r.persisting.Unlock()
	if err != nil {
		return nil, err
	}
	if kind == ledger.KindGenesis {
		org, heads, clock = "", nil, 0
	}
	e, err := r.signer.Sign(org, kind, payload, heads, clock, r.cfg.Now().UnixMilli())
	if err != nil {
		return nil, err
	}
	if err := r.st.PutBlocks([]store.Block{{CID: e.CID(), Data: e.Bytes()}}); err != nil {
		return nil, err
	}
	r.mu.Lock()
	errs, err := r.lg.AddBatch([]*ledger.Entry{e})
	r.publishLocked()
	r.lastAdded = r.cfg.Now()
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	r.notify([]*ledger.Entry{e})
	r.announce(ctx, e)
	return e, errs[0]
}

// DryRun applies a would-be entry of this machine to a copy of the State and
// returns the fold's verdict; nothing is written.
func (r *Replica) DryRun(kind string, payload any) error {
	r.mu.RLock()
	st := r.snap.Load().State.Thaw() // copies only what the fold writes
	heads, clock := r.parentsLocked()
	org := r.lg.Org()
	r.mu.RUnlock()
	e, err := r.signer.Sign(org, kind, payload, heads, clock, r.cfg.Now().UnixMilli())
	if err != nil {
		return err
	}
	return ledger.Apply(st, e)
}

// parentsLocked picks the parents of a new entry: the heads, at most
// ledger.MaxParents of them (the newest first; the rest stay heads and are
// named by a later entry), and the largest clock among them. r.mu must be
// held.
func (r *Replica) parentsLocked() ([]cid.Cid, uint64) {
	heads, clock := r.lg.Heads()
	if len(heads) <= ledger.MaxParents {
		return heads, clock
	}
	sort.Slice(heads, func(i, j int) bool {
		a, b := r.lg.Get(heads[i]), r.lg.Get(heads[j])
		if a.Clock != b.Clock {
			return a.Clock > b.Clock
		}
		return heads[i].KeyString() < heads[j].KeyString()
	})
	heads = heads[:ledger.MaxParents]
	clock = 0
	for _, h := range heads {
		clock = max(clock, r.lg.Get(h).Clock)
	}
	return heads, clock
}

// Import stores entries durably, then folds them (those whose parents are
// missing wait), as if fetched from a peer. The entries must come from
// ledger.Decode or a Signer. It is how tests and benchmarks build large
// ledgers.
func (r *Replica) Import(es []*ledger.Entry) error {
	const chunk = 4096
	for len(es) > 0 {
		k := min(len(es), chunk)
		blocks := make([]store.Block, k)
		for i, e := range es[:k] {
			blocks[i] = store.Block{CID: e.CID(), Data: e.Bytes()}
		}
		if err := r.st.PutBlocks(blocks); err != nil {
			return err
		}
		r.add("", es[:k])
		es = es[k:]
	}
	return nil
}
