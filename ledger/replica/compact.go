package replica

import (
	"errors"
	"fmt"
	"sort"

	"github.com/fxamacker/cbor/v2"
	"github.com/ipfs/go-cid"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/store"
)

// Compaction (docs/design.md §5.6, §7.1): the node keeps in memory only
// the entries from a barrier of its chain on. CompactTo starts the Log
// again there, stores the State the barrier names and a record that Open
// starts from, and moves the entries below to the store's history
// (store.MoveToHistory), where Open does not read them, sync still serves
// them (collectLocked) and a late entry naming them still links
// (linkBelowLocked).

// historyRecord is the record that lists the CIDs moved to the history
// when the Log was compacted to the barrier of depth d (prune.go).
func historyRecord(d int) string { return fmt.Sprintf("%s%012d", historyRecordPrefix, d) }

// stateRecord is the record holding the State barrier c names.
func stateRecord(c cid.Cid) string { return stateCheckpoint + "/" + c.String() }

// Start is the depth of the barrier this replica's Log starts at (0: the
// genesis), and Top the depth of its newest barrier (0: none).
func (r *Replica) Start() (start, top int) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.lg.Start().Depth, r.lg.Top().Depth
}

// CompactTo starts the Log again at the barrier of depth d of its chain
// (see above). It does nothing when the Log already starts there or later,
// and refuses a depth the chain does not have. The State hash does not
// change (checked: on a difference nothing changes).
func (r *Replica) CompactTo(d int) error {
	moved, err := r.compactTo(d)
	if err == nil && moved {
		r.st.ReclaimSpace() // the moved entries' old places
	}
	return err
}

func (r *Replica) compactTo(d int) (bool, error) {
	r.writeMu.Lock()
	defer r.writeMu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	if d <= r.lg.Start().Depth {
		return false, nil
	}
	b := r.lg.ChainAt(d)
	if b == nil {
		return false, fmt.Errorf("%w: no barrier of depth %d", ErrNoCheckpoint, d)
	}
	st, below, err := r.lg.AtBarrier(b)
	if err != nil {
		return false, err
	}
	after, err := r.lg.After(b)
	if err != nil {
		return false, err
	}
	moved, err := r.lg.Before(b)
	if err != nil {
		return false, err
	}
	lg, err := ledger.NewLogAt(st, b, d, below)
	if err != nil {
		return false, err
	}
	if _, err := lg.AddBatch(after); err != nil {
		return false, fmt.Errorf("replica: compacting: %w", err)
	}
	if lg.StateHash() != r.lg.StateHash() {
		return false, fmt.Errorf("replica: compacted log reaches another state")
	}
	if r.rebuilt {
		// Entries below the old start may be after this one: back among
		// the blocks before the start record names it (a crash between
		// leaves them there, below the old start, which Open moves again).
		back := make([]cid.Cid, 0, len(after))
		for _, e := range after {
			if r.st.InHistory(e.CID()) {
				back = append(back, e.CID())
			}
		}
		if err := r.st.MoveFromHistory(back); err != nil {
			return false, err
		}
	}
	if err := r.persistStart(st, b, d, below, moved); err != nil {
		return false, err
	}
	r.lg, r.rebuilt = lg, false
	r.publishLocked()
	r.log.Info("ledger: compacted", "barrier", b.CID().String(), "depth", d, "moved", len(moved), "entries", lg.Len())
	return true, nil
}

// persistStart stores what Open needs to start at barrier b: its State,
// the record naming it (the switch: a crash before it leaves the old
// start), then moves the entries below to the history (a crash during the
// move is finished by Open) and lists them for pruning.
func (r *Replica) persistStart(st *ledger.State, b *ledger.Entry, d int, below []*ledger.Entry, moved []cid.Cid) error {
	old, _ := readStart(r.st)
	sb, err := ledger.EncodeState(st)
	if err != nil {
		return err
	}
	key := stateRecord(b.CID())
	if err := r.st.PutRecord(key, sb); err != nil {
		return err
	}
	list := historyList{Barrier: b.CID().Bytes(), Time: b.Time, CIDs: make([][]byte, len(moved))}
	for i, c := range moved {
		list.CIDs[i] = c.Bytes()
	}
	lb, err := cbor.Marshal(list)
	if err != nil {
		return err
	}
	if err := r.st.PutRecord(historyRecord(d), lb); err != nil {
		return err
	}
	start := ckStart{Entry: b.CID().Bytes(), Depth: d, State: key, Time: b.Time}
	var stubs []store.Pruned
	for _, e := range below {
		start.Below = append(start.Below, e.CID().Bytes())
		if e.Stub() && !r.st.HasBlock(e.CID()) { // Open makes it again from its pruned record
			stubs = append(stubs, store.Pruned{CID: e.CID(), Clock: e.Clock})
		}
	}
	if err := r.st.PruneHistory(stubs); err != nil {
		return err
	}
	meta, err := cbor.Marshal(start)
	if err != nil {
		return err
	}
	if err := r.st.SetMeta(metaCheckpoint, meta); err != nil {
		return err
	}
	if err := r.st.MoveToHistory(moved); err != nil {
		return err
	}
	if old != nil && old.stateKey() != key {
		return r.st.DeleteRecords([]string{old.stateKey()})
	}
	return nil
}

// stateKey is the record holding the start's State.
func (s *ckStart) stateKey() string {
	if s.State == "" {
		return stateCheckpoint // a start stored before compaction existed
	}
	return s.State
}

// readStart is the stored start, nil when there is none.
func readStart(st *store.Store) (*ckStart, error) {
	meta, err := st.Meta(metaCheckpoint)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var start ckStart
	if err := cbor.Unmarshal(meta, &start); err != nil {
		return nil, fmt.Errorf("replica: stored checkpoint: %w", err)
	}
	return &start, nil
}

// belowStart drops from es (the blocks Open read) the ancestors of the
// Log's start barrier, moving them to the history: a compaction cut short
// between its record and its move left them among the blocks. It is cheap
// when there are none: the walk stops at the first parent not in es.
func (r *Replica) belowStart(es []*ledger.Entry) []*ledger.Entry {
	top := r.lg.Start().Entry
	if top == nil {
		return es
	}
	by := make(map[string]*ledger.Entry, len(es))
	for _, e := range es {
		by[e.CID().KeyString()] = e
	}
	anc := map[string]bool{}
	stack := append([]cid.Cid(nil), top.Parents...)
	var moved []cid.Cid
	for len(stack) > 0 {
		c := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		k := c.KeyString()
		e := by[k]
		if e == nil || anc[k] {
			continue
		}
		anc[k] = true
		moved = append(moved, c)
		stack = append(stack, e.Parents...)
	}
	if len(moved) == 0 {
		return es
	}
	if err := r.st.MoveToHistory(moved); err != nil {
		r.log.Warn("ledger: finishing a compaction", "err", err)
	}
	out := es[:0]
	for _, e := range es {
		if !anc[e.CID().KeyString()] {
			out = append(out, e)
		}
	}
	return out
}

// storedEntry reads an entry back from the store (the blocks or the
// history), nil when it is not there.
func (r *Replica) storedEntry(c cid.Cid) *ledger.Entry {
	raw, err := r.st.GetBlock(c)
	if err != nil {
		return nil
	}
	e, err := ledger.DecodeStored(c, raw)
	if err != nil {
		return nil
	}
	return e
}

// inHistoryLocked reports whether c is an entry below the Log's start,
// kept in the store's history only or pruned from it: such an entry is
// never added again (it would sort after the start and fold twice). r.mu
// must be held.
func (r *Replica) inHistoryLocked(c cid.Cid) bool {
	return r.lg.Start().Entry != nil && (r.st.InHistory(c) || r.st.IsPruned(c))
}

// linkBelowLocked links, for an entry whose parent p is not in the Log,
// p from the history (ledger.Log.LinkBelow) or, when this node pruned it,
// by the CID and clock pruning kept (ledger.Log.LinkPruned), and reports
// whether it did: the entry then sorts after the start and folds as on a
// node that has not pruned. r.mu must be held.
func (r *Replica) linkBelowLocked(p cid.Cid) bool {
	if r.lg.Start().Entry == nil {
		return false
	}
	if !r.st.InHistory(p) {
		return r.linkPrunedLocked(r.lg, p)
	}
	e := r.storedEntry(p)
	if e == nil {
		return false
	}
	if err := r.lg.LinkBelow([]*ledger.Entry{e}); err != nil {
		r.log.Debug("ledger: linking an entry below the start", "cid", p.String(), "err", err)
		return false
	}
	return true
}

// linkPrunedLocked links p in lg when this node pruned it (see
// linkBelowLocked), and reports whether it did. r.mu must be held.
func (r *Replica) linkPrunedLocked(lg *ledger.Log, p cid.Cid) bool {
	clock, ok := r.st.PrunedClock(p)
	if !ok {
		return false
	}
	if err := lg.LinkPruned(p, clock); err != nil {
		r.log.Debug("ledger: linking an entry on a pruned parent", "cid", p.String(), "err", err)
		return false
	}
	return true
}

// refusePrunedLocked refuses e, which waits for parent p, when p was
// pruned before pruning kept clocks (an empty store marker): no entry
// naming it can link here. Entries naming a parent pruned since link
// (linkBelowLocked). r.mu must be held.
func (r *Replica) refusePrunedLocked(e *ledger.Entry, p cid.Cid) {
	if r.lg.Start().Entry == nil || !r.st.IsPruned(p) {
		return
	}
	if _, ok := r.st.PrunedClock(p); ok {
		return
	}
	k := e.CID().KeyString()
	if r.waiting[k] == nil {
		return
	}
	delete(r.waiting, k)
	r.waitBytes -= len(e.Bytes())
	r.dropped(DropPruned, 1)
	r.log.Info("ledger: refused an entry: it names a parent pruned from the history without its clock",
		"entry", e.CID().String(), "parent", p.String(), "author", e.AuthorString())
}

// dropBelowLocked drops the waiting entries that sort below the Log's
// start: ancestors of it that a peer's answer reaching below the start
// carried (a joiner's first fetch asks a margin below its heads). They are
// recognised from the start's parents down (ledger.Log.BelowFrontier),
// children before parents; what was recognised is remembered, up to
// MaxWaiting CIDs. r.mu must be held.
func (r *Replica) dropBelowLocked() {
	if len(r.waiting) == 0 || r.lg.Start().Entry == nil {
		return
	}
	if r.belowSeen == nil || r.belowOf != r.lg.Start().Entry {
		r.belowSeen, r.belowOf = map[string]bool{}, r.lg.Start().Entry
		for _, c := range r.lg.BelowFrontier() {
			r.belowSeen[c.KeyString()] = true
		}
	}
	pend := make([]*ledger.Entry, 0, len(r.waiting))
	for _, e := range r.waiting {
		pend = append(pend, e)
	}
	sort.Slice(pend, func(i, j int) bool { return pend[j].Key().Less(pend[i].Key()) }) // children first
	for _, e := range pend {
		k := e.CID().KeyString()
		if !r.belowSeen[k] {
			continue
		}
		delete(r.waiting, k)
		r.waitBytes -= len(e.Bytes())
		for _, p := range e.Parents {
			if len(r.belowSeen) < r.cfg.maxWaiting {
				r.belowSeen[p.KeyString()] = true
			}
		}
	}
}

// rebuildLocked folds all of history again, from the genesis, when the
// chain of barriers moved below the Log's start (ledger.Log.BelowStart: the
// deeper chain of a partition's other side that does not pass through the
// barrier it starts at): the Log cannot follow that chain, the store's
// history can. When pruned history is missing (or the node joined at a
// checkpoint and never had it) it logs, keeps the Log and reports false.
// The next compaction moves the start onto the new chain. r.mu must be
// held.
func (r *Replica) rebuildLocked() bool {
	by := map[string]*ledger.Entry{}
	for _, e := range r.lg.Entries() {
		by[e.CID().KeyString()] = e
	}
	read := func(c cid.Cid, data []byte) error {
		if by[c.KeyString()] == nil {
			if e, err := ledger.DecodeStored(c, data); err == nil {
				by[c.KeyString()] = e
			}
		}
		return nil
	}
	if err := r.st.ForEachHistory(read); err != nil {
		r.log.Warn("ledger: the checkpoint chain moved below this node's start; reading its history", "err", err)
		return false
	}
	if err := r.st.ForEachBlock(read); err != nil {
		r.log.Warn("ledger: the checkpoint chain moved below this node's start; reading its blocks", "err", err)
		return false
	}
	all := make([]*ledger.Entry, 0, len(by))
	for _, e := range by {
		all = append(all, e)
	}
	lg := ledger.NewLog()
	if _, err := lg.AddBatch(all); err != nil {
		r.log.Warn("ledger: the checkpoint chain moved below this node's start, and its history cannot be folded again (pruned?)", "err", err)
		return false
	}
	r.lg, r.rebuilt = lg, true
	r.log.Warn("ledger: the checkpoint chain moved below this node's start; folded all of its history again", "entries", lg.Len())
	return true
}

// linkPrevsLocked links, for each checkpoint in batch whose prev is below
// the Log's start (in the store's history), that prev and the entries of
// the history between them (its ancestors down to the prev's clock), so
// that the Log can tell whether it descends from its prev: a deeper chain
// that leaves the start below it (a partition's other side) is then seen
// (BelowStart, rebuildLocked). Rare: a checkpoint names the newest barrier,
// which is in memory. r.mu must be held.
func (r *Replica) linkPrevsLocked(batch []*ledger.Entry) {
	if r.lg.Start().Entry == nil {
		return
	}
	var inBatch map[string]*ledger.Entry
	for _, x := range batch {
		var p ledger.Checkpoint
		if x.Kind != ledger.KindCheckpoint || ledger.DecodePayload(x.Payload, &p) != nil || p.Prev == "" {
			continue
		}
		pc, err := cid.Decode(p.Prev)
		if err != nil || !r.st.InHistory(pc) {
			continue
		}
		prev := r.storedEntry(pc)
		if prev == nil {
			continue
		}
		if inBatch == nil {
			inBatch = make(map[string]*ledger.Entry, len(batch))
			for _, e := range batch {
				inBatch[e.CID().KeyString()] = e
			}
		}
		found := []*ledger.Entry{prev}
		walkBack(x.Parents, func(c cid.Cid) ([]cid.Cid, bool) {
			e := inBatch[c.KeyString()]
			if e == nil {
				e = r.lg.Get(c)
			}
			hist := r.st.InHistory(c)
			if e == nil && hist {
				e = r.storedEntry(c)
			}
			if e == nil || e.Clock <= prev.Clock {
				return nil, true
			}
			if hist {
				found = append(found, e)
			}
			return e.Parents, true
		})
		sort.Slice(found, func(i, j int) bool { return found[i].Key().Less(found[j].Key()) })
		if err := r.lg.LinkBelow(found); err != nil {
			r.log.Debug("ledger: linking a checkpoint's prev below the start", "err", err)
		}
	}
}

// walkBack visits each CID reachable from start once, depth first: visit
// gives the CIDs to go on to, and false to stop the walk.
func walkBack(start []cid.Cid, visit func(c cid.Cid) (next []cid.Cid, more bool)) {
	seen := map[string]bool{}
	stack := append([]cid.Cid(nil), start...)
	for len(stack) > 0 {
		c := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[c.KeyString()] {
			continue
		}
		seen[c.KeyString()] = true
		next, more := visit(c)
		if !more {
			return
		}
		stack = append(stack, next...)
	}
}
