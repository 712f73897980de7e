package ledger

import (
	"fmt"
	"math"
	"slices"

	"github.com/ipfs/go-cid"
)

// Barriers: the chain of checkpoints and the order it gives (docs/design.md
// §5.6). Everything here is a function of the set of entries.
//
//   - A ledger.checkpoint entry X whose payload checks is in the chain's
//     tree when its Prev is "" (depth 1) or names a checkpoint of the tree
//     that is an ancestor of X (depth: one more than Prev's). Depth is fixed
//     when X is added: its Prev is an ancestor, so it came first.
//   - The top is the deepest checkpoint of the tree, the least OrderKey
//     among equals; the chain (the barriers) is the top and its Prevs.
//   - Segments: barrier k's segment is its ancestors (and itself) that are
//     not in an earlier barrier's. The total order is by segment, then
//     (clock, CID); the entries that are no barrier's ancestors (the tail)
//     sort after the top. So the State just before barrier B is the fold of
//     B's ancestors, whatever arrives later: a late entry that does not
//     descend from B sorts after B. That State is what B's hash names.
//   - "Revocation wins" (revoke.go) voids entries in the revocation's own
//     segment only: nothing reaches back across a barrier.
//
// A new top that extends the chain re-sorts only the tail. One that
// replaces barriers (two checkpoints written concurrently, or the deeper
// chain of a partition's other side) re-sorts from the first replaced one.

const tailSeg = math.MaxInt32

// before is the total order: segment, then (clock, CID).
func (a *node) before(b *node) bool {
	if a.seg != b.seg {
		return a.seg < b.seg
	}
	return a.key.Less(b.key)
}

type barriers struct {
	depth map[*node]int32 // checkpoints in the tree, by depth
	top   *node
	chain []*node // chain[i] has depth base+1+i

	// A Log started at a checkpoint (NewLogAt): the State after it, how
	// many nodes of order it covers, and its depth. A chain that does not
	// pass through it is recorded in below (the Log cannot follow it).
	base      *State
	baseLen   int
	baseDepth int32
	baseTop   *node
	before    *State // the State base's hash names (AtBarrier of baseTop)
	below     bool
	// belowDepth: the depths of the chain's checkpoints below baseTop, by
	// CID key, as far as known (baseTop's prev, then each one's linked
	// below the start: noteBelowCheckpoint, log_compact.go).
	belowDepth map[string]int32
	// under holds the CIDs of entries known to be ancestors of baseTop
	// that the Log does not hold: named as parents by it, by an entry
	// kept below it, or by an entry of under that arrived (underStart),
	// with the clock of those that arrived (0 until then). Their effects
	// are in base already; one that arrived counts as held (Has), and a
	// later entry may name it as a parent (link).
	under map[string]uint64
}

// underStart returns the entries of batch (in total order) that are
// ancestors of the checkpoint this Log started at (NewLogAt), which a
// peer sends again when it answers a sync with everything above a floor:
// their effects are in the State the Log started from, and folding them
// again would count them twice (the nemesis saw a joiner's duplicate runs
// and CPU seconds differ). An entry is one when the start, an entry kept
// below it, or another such entry names it as a parent; the batch is
// walked from its last entry down so that a chain of them arriving
// together is found whole. What they name joins under. An ancestor
// whose child on the way to the start has not arrived yet is not known
// as one (the sync sends an entry's descendants above the floor with it).
func (l *Log) underStart(batch []*Entry) map[string]bool {
	under := l.bar.under
	if len(under) == 0 {
		return nil
	}
	var out map[string]bool
	for i := len(batch) - 1; i >= 0; i-- {
		e := batch[i]
		if _, ok := under[e.key.CID]; !ok || l.nodes[e.key.CID] != nil {
			continue
		}
		if out == nil {
			out = map[string]bool{}
		}
		out[e.key.CID] = true
		under[e.key.CID] = e.Clock
		for _, p := range e.Parents {
			if k := p.KeyString(); l.nodes[k] == nil {
				if _, ok := under[k]; !ok {
					under[k] = 0
				}
			}
		}
	}
	return out
}

// Has reports whether the entry is in the log, or (in a Log started at a
// checkpoint) folded into its start: one of the start's ancestors that
// arrived again (see barriers.under), which Get does not return. An entry
// may name one as a parent: it sorts after the start whatever its parents.
func (l *Log) Has(c cid.Cid) bool {
	k := c.KeyString()
	if l.nodes[k] != nil {
		return true
	}
	_, ok := l.heldUnder(k)
	return ok
}

// heldUnder reports whether the entry of key k is an ancestor of this
// Log's start that arrived (see barriers.under), and its clock.
func (l *Log) heldUnder(k string) (uint64, bool) {
	c := l.bar.under[k]
	return c, c > 0
}

func (b *barriers) baseState() *State {
	if b.base == nil {
		return NewState()
	}
	return b.base.Clone()
}

// checkpointPayload decodes a checkpoint entry's payload, or nil.
func checkpointPayload(e *Entry) *Checkpoint {
	var p Checkpoint
	if DecodePayload(e.Payload, &p) != nil || CheckCheckpoint(p) != nil {
		return nil
	}
	return &p
}

// note puts a new checkpoint node in the tree, if it belongs there.
func (l *Log) noteCheckpoint(n *node) {
	p := checkpointPayload(n.e)
	if p == nil {
		return
	}
	b := &l.bar
	if b.depth == nil {
		b.depth = map[*node]int32{}
	}
	var d int32
	if p.Prev == "" {
		if b.base != nil {
			return // a root of the tree far below this Log's start: never deeper than it
		}
		d = 1
	} else {
		pn := l.nodes[cidKey(p.Prev)]
		pd, ok := b.depth[pn]
		if pn == nil || !ok || !l.isAncestor(pn, n) {
			return
		}
		d = pd + 1
	}
	b.depth[n] = d
	if b.top == nil || d > b.depth[b.top] || (d == b.depth[b.top] && n.key.Less(b.top.key)) {
		b.top = n
	}
}

// rechain updates the chain after added were inserted (all in the tail),
// re-segments and re-sorts what moved, and reports the first position of
// order that changed.
func (l *Log) rechain(added []*node) (int, bool) {
	old := l.bar.top
	for _, n := range added {
		if n.e.Kind == KindCheckpoint {
			l.noteCheckpoint(n)
		}
	}
	b := &l.bar
	if b.top == old {
		return 0, false
	}
	// The new chain, from the top down to the Log's start.
	var chain []*node
	for n := b.top; n != nil; {
		if n == b.baseTop {
			break
		}
		chain = append(chain, n)
		p := checkpointPayload(n.e)
		if p.Prev == "" {
			n = nil
			continue
		}
		n = l.nodes[cidKey(p.Prev)]
	}
	slices.Reverse(chain)
	if b.base != nil && (len(chain) == 0 || b.depth[chain[0]] != b.baseDepth+1) {
		// The deepest chain leaves this Log's start: keep the old one
		// and say so; the node must start again from a newer checkpoint.
		b.top, b.below = old, true
		return 0, false
	}
	keep := 0
	for keep < len(chain) && keep < len(b.chain) && chain[keep] == b.chain[keep] {
		keep++
	}
	firstSeg := b.baseDepth + int32(keep) + 1 // segments from this one on are redone
	start := sortSearchSeg(l.order, firstSeg)
	prev := slices.Clone(l.order[start:])
	for _, n := range prev {
		n.seg = tailSeg
	}
	for _, x := range chain[keep:] {
		d := b.depth[x]
		stack := []*node{x}
		for len(stack) > 0 {
			n := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if n.seg != tailSeg {
				continue
			}
			n.seg = d
			stack = append(stack, n.parents...)
		}
	}
	b.chain = chain
	rest := l.order[start:]
	slices.SortFunc(rest, func(x, y *node) int {
		if x.before(y) {
			return -1
		}
		return 1
	})
	first := len(l.order)
	for i := range rest {
		if rest[i] != prev[i] {
			first = start + i
			break
		}
	}
	// Segments changed: the revocations' cached candidates and which
	// sorts last are recomputed.
	l.lastRev = nil
	for _, r := range l.revs {
		r.cand, r.candSeen = nil, 0
		if l.lastRev == nil || l.lastRev.before(r) {
			l.lastRev = r
		}
	}
	k := len(l.cps)
	for k > 0 && l.cps[k-1].pos > first {
		k--
	}
	l.cps = l.cps[:k]
	return first, true
}

// cidKey is the key of a CID given as a string, or "" when it is not one.
func cidKey(s string) string {
	c, err := cid.Decode(s)
	if err != nil {
		return ""
	}
	return c.KeyString()
}

// sortSearchSeg is the first position in order whose segment is seg or
// later.
func sortSearchSeg(order []*node, seg int32) int {
	lo, hi := 0, len(order)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if order[m].seg < seg {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// Barrier is a checkpoint of the chain as the Log knows it.
type Barrier struct {
	Entry *Entry
	Depth int
}

// Top is the newest barrier: the top of the checkpoint chain, or a zero
// Barrier when there is none.
func (l *Log) Top() Barrier {
	if t := l.bar.top; t != nil {
		return Barrier{Entry: t.e, Depth: int(l.bar.depth[t])}
	}
	return Barrier{}
}

// BeforeStart reports whether e sorts before the checkpoint this Log
// started at (NewLogAt): it may be one of the checkpoint's ancestors, which
// the Log recognises only with its descendants on the way to the
// checkpoint (underStart); false for a Log with all history.
func (l *Log) BeforeStart(e *Entry) bool {
	return l.bar.baseTop != nil && e.key.Less(l.bar.baseTop.key)
}

// BelowStart reports whether the checkpoint chain moved below the
// checkpoint this Log started at (NewLogAt): the Log then keeps its old
// chain, and the node must start again from a newer checkpoint.
func (l *Log) BelowStart() bool { return l.bar.below }

// SinceTop is how many entries sort after the top barrier (all of them
// when there is none): what the next checkpoint would cover beyond it.
func (l *Log) SinceTop() int {
	return len(l.order) - sortSearchSeg(l.order, tailSeg)
}

// AtBarrier is what a node serves a joiner for barrier b (an entry of
// the chain): the State its hash names (the fold of its ancestors; shared,
// not to be modified), and its ancestors that entries after it name as
// parents (sorted in total order), which the joiner keeps to link them:
// stubs (PrunedStub) for those the Log holds no entry of (pruned, or
// folded into its start and arrived again).
func (l *Log) AtBarrier(c *Entry) (*State, []*Entry, error) {
	n := l.nodes[c.key.CID]
	if n == nil || n.seg == tailSeg || l.bar.depth[n] != n.seg {
		return nil, nil, fmt.Errorf("ledger: %s is not a barrier", c.CID())
	}
	pos := l.posOf(n)
	var st *State
	switch {
	case n == l.bar.baseTop:
		st = l.bar.before
	case pos < l.bar.baseLen:
		return nil, nil, fmt.Errorf("ledger: barrier %s is below this log's start", c.CID())
	default:
		st = l.stateAt(pos)
	}
	var below []*Entry
	seen := map[*node]bool{}
	var held map[string]bool
	for _, m := range l.order[pos+1:] {
		for _, p := range m.parents {
			if p != n && p.seg <= n.seg && !seen[p] {
				seen[p] = true
				below = append(below, p.e)
			}
		}
		if len(m.parents) == len(m.e.Parents) {
			continue
		}
		// Parents folded into this Log's start that arrived (barriers.under):
		// named as stubs, so that a Log started again here links m too.
		for _, pc := range m.e.Parents {
			k := pc.KeyString()
			if c, ok := l.heldUnder(k); ok && l.nodes[k] == nil && !held[k] {
				if held == nil {
					held = map[string]bool{}
				}
				held[k] = true
				below = append(below, PrunedStub(l.org, pc, c))
			}
		}
	}
	slices.SortFunc(below, func(x, y *Entry) int {
		if x.key.Less(y.key) {
			return -1
		}
		return 1
	})
	return st, below, nil
}

// stateAt is the State after order[:pos], from the nearest fold checkpoint
// (a fresh copy, or the current State when pos is the end).
func (l *Log) stateAt(pos int) *State {
	if pos == len(l.order) {
		return l.st
	}
	k := len(l.cps)
	for k > 0 && l.cps[k-1].pos > pos {
		k--
	}
	st, from := l.bar.baseState(), l.bar.baseLen
	if k > 0 {
		st, from = l.cps[k-1].st.Clone(), l.cps[k-1].pos
	}
	for _, n := range l.order[from:pos] {
		_ = foldCounted(st, n.e, n.void, l.budget)
	}
	return st
}

// NewLogAt starts a Log at barrier cp of depth depth: st is the State its
// hash names (the fold of its ancestors; it is checked against the hash
// and count cp carries, and cp must take effect on it: its author an admin
// there), and below are the ancestors of cp that later entries name as
// parents (AtBarrier's). The Log then takes the entries after cp and folds
// them onto the State after cp. Every machine's person comes from st (a
// machine that two persons delegated counts for its current owner only).
func NewLogAt(st *State, cp *Entry, depth int, below []*Entry) (*Log, error) {
	if cp == nil || cp.Kind != KindCheckpoint {
		return nil, fmt.Errorf("%w: not a checkpoint entry", ErrMalformed)
	}
	p := checkpointPayload(cp)
	if p == nil {
		return nil, fmt.Errorf("%w: checkpoint payload", ErrMalformed)
	}
	if depth < 1 || depth > math.MaxInt32/2 || (p.Prev == "") != (depth == 1) {
		return nil, fmt.Errorf("%w: checkpoint depth %d", ErrMalformed, depth)
	}
	if n := st.Applied + st.Ineffective; n != p.Entries {
		return nil, fmt.Errorf("%w: state of %d entries; the checkpoint names %d", ErrMalformed, n, p.Entries)
	}
	if h := st.Hash(); h != p.Hash {
		return nil, fmt.Errorf("%w: state hash %s; the checkpoint names %s", ErrMalformed, h, p.Hash)
	}
	l := NewLog()
	after := st.Clone()
	if err := foldCounted(after, cp, false, l.budget); err != nil {
		return nil, fmt.Errorf("checkpoint does not take effect on its state: %w", err)
	}
	l.org = st.Org
	d := int32(depth)
	es := append(slices.Clone(below), cp)
	slices.SortFunc(es, func(x, y *Entry) int {
		if x.key.Less(y.key) {
			return -1
		}
		return 1
	})
	for i, e := range es {
		if e == nil || e.Org != st.Org || (i > 0 && es[i-1].key == e.key) {
			return nil, fmt.Errorf("%w: an entry below the checkpoint is nil, repeated or of another org", ErrMalformed)
		}
		if e != cp && !e.key.Less(cp.key) {
			return nil, fmt.Errorf("%w: an entry below the checkpoint sorts after it", ErrMalformed)
		}
		n := &node{e: e, key: e.key, seg: d, applied: true}
		for _, pc := range e.Parents {
			if pn := l.nodes[pc.KeyString()]; pn != nil {
				n.parents = append(n.parents, pn)
			}
		}
		l.nodes[n.key.CID] = n
		l.order = append(l.order, n)
	}
	// Heads: the entries below that are no one's parent (among them); a
	// pruned entry's stub never (it has no bytes to name as a parent).
	for _, n := range l.order {
		if !n.e.stub {
			l.heads[n.key.CID] = n
		}
	}
	for _, n := range l.order {
		for _, p := range n.parents {
			delete(l.heads, p.key.CID)
		}
	}
	for _, m := range st.SortedMachines() {
		if m.Owner != m.ID {
			l.persons[m.ID] = []string{m.Owner}
		}
	}
	under := map[string]uint64{}
	for _, n := range l.order {
		for _, p := range n.e.Parents {
			if k := p.KeyString(); l.nodes[k] == nil {
				under[k] = 0
			}
		}
	}
	top := l.nodes[cp.key.CID]
	l.bar = barriers{depth: map[*node]int32{top: d}, top: top,
		base: after, baseLen: len(l.order), baseDepth: d, baseTop: top, before: st, belowDepth: map[string]int32{}, under: under}
	if p.Prev != "" {
		l.bar.belowDepth[cidKey(p.Prev)] = d - 1
	}
	for i := len(l.order) - 1; i >= 0; i-- { // the chain's checkpoints among them, top down
		l.noteBelowCheckpoint(l.order[i])
	}
	l.st, l.stFolded = after.Clone(), len(l.order)
	return l, nil
}

// Tail are the entries after the top barrier, in total order (every entry
// when there is none): what a node that starts at the top needs beyond
// AtBarrier's.
func (l *Log) Tail() []*Entry {
	i := sortSearchSeg(l.order, tailSeg)
	out := make([]*Entry, 0, len(l.order)-i)
	for _, n := range l.order[i:] {
		out = append(out, n.e)
	}
	return out
}
