package ledger

import (
	"fmt"
	"slices"
)

// The budget of entries without effect (docs/design.md §5.7). Every entry
// stays in the DAG, so a member could grow every node's ledger at the
// gossip rate with entries the fold refuses. The rule, a function of the
// total order like the rest of the fold:
//
//   - The window is the order since the last checkpoint that took effect
//     (its fold empties State.Budgets).
//   - Each entry the fold refuses counts one against the machine that
//     signed it, when that key is a machine of the State at its position
//     (State.Budgets[machine].Ineffective).
//   - The entry that takes a machine past IneffectiveBudget caps it
//     (Budget.Capped names that entry). Every later entry of the window
//     signed by it is skipped: no effect, whatever it does, and counted
//     neither as applied nor as ineffective. So a node that holds some of
//     those entries and one that holds none fold the same State.
//   - A Log refuses to add an entry of a capped machine that sorts after
//     the entry that capped it (ErrCapped; admit), unless an entry it does
//     add names it as a parent: what another machine built on must be
//     kept, or the DAGs split.
//
// Why every node reaches one State: a node with fewer of the machine's
// entries reaches the budget at the same entry or a later one, never an
// earlier one (the k-th refused entry of a subset sorts no earlier than
// the k-th of the whole), so it refuses only entries that the whole's
// fold skips too; entries before its own capping entry it adds, so every
// node ends up holding those of the whole, caps at the same entry, and
// skips the same ones.

// IneffectiveBudget is how many entries without effect a machine may have
// in a window before it is capped. An honest node dry-runs every entry
// against its State before writing it (replica.DryRun); its entries fail
// only in races (two machines writing the same job.start, a move on a
// contract another just ended, a write concurrent with a role change), a
// few a day, against windows of ledger.checkpoint_every entries (default
// 10,000). A flooder gets at most this many entries, plus those in flight
// when it passed the budget, into every node's ledger per window.
const IneffectiveBudget = 64

// ErrCapped is the verdict on an entry of a capped machine (skipped by the
// fold) and the error AddBatch gives for one it refused.
var ErrCapped = fmt.Errorf("%w: capped: its machine passed its budget of entries without effect since the last checkpoint", ErrNotAuthority)

// Budget is one machine's count in the current window.
type Budget struct {
	Ineffective int64     `cbor:"n"`
	Capped      *OrderKey `cbor:"capped,omitempty"` // the entry that passed the budget
}

// IsCapped reports whether machine id is capped in the current window.
func (s *State) IsCapped(id string) bool {
	b, ok := s.Budgets[id]
	return ok && b.Capped != nil
}

// CappedMachines lists the capped machines, sorted.
func (s *State) CappedMachines() []string {
	var out []string
	for _, m := range s.SortedMachines() {
		if s.IsCapped(m.ID) {
			out = append(out, m.ID)
		}
	}
	return out
}

func (s *State) budgetsW() map[string]Budget {
	if s.Budgets == nil {
		s.Budgets = map[string]Budget{}
		s.ownMap(mapBudgets)
	}
	s.Budgets = mapW(s, mapBudgets, s.Budgets)
	return s.Budgets
}

// foldCounted folds e into st under the budget (void: e is in the void
// set, §6) and counts it. skipped: its machine was capped, st is unchanged
// and e is not counted.
func foldCounted(st *State, e *Entry, void bool, budget int) (skipped bool, err error) {
	if st.IsCapped(e.author) {
		return true, ErrCapped
	}
	if void {
		err = ErrVoid
	} else {
		err = Apply(st, e)
	}
	count(st, e, err, budget)
	return false, err
}

// count counts e's verdict err in st: applied, or ineffective and against
// its machine's budget. A checkpoint that took effect starts a new window.
func count(st *State, e *Entry, err error, budget int) {
	if err == nil {
		st.Applied++
		if e.Kind == KindCheckpoint && st.Budgets != nil {
			st.Budgets = nil // a frozen State keeps its map
			st.ownMap(mapBudgets)
		}
		return
	}
	st.Ineffective++
	a := e.author
	if e.Kind == KindGenesis || st.Machines[a] == nil {
		return
	}
	b := st.Budgets[a]
	b.Ineffective++
	if b.Ineffective > int64(budget) {
		k := e.key
		b.Capped = &k
	}
	st.budgetsW()[a] = b
}

// foldOne folds order's node n into l.st (l.apply: the void set and the
// revocation facts) and records its verdict.
func (l *Log) foldOne(n *node) {
	if l.st.IsCapped(n.e.author) {
		n.err = ErrCapped
		return
	}
	err := l.apply(n)
	count(l.st, n.e, err, l.budget)
	n.err, n.applied = err, err == nil
}

// admit returns the entries of batch (sorted in total order) that the Log
// refuses to add: those of a machine capped in the current State that sort
// after the entry that capped it, unless an entry of the batch that is
// added names it as a parent (walked from the last, so that what such an
// entry names is known before its parents are judged).
func (l *Log) admit(batch []*Entry) map[string]error {
	if !l.anyCapped() {
		return nil
	}
	var refused map[string]error
	wanted := map[string]bool{}
	for i := len(batch) - 1; i >= 0; i-- {
		e := batch[i]
		if !wanted[e.key.CID] && l.capRefuses(e) {
			if refused == nil {
				refused = map[string]error{}
			}
			refused[e.key.CID] = ErrCapped
			continue
		}
		for _, p := range e.Parents {
			wanted[p.KeyString()] = true
		}
	}
	return refused
}

func (l *Log) anyCapped() bool {
	for _, b := range l.st.Budgets {
		if b.Capped != nil {
			return true
		}
	}
	return false
}

// capRefuses reports whether e's machine is capped and e, added now, would
// sort after the entry that capped it (a new entry goes to the tail, §5.6).
func (l *Log) capRefuses(e *Entry) bool {
	b, ok := l.st.Budgets[e.author]
	if !ok || b.Capped == nil || l.nodes[e.key.CID] != nil {
		return false
	}
	c := l.nodes[b.Capped.CID]
	return c == nil || c.before(&node{key: e.key, seg: tailSeg})
}

// Capped lists the machines capped in the current window, sorted.
func (l *Log) Capped() []string { return l.st.CappedMachines() }

// evict takes out of the Log the entries just added (added, in total
// order) that the fold skips for their machine's cap and that no entry
// names as a parent: a batch that crosses a machine's budget (an answer
// to a fetch, orphans whose parent arrived) keeps only what the budget
// allows. They changed nothing (skipped entries are not counted), so the
// State and the fold's checkpoints stay as they are, at positions moved
// down. Checkpoints, registrations and revocations are never taken out:
// the barrier tree and the persons remember them, and the void set's
// fixed point was computed with them (taking one out could change it).
// wasHead
// says which of the parents the batch names were heads before it. It
// returns the CID keys of the entries taken out.
func (l *Log) evict(added []*node, wasHead map[string]bool) []string {
	if !slices.ContainsFunc(added, func(n *node) bool { return n.err == ErrCapped }) {
		return nil // the common case: a large catch-up pays one pass
	}
	named := map[*node]bool{}
	out := map[*node]bool{}
	for i := len(added) - 1; i >= 0; i-- {
		n := added[i]
		k := n.e.Kind
		if !n.applied && n.err == ErrCapped && !named[n] && !n.revKind &&
			k != KindCheckpoint && k != KindMachineReg && k != KindGenesis {
			out[n] = true
			continue
		}
		for _, p := range n.parents {
			named[p] = true
		}
	}
	if len(out) == 0 {
		return nil
	}
	keys := make([]string, 0, len(out))
	for n := range out {
		keys = append(keys, n.key.CID)
		delete(l.nodes, n.key.CID)
		delete(l.heads, n.key.CID)
		l.byAuthor[n.e.author] = dropNodes(l.byAuthor[n.e.author], out)
		l.byPerson[n.e.author] = dropNodes(l.byPerson[n.e.author], out)
		for _, p := range l.persons[n.e.author] {
			l.byPerson[p] = dropNodes(l.byPerson[p], out)
		}
	}
	// A parent no kept entry names is a head again when it was one (or
	// came in this batch: only the batch could name it).
	inBatch := make(map[*node]bool, len(added))
	for _, n := range added {
		inBatch[n] = true
	}
	for n := range out {
		for _, p := range n.parents {
			if !out[p] && !named[p] && (wasHead[p.key.CID] || inBatch[p]) {
				l.heads[p.key.CID] = p
			}
		}
	}
	// Out of the order; the fold's checkpoints move down with it.
	kept := l.order[:0]
	shift := make([]int, 0, len(l.order)+1) // entries taken out before each position
	gone := 0
	for _, n := range l.order {
		shift = append(shift, gone)
		if out[n] {
			gone++
			continue
		}
		kept = append(kept, n)
	}
	shift = append(shift, gone)
	clear(l.order[len(kept):])
	l.order = kept
	for i := range l.cps {
		l.cps[i].pos -= shift[l.cps[i].pos]
	}
	l.stFolded = len(l.order)
	// "Revocation wins" (revoke.go): its candidates are cached by index
	// into byPerson, whose lists lost entries; those taken out leave the
	// void set (they were skipped whether void or not).
	for _, r := range l.revs {
		r.cand, r.candSeen = nil, 0
	}
	for n := range out {
		delete(l.void, n)
	}
	return keys
}

func dropNodes(ns []*node, out map[*node]bool) []*node {
	kept := ns[:0]
	for _, n := range ns {
		if !out[n] {
			kept = append(kept, n)
		}
	}
	clear(ns[len(kept):])
	return kept
}

// headSet is the CID keys of the heads now.
func (l *Log) headSet() map[string]bool {
	out := make(map[string]bool, len(l.heads))
	for k := range l.heads {
		out[k] = true
	}
	return out
}
