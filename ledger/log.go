package ledger

import (
	"errors"
	"fmt"
	"sort"

	"github.com/ipfs/go-cid"
)

// ErrMissingParents says an entry cannot be added before its parents.
var ErrMissingParents = errors.New("ledger: missing parents")

// ErrVoid is the verdict on an entry voided by "revocation wins": its author
// lost the role through a revocation that had not seen the entry.
var ErrVoid = fmt.Errorf("%w: void: its author's authority was revoked by an entry that had not seen it", ErrNotAuthority)

// MissingParentsError lists the parents an entry is waiting for.
type MissingParentsError struct{ Missing []cid.Cid }

func (e *MissingParentsError) Error() string {
	return fmt.Sprintf("%v: %d", ErrMissingParents, len(e.Missing))
}

func (e *MissingParentsError) Unwrap() error { return ErrMissingParents }

const (
	defaultCheckpointEvery = 1024 // entries between State checkpoints, at least
	defaultMaxCheckpoints  = 16   // older checkpoints are thinned out beyond this
	checkpointWeightDiv    = 4    // and at least (State size)/4 entries apart
)

type node struct {
	e       *Entry
	key     OrderKey
	parents []*node
	seg     int32 // barrier segment (log_barrier.go): tailSeg until a checkpoint's ancestry takes it

	revKind bool   // member.role or member.remove: may revoke authority
	target  string // for revKind: the member it names

	// Set by each fold of the node.
	void     bool        // in the void set: skipped by the fold
	applied  bool        // had an effect
	err      error       // why not, when !applied
	revoked  bool        // revKind, applied, and it revoked target
	conflict *Revocation // revKind, failed because its author had been revoked by this

	// For revoked nodes, a cache of the entries "revocation wins" voids: by
	// target, sorting before this node, not its ancestors. It depends on the
	// DAG only; candSeen is how much of byPerson[target] was examined.
	cand     []*node
	candSeen int
}

type checkpoint struct {
	pos int // state after applying order[:pos]
	st  *State
}

// Log is the org's DAG of entries, kept in its one total order, with the
// State folded from it. The State depends only on the set of entries, never
// on the order or the batches they were added in. It does no IO; the node
// persists entries (ledger/store) and feeds them in. A Log is not safe for
// concurrent use.
//
// How it works (the package doc states the invariants):
//   - Total order: entries sort by (clock, CID). Clock is the entry's level
//     (1 + max parent clock, checked on Add), so every parent sorts before its
//     children.
//   - Authority: Apply checks each entry against the State at its position;
//     an entry without authority stays in the DAG with no effect.
//   - Revocation wins: see resolve.
//   - Late entries: an entry that sorts before folded ones re-folds from the
//     nearest checkpoint before it. Checkpoints are taken every
//     max(1024, State size/4) entries and thinned out with age, so the recent
//     past is dense and the distant past sparse.
type Log struct {
	org      string
	nodes    map[string]*node // by CID key
	order    []*node
	heads    map[string]*node
	byAuthor map[string][]*node  // entries by each machine
	persons  map[string][]string // machine -> every person a valid delegation of it names
	byPerson map[string][]*node  // entries by each person: its own key's and its machines' (see notePerson)
	refiled  bool                // notePerson filed earlier entries under a person: voids to recompute
	revs     []*node             // every revKind node
	lastRev  *node               // the revKind node that sorts last
	void     map[*node]bool
	st       *State
	stFolded int // st covers order[:stFolded]
	cps      []checkpoint

	cpEvery, cpMax int
	cpInterval     int // current distance between checkpoints

	hash hashCache // StateHash's (statehash.go)

	budget int // entries without effect a machine may have in a window (log_budget.go)

	bar barriers // the chain of checkpoints (log_barrier.go)
}

// NewLog returns an empty log.
func NewLog() *Log { return newLog(defaultCheckpointEvery, defaultMaxCheckpoints) }

func newLog(cpEvery, cpMax int) *Log {
	return &Log{nodes: map[string]*node{}, heads: map[string]*node{}, byAuthor: map[string][]*node{},
		persons: map[string][]string{}, byPerson: map[string][]*node{},
		void: map[*node]bool{}, st: NewState(), cpEvery: cpEvery, cpMax: cpMax, cpInterval: cpEvery,
		budget: IneffectiveBudget}
}

// State is the current folded state. Callers must not modify it; it is
// replaced (not updated) when a late entry causes a re-fold. The next fold
// may change it in place: a reader that runs beside the fold reads
// Snapshot instead.
func (l *Log) State() *State { return l.st }

// Snapshot is the current folded state, frozen: no later fold changes it
// (they go on with a copy that shares what they do not write; cow.go), so
// it may be read without the Log, by any number of goroutines.
func (l *Log) Snapshot() *State {
	l.st.Freeze()
	return l.st
}

// Len is the number of entries in the DAG.
func (l *Log) Len() int { return len(l.order) }

// Org is the org ID, once genesis is known.
func (l *Log) Org() string { return l.org }

// Get returns an entry by CID (never a pruned entry's stub: LinkPruned).
func (l *Log) Get(c cid.Cid) *Entry {
	if n := l.nodes[c.KeyString()]; n != nil && !n.e.stub {
		return n.e
	}
	return nil
}

// Heads are the entries without children, sorted by CID, and the largest
// clock among them (the parent clock of the next entry).
func (l *Log) Heads() ([]cid.Cid, uint64) {
	out := make([]cid.Cid, 0, len(l.heads))
	var max uint64
	for _, n := range l.heads {
		out = append(out, n.e.cid)
		if n.e.Clock > max {
			max = n.e.Clock
		}
	}
	sortCIDs(out)
	return out, max
}

// Entries returns the entries in total order (ancestors first), without
// pruned entries' stubs (LinkPruned).
func (l *Log) Entries() []*Entry {
	out := make([]*Entry, 0, len(l.order))
	for _, n := range l.order {
		if !n.e.stub { // pruned entries' stand-ins (log_compact.go)
			out = append(out, n.e)
		}
	}
	return out
}

// Effective reports whether the entry had an effect on the State.
func (l *Log) Effective(c cid.Cid) bool {
	n := l.nodes[c.KeyString()]
	return n != nil && n.applied
}

// Verdict is the entry's current verdict: nil when it has an effect, else why
// not (ErrVoid, or the error Apply gave it at its position). Late entries can
// change it. An entry that is not in the log gets ErrNotFound.
func (l *Log) Verdict(c cid.Cid) error {
	n := l.nodes[c.KeyString()]
	if n == nil {
		return ErrNotFound
	}
	return n.verdict()
}

// ErrNotFound says an entry is not in the log.
var ErrNotFound = errors.New("ledger: entry not in the log")

func (n *node) verdict() error {
	if n.applied {
		return nil
	}
	if n.err == nil {
		return fmt.Errorf("%w: no effect", ErrNotAuthority) // not reached: a fold sets err
	}
	return n.err
}

// Add adds one entry whose parents are all present. It returns the entry's
// verdict (nil when it took effect; see Verdict); the entry is kept either
// way. err is non-nil when the entry could not be added: its parents are
// missing (*MissingParentsError), its clock is wrong (ErrMalformed) or it
// belongs to another org (ErrWrongOrg).
func (l *Log) Add(e *Entry) (applyErr error, err error) {
	errs, err := l.AddBatch([]*Entry{e})
	if err != nil {
		return nil, err
	}
	return errs[0], nil
}

// AddBatch adds entries in any order, each one's parents being in the log or
// in the batch, and folds once. It returns, per entry, its verdict (as Add;
// for an entry already present, its current verdict) or, for an entry that
// could not be added, the reason. The entries that can be added are added
// even when others cannot; err is then non-nil: the first reason in total
// order other than missing parents, else a *MissingParentsError naming every
// parent that is neither in the log nor in the batch.
func (l *Log) AddBatch(es []*Entry) ([]error, error) {
	batch := make([]*Entry, 0, len(es))
	for _, e := range es {
		if e != nil {
			batch = append(batch, e)
		}
	}
	if len(batch) > 1 {
		sort.Slice(batch, func(i, j int) bool { return batch[i].key.Less(batch[j].key) })
	}
	var (
		added    []*node
		linkErr  map[string]error
		firstErr error
		missing  []cid.Cid
		needVoid bool
	)
	under := l.underStart(batch)
	for i, e := range batch {
		if l.nodes[e.key.CID] != nil || (i > 0 && batch[i-1].key == e.key) || under[e.key.CID] {
			continue
		}
		n, err := l.link(e)
		if err != nil {
			if linkErr == nil {
				linkErr = map[string]error{}
			}
			linkErr[e.key.CID] = err
			var mp *MissingParentsError
			if errors.As(err, &mp) {
				missing = append(missing, mp.Missing...)
			} else if firstErr == nil {
				firstErr = err
			}
			continue
		}
		if n.revKind || (l.lastRev != nil && n.before(l.lastRev)) {
			needVoid = true
		}
		added = append(added, n)
	}
	if l.refiled {
		l.refiled = false
		needVoid = needVoid || len(l.revs) > 0
	}
	for _, n := range added {
		if n.revKind {
			l.revs = append(l.revs, n)
			if l.lastRev == nil || l.lastRev.before(n) {
				l.lastRev = n
			}
		}
	}
	if len(added) > 0 {
		minPos := l.insert(added)
		if p, moved := l.rechain(added); moved {
			minPos = min(minPos, p)
			needVoid = needVoid || len(l.revs) > 0
		}
		if needVoid {
			l.resolve(minPos)
		} else {
			l.foldFrom(minPos)
		}
	}
	errs := make([]error, len(es))
	for i, e := range es {
		if e == nil {
			errs[i] = fmt.Errorf("%w: nil entry", ErrMalformed)
		} else if n := l.nodes[e.key.CID]; n != nil {
			errs[i] = n.verdict()
		} else {
			errs[i] = linkErr[e.key.CID]
		}
	}
	if firstErr == nil && len(missing) > 0 {
		// Name only what is neither here nor in the batch: what to fetch.
		inBatch := make(map[string]bool, len(batch))
		for _, e := range batch {
			inBatch[e.key.CID] = true
		}
		seen := map[string]bool{}
		var want []cid.Cid
		for _, c := range missing {
			k := c.KeyString()
			if !inBatch[k] && !seen[k] && l.nodes[k] == nil {
				seen[k] = true
				want = append(want, c)
			}
		}
		sortCIDs(want)
		firstErr = &MissingParentsError{Missing: want}
		if len(want) == 0 {
			// Every missing parent is in the batch but could not be added
			// itself; the reason is on that entry.
			firstErr = fmt.Errorf("%w: parents in the batch could not be added", ErrMissingParents)
		}
	}
	if firstErr == nil && len(es) > 0 && len(batch) < len(es) {
		firstErr = fmt.Errorf("%w: nil entry", ErrMalformed)
	}
	return errs, firstErr
}

// link checks e against the DAG and registers it (not yet in order).
func (l *Log) link(e *Entry) (*node, error) {
	n := &node{e: e, key: e.key, seg: tailSeg}
	if e.Kind == KindGenesis {
		if len(l.nodes) > 0 {
			return nil, fmt.Errorf("%w: a second genesis entry", ErrWrongOrg)
		}
	} else {
		if l.org != "" && e.Org != l.org {
			return nil, fmt.Errorf("%w: entry for org %s", ErrWrongOrg, e.Org)
		}
		var missing []cid.Cid
		var maxClock uint64
		n.parents = make([]*node, 0, len(e.Parents))
		for _, p := range e.Parents {
			pn := l.nodes[p.KeyString()]
			if pn == nil {
				// Folded into a checkpoint start (barriers.under).
				if c, ok := l.heldUnder(p.KeyString()); ok {
					maxClock = max(maxClock, c)
					continue
				}
				missing = append(missing, p)
				continue
			}
			n.parents = append(n.parents, pn)
			if pn.e.Clock > maxClock {
				maxClock = pn.e.Clock
			}
		}
		if len(missing) > 0 {
			return nil, &MissingParentsError{Missing: missing}
		}
		if e.Clock != maxClock+1 {
			return nil, fmt.Errorf("%w: clock %d, want %d (1 + largest parent clock)", ErrMalformed, e.Clock, maxClock+1)
		}
	}
	if e.Kind == KindGenesis {
		l.org = e.cid.String()
	}
	if e.Kind == KindMemberRole || e.Kind == KindMemberRemove {
		n.revKind, n.target = true, revTarget(e)
	}
	l.nodes[n.key.CID] = n
	for _, p := range n.parents {
		delete(l.heads, p.key.CID)
	}
	l.heads[n.key.CID] = n
	a := e.author
	l.byAuthor[a] = append(l.byAuthor[a], n)
	l.notePerson(e)
	l.byPerson[a] = append(l.byPerson[a], n) // a machine without a delegation is its own person
	for _, p := range l.persons[a] {
		l.byPerson[p] = append(l.byPerson[p], n)
	}
	return n, nil
}

// insert merges new nodes (sorted) into order, drops the checkpoints they
// make stale, and returns the position of the first one.
func (l *Log) insert(ns []*node) int {
	var minPos int
	if len(ns) == 1 {
		n := ns[0]
		i := sort.Search(len(l.order), func(i int) bool { return n.before(l.order[i]) })
		l.order = append(l.order, nil)
		copy(l.order[i+1:], l.order[i:])
		l.order[i] = n
		minPos = i
	} else {
		old := l.order
		minPos = sort.Search(len(old), func(i int) bool { return ns[0].before(old[i]) })
		merged := make([]*node, 0, len(old)+len(ns))
		merged = append(merged, old[:minPos]...)
		i, j := minPos, 0
		for i < len(old) || j < len(ns) {
			if j == len(ns) || (i < len(old) && old[i].before(ns[j])) {
				merged = append(merged, old[i])
				i++
			} else {
				merged = append(merged, ns[j])
				j++
			}
		}
		l.order = merged
	}
	// A checkpoint after minPos no longer describes a prefix of order.
	k := len(l.cps)
	for k > 0 && l.cps[k-1].pos > minPos {
		k--
	}
	l.cps = l.cps[:k]
	return minPos
}

// posOf is a node's index in order.
func (l *Log) posOf(n *node) int {
	return sort.Search(len(l.order), func(i int) bool { return !l.order[i].before(n) })
}

// foldFrom makes st the fold of order with the current void set, re-applying
// from the nearest checkpoint at or before pos. Everything before pos must be
// unchanged since the last fold (entries, void set).
func (l *Log) foldFrom(pos int) {
	if pos >= l.stFolded {
		l.foldRange(l.stFolded)
		return
	}
	k := len(l.cps)
	for k > 0 && l.cps[k-1].pos > pos {
		k--
	}
	l.cps = l.cps[:k]
	if k == 0 {
		l.st = l.bar.baseState()
		l.foldRange(l.bar.baseLen)
		return
	}
	l.st = l.cps[k-1].st.Clone()
	l.foldRange(l.cps[k-1].pos)
}

// foldRange applies order[from:] to st, taking checkpoints and recording each
// node's verdict and revocation facts.
func (l *Log) foldRange(from int) {
	last := 0
	if len(l.cps) > 0 {
		last = l.cps[len(l.cps)-1].pos
	}
	if from < len(l.order) {
		l.st = l.st.Thaw() // a published State stays as it was
	}
	for i := from; i < len(l.order); i++ {
		n := l.order[i]
		n.applied, n.err, n.revoked, n.conflict = false, nil, false, nil
		l.foldOne(n) // log_budget.go
		if i+1-last >= l.cpInterval {
			l.checkpoint(i + 1)
			last = i + 1
		}
	}
	l.stFolded = len(l.order)
}

func (l *Log) apply(n *node) error {
	if n.void {
		return ErrVoid
	}
	err := Apply(l.st, n.e)
	if !n.revKind {
		return err
	}
	if err != nil {
		var rv *RevokedAuthorError
		if errors.As(err, &rv) {
			c := rv.Rev
			n.conflict = &c
		}
		return err
	}
	if r := l.st.Revoked[n.target]; r != nil && r.Entry == n.key {
		n.revoked = true
	}
	return nil
}

// checkpoint records the state after order[:pos].
func (l *Log) checkpoint(pos int) {
	l.cps = append(l.cps, checkpoint{pos: pos, st: l.st.Clone()})
	if len(l.cps) > l.cpMax {
		// Thin out the older half: keep every second one.
		half := len(l.cps) / 2
		kept := make([]checkpoint, 0, len(l.cps))
		for i := 0; i < half; i += 2 {
			kept = append(kept, l.cps[i])
		}
		l.cps = append(kept, l.cps[half:]...)
	}
	// Copying a large State is costly: space checkpoints by its size.
	l.cpInterval = max(l.cpEvery, l.st.weight()/checkpointWeightDiv)
}
