package ledger

import (
	"fmt"

	"github.com/ipfs/go-cid"
)

// Compaction (docs/design.md §5.6, §7.1): a node keeps in memory only the
// entries from a barrier on; those below live in its store. These are what
// the replica needs to start a Log again at a later barrier of its chain
// (NewLogAt with AtBarrier's State and the entries After it), to know what
// to move to the store's history (Before), and to link a late entry whose
// parents are below the start (LinkBelow).

// Start is the barrier this Log started at (NewLogAt), or a zero Barrier
// for a Log started at the genesis.
func (l *Log) Start() Barrier {
	if t := l.bar.baseTop; t != nil {
		return Barrier{Entry: t.e, Depth: int(l.bar.baseDepth)}
	}
	return Barrier{}
}

// ChainAt is the barrier of the chain at depth, or nil when the chain has
// none there that this Log holds (below its start, or deeper than the top).
func (l *Log) ChainAt(depth int) *Entry {
	b := &l.bar
	if depth == int(b.baseDepth) && b.baseTop != nil {
		return b.baseTop.e
	}
	i := depth - int(b.baseDepth) - 1
	if i < 0 || i >= len(b.chain) {
		return nil
	}
	return b.chain[i].e
}

// barrierPos is the position of barrier c in order, or an error.
func (l *Log) barrierPos(c *Entry) (int, error) {
	n := l.nodes[c.key.CID]
	if n == nil || n.seg == tailSeg || l.bar.depth[n] != n.seg {
		return 0, fmt.Errorf("ledger: %s is not a barrier", c.CID())
	}
	return l.posOf(n), nil
}

// After are the entries that sort after barrier c, in total order.
func (l *Log) After(c *Entry) ([]*Entry, error) {
	pos, err := l.barrierPos(c)
	if err != nil {
		return nil, err
	}
	out := make([]*Entry, 0, len(l.order)-pos-1)
	for _, n := range l.order[pos+1:] {
		out = append(out, n.e)
	}
	return out, nil
}

// Before are the CIDs of the entries of this Log that sort before barrier
// c (its ancestors), in total order.
func (l *Log) Before(c *Entry) ([]cid.Cid, error) {
	pos, err := l.barrierPos(c)
	if err != nil {
		return nil, err
	}
	out := make([]cid.Cid, pos)
	for i, n := range l.order[:pos] {
		out[i] = n.e.cid
	}
	return out, nil
}

// LinkBelow makes entries that sort below this Log's start (ancestors of
// the barrier it started at, read back from the store) known as parents, so
// that a late entry naming them links: it sorts after the start as it
// would on a node holding all of history (it is no ancestor of the start),
// and folds the same. They take no place in the order, the heads or the
// count of entries. Give them ancestors first: each is linked to those of
// its parents the Log knows (an entry linked before without some of its
// parents gets those now). It is an error on a Log started at the genesis.
func (l *Log) LinkBelow(es []*Entry) error {
	if l.bar.baseTop == nil {
		return fmt.Errorf("ledger: LinkBelow on a log that holds all of history")
	}
	for _, e := range es {
		if e == nil {
			continue
		}
		if n := l.nodes[e.key.CID]; n != nil {
			if n.seg <= l.bar.baseDepth && len(n.parents) < len(e.Parents) {
				l.relinkBelow(n)
			}
			continue
		}
		org := e.Org
		if e.Kind == KindGenesis {
			org = e.cid.String()
		}
		if org != l.org || !e.key.Less(l.bar.baseTop.key) {
			return fmt.Errorf("%w: entry %s is not below this log's start", ErrMalformed, e.CID())
		}
		n := &node{e: e, key: e.key, seg: l.bar.baseDepth, applied: true}
		for _, p := range e.Parents {
			if pn := l.nodes[p.KeyString()]; pn != nil {
				n.parents = append(n.parents, pn)
			}
		}
		l.nodes[n.key.CID] = n
		l.noteBelowCheckpoint(n)
	}
	return nil
}

// LinkPruned makes an entry below this Log's start that the node pruned
// from its store known as a parent, by what pruning kept of it: its CID
// and clock. A late entry naming it then links, sorts after the start and
// folds exactly as on a node that still holds it and links it with
// LinkBelow: there too it is a node below the start, outside the order,
// the heads and the count, whose effects are in the start's State. Here
// it is a stub (PrunedStub): no parents (nothing after the start reaches
// below it), filed under no author, never returned by Get or Entries, so
// never served or exported; Has reports it. A pruned entry is never a
// checkpoint or a revocation (pruning keeps those), so the chain and
// "revocation wins" never need more of it. AtBarrier names stubs among
// the ancestors later entries name, so a Log started again at a later
// barrier (NewLogAt) holds them as a Log there holds the real entries. It
// is an error on a Log started at the genesis, or for a key that does not
// sort below the start.
func (l *Log) LinkPruned(c cid.Cid, clock uint64) error {
	if l.bar.baseTop == nil {
		return fmt.Errorf("ledger: LinkPruned on a log that holds all of history")
	}
	e := PrunedStub(l.org, c, clock)
	if clock == 0 || !e.key.Less(l.bar.baseTop.key) {
		return fmt.Errorf("%w: pruned entry %s (clock %d) is not below this log's start", ErrMalformed, c, clock)
	}
	if l.nodes[e.key.CID] != nil {
		return nil
	}
	l.nodes[e.key.CID] = &node{e: e, key: e.key, seg: l.bar.baseDepth, applied: true}
	return nil
}

// PrunedStub is the stand-in for an entry of org pruned from a node's
// store: its CID and clock, no kind, payload, parents or bytes. A Log
// holds stubs below its start only (LinkPruned, NewLogAt's below).
func PrunedStub(org string, c cid.Cid, clock uint64) *Entry {
	return &Entry{Org: org, Clock: clock, cid: c, key: OrderKey{Clock: clock, CID: c.KeyString()}, stub: true}
}

// Stub reports whether e is a pruned entry's stand-in (PrunedStub): it
// has no bytes, and is never sent, stored or exported as an entry.
func (e *Entry) Stub() bool { return e.stub }

// relinkBelow links n, below the start, to those of its parents the Log
// now knows.
func (l *Log) relinkBelow(n *node) {
	have := make(map[*node]bool, len(n.parents))
	for _, p := range n.parents {
		have[p] = true
	}
	for _, p := range n.e.Parents {
		if pn := l.nodes[p.KeyString()]; pn != nil && !have[pn] {
			n.parents = append(n.parents, pn)
		}
	}
}

// noteBelowCheckpoint puts n, linked below the start, in the checkpoint
// tree when it is a checkpoint of the chain below the start (its depth
// known from the one above it). A checkpoint written later on it then has
// a depth too, so a deeper chain that leaves the start below it (a
// partition's other side) is seen for what it is (BelowStart) rather than
// left out of the tree.
func (l *Log) noteBelowCheckpoint(n *node) {
	b := &l.bar
	d, ok := b.belowDepth[n.key.CID]
	if !ok || n.e.Kind != KindCheckpoint || d < 1 {
		return
	}
	p := checkpointPayload(n.e)
	if p == nil || (p.Prev == "") != (d == 1) {
		return
	}
	b.depth[n] = d
	if p.Prev != "" {
		b.belowDepth[cidKey(p.Prev)] = d - 1
	}
}

// DecodeStored decodes an entry this node stored after Decode accepted it:
// the form and CID are checked, not the signature (checked before it was
// stored). It is for reading entries back to serve or link, never for
// bytes from a peer.
func DecodeStored(want cid.Cid, raw []byte) (*Entry, error) {
	e, err := decodeUnverified(raw)
	if err != nil {
		return nil, err
	}
	if !e.cid.Equals(want) {
		return nil, fmt.Errorf("%w: want %s, got %s", ErrCIDMismatch, want, e.cid)
	}
	return e, nil
}

// BelowFrontier are entries this Log knows sort below its start without
// holding them: the parents of its start barrier and of the ancestors of
// it that it holds, which are not in the Log. A peer's answer that reaches
// below the start holds such entries and their ancestors: the replica
// recognises them by it and drops them (they are in the start's State).
// Nil for a Log started at the genesis.
func (l *Log) BelowFrontier() []cid.Cid {
	if l.bar.baseTop == nil {
		return nil
	}
	var out []cid.Cid
	for _, n := range l.order[:l.bar.baseLen] {
		for _, p := range n.e.Parents {
			if l.nodes[p.KeyString()] == nil {
				out = append(out, p)
			}
		}
	}
	return out
}

// BelowParents are the entries below this Log's start that entries after
// it name as parents (the ancestors it was started with, or linked since
// by LinkBelow): what the Log needs again to start from its store, so
// pruning keeps them.
func (l *Log) BelowParents() []cid.Cid {
	if l.bar.baseTop == nil {
		return nil
	}
	seen := map[*node]bool{}
	var out []cid.Cid
	for _, n := range l.order[l.bar.baseLen:] {
		for _, p := range n.parents {
			if p.seg <= l.bar.baseDepth && !seen[p] {
				seen[p] = true
				out = append(out, p.e.cid)
			}
		}
	}
	return out
}
