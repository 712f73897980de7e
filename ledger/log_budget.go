package ledger

// The budget of entries without effect (docs/design.md §5.8). Every entry
// stays in the DAG, so a member could grow every node's ledger at the
// gossip rate with entries the fold refuses. The fold only counts them,
// a function of the total order like the rest of the State:
//
//   - The window is the order since the last checkpoint that took effect
//     (its fold empties State.Budgets).
//   - Each entry the fold refuses counts one against the machine that
//     signed it, when that key is a machine of the State at its position
//     (State.Budgets[machine].Ineffective).
//   - The entry that takes a machine past IneffectiveBudget caps it
//     (Budget.Capped names that entry).
//
// The cap changes no verdict: the fold applies every entry, a capped
// machine's too, exactly as it would without the budget, so the State is
// a function of the DAG whatever entries a node holds. The cap is a gate
// at the network's door instead (p2p.Capper, replica/cap.go): every node
// refuses what the capped machine itself sends, and accepts its entries
// that other machines pass on, so every honest node ends up holding the
// same DAG.

// IneffectiveBudget is how many entries without effect a machine may have
// in a window before it is capped. An honest node dry-runs every entry
// against its State before writing it (replica.DryRun); its entries fail
// only in races (two machines writing the same job.start, a move on a
// contract another just ended, a write concurrent with a role change), a
// few a day, against windows of ledger.checkpoint_every entries (default
// 10,000).
const IneffectiveBudget = 64

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

// foldCounted folds e into st (void: e is in the void set, §6) and counts
// its verdict.
func foldCounted(st *State, e *Entry, void bool, budget int) error {
	err := ErrVoid
	if !void {
		err = Apply(st, e)
	}
	count(st, e, err, budget)
	return err
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
	if b.Capped == nil && b.Ineffective > int64(budget) {
		k := e.key
		b.Capped = &k
	}
	st.budgetsW()[a] = b
}

// foldOne folds order's node n into l.st (l.apply: the void set and the
// revocation facts), counts it and records its verdict.
func (l *Log) foldOne(n *node) {
	err := l.apply(n)
	count(l.st, n.e, err, l.budget)
	n.err, n.applied = err, err == nil
}

// Capped lists the machines capped in the current window, sorted.
func (l *Log) Capped() []string { return l.st.CappedMachines() }
