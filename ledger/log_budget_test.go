package ledger

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"pgregory.net/rapid"
)

// uncount takes back what counting ineffective entry e changed in st:
// Ineffective and its machine's budget (and the cap, when e capped it).
func uncount(st *State, e *Entry) {
	st.Ineffective--
	if b, ok := st.Budgets[e.author]; ok && b.Ineffective == 1 {
		delete(st.Budgets, e.author)
	} else if ok {
		b.Ineffective--
		if b.Capped != nil && *b.Capped == e.key {
			b.Capped = nil
		}
		st.Budgets[e.author] = b
	}
	if len(st.Budgets) == 0 {
		st.Budgets = nil
	}
}

// TestBudgetCapsAMachine: a member's machine writes entries without effect;
// the one past the budget caps it. The cap changes no verdict: the capped
// machine's later entries are folded as any other (one that takes effect
// does), and those without effect go on counting. An entry sorting before
// the capping one moves the cap earlier; a Log fed the same entries in
// another order folds the same State; a checkpoint starts a new window.
func TestBudgetCapsAMachine(t *testing.T) {
	w := newWorld(t)
	h := w.member(2, RoleMember)
	f := w.member(3, RoleMember)
	early := w.heads() // parents of a back-dated entry, later
	flood := func(i int) OrgUpdate { s := fmt.Sprintf("f%d", i); return OrgUpdate{Name: &s} }
	var fl []*Entry
	for i := range IneffectiveBudget {
		fl = append(fl, w.denied(ErrNotAuthority, f, KindOrgUpdate, flood(i)))
		if w.log.State().IsCapped(f.id) {
			t.Fatalf("capped after %d entries without effect; the budget is %d", i+1, IneffectiveBudget)
		}
	}
	capping, err := w.write(f, KindOrgUpdate, flood(IneffectiveBudget))
	if !errors.Is(err, ErrNotAuthority) {
		t.Fatalf("the entry past the budget: verdict %v, want its own refusal", err)
	}
	st := w.log.State()
	if !st.IsCapped(f.id) || *st.Budgets[f.id].Capped != capping.Key() || st.IsCapped(h.id) {
		t.Fatalf("budgets %+v: want %s capped at %s", st.Budgets, f.id, capping.CID())
	}
	if got := w.log.Capped(); len(got) != 1 || got[0] != f.id {
		t.Fatalf("Capped() = %v", got)
	}

	// The fold does not look at the cap: an entry of the capped machine
	// that takes effect does; one without effect is counted.
	job := w.ok(f, KindJobSubmit, JobSpec{Driver: "exec", Cmd: []string{"true"}, RangeStart: 1, RangeEnd: 1, Priority: 5, CPUs: 1})
	if w.log.State().Jobs[JobIDFor(job)] == nil {
		t.Fatal("the capped machine's job is not in the State")
	}
	more := w.denied(ErrNotAuthority, f, KindOrgUpdate, flood(1000))
	if got := w.log.State().Budgets[f.id]; got.Ineffective != IneffectiveBudget+2 || *got.Capped != capping.Key() {
		t.Fatalf("budget %+v, want %d counted and the cap where it was", got, IneffectiveBudget+2)
	}

	// An entry that sorts before the capping one caps the machine one
	// entry earlier.
	back := w.on(f, KindOrgUpdate, flood(2000), early...)
	if !back.Key().Less(capping.Key()) {
		t.Fatal("test: the back-dated entry does not sort before the capping one")
	}
	if v, err := w.log.Add(back); err != nil || !errors.Is(v, ErrNotAuthority) {
		t.Fatalf("back-dated entry: verdict %v, err %v", v, err)
	}
	ineff := append(fl, capping, more, back)
	sort.Slice(ineff, func(i, j int) bool { return ineff[i].Key().Less(ineff[j].Key()) })
	if ineff[IneffectiveBudget] == capping {
		t.Fatal("test: the cap did not move")
	}
	if got := w.log.State().Budgets[f.id]; got.Ineffective != IneffectiveBudget+3 || *got.Capped != ineff[IneffectiveBudget].Key() {
		t.Fatalf("budget %+v, want %d counted, capped at the entry before", got, IneffectiveBudget+3)
	}

	// Another order, batches of three: the same State and capped set.
	all := w.log.Entries()
	l := NewLog()
	rng := rand.New(rand.NewPCG(1, 2))
	for es := topoOrder(all, rng); len(es) > 0; es = es[min(3, len(es)):] {
		if _, err := l.AddBatch(es[:min(3, len(es))]); err != nil {
			t.Fatal(err)
		}
	}
	if l.StateHash() != w.log.StateHash() || !slices.Equal(l.Capped(), w.log.Capped()) {
		t.Fatalf("another delivery order: state %s capped %v; want %s %v", l.StateHash(), l.Capped(), w.log.StateHash(), w.log.Capped())
	}
	checkInternal(t, w.log)
	// The budgets are in the State's snapshot a joiner decodes.
	b, err := EncodeState(w.log.State())
	if err != nil {
		t.Fatal(err)
	}
	if st, err := DecodeState(b); err != nil || st.Hash() != w.log.State().Hash() || !st.IsCapped(f.id) {
		t.Fatalf("the State with a capped machine through EncodeState and DecodeState: %v", err)
	}

	// A checkpoint starts a new window.
	w.ok(w.owner, KindCheckpoint, checkpointOf(w.log))
	if w.log.State().Budgets != nil {
		t.Fatalf("after a checkpoint: budgets %+v", w.log.State().Budgets)
	}
	w.denied(ErrNotAuthority, f, KindOrgUpdate, flood(3000))
	if got := w.log.State().Budgets[f.id]; got.Ineffective != 1 || got.Capped != nil {
		t.Fatalf("the new window: budget %+v", got)
	}
}

// TestBudgetCountsABatch: a chain of 200 entries without effect by one
// machine, arriving in one batch (an answer to a fetch) with a promotion
// of another member, is kept whole and counted: the machine is capped at
// its 65th; the promotion takes effect. The machine's person had been
// demoted ("revocation wins" runs over the batch). The same entries one
// by one fold the same State.
func TestBudgetCountsABatch(t *testing.T) {
	w := newWorld(t)
	h := w.member(2, RoleMember)
	f := w.member(3, RoleAdmin)
	w.ok(w.owner, KindMemberRole, MemberRole{Member: f.id, Role: RoleMember})
	n := w.log.Len()
	parents := w.heads()
	promote := w.on(w.owner, KindMemberRole, MemberRole{Member: h.id, Role: RoleAdmin}, parents...)
	var chain []*Entry
	for i := range 200 {
		e := w.on(f, KindMachineReject, MachineRef{Machine: fmt.Sprintf("m%d", i)}, parents...)
		chain = append(chain, e)
		parents = []*Entry{e}
	}
	errs, err := w.log.AddBatch(append(slices.Clone(chain), promote))
	if err != nil || errs[len(chain)] != nil {
		t.Fatalf("AddBatch: %v (the promotion: %v)", err, errs[len(chain)])
	}
	if got, want := w.log.Len(), n+201; got != want {
		t.Fatalf("the log holds %d entries, want %d", got, want)
	}
	b := w.log.State().Budgets[f.id]
	if b.Ineffective != 200 || b.Capped == nil || *b.Capped != chain[IneffectiveBudget].Key() {
		t.Fatalf("budget %+v, want 200 counted and capped at entry %d", b, IneffectiveBudget)
	}
	checkInternal(t, w.log)
	w.ok(w.owner, KindMemberRole, MemberRole{Member: h.id, Role: RoleMember}) // a revocation's fold again
	checkInternal(t, w.log)
	l := NewLog()
	for _, e := range topoOrder(w.log.Entries(), rand.New(rand.NewPCG(3, 4))) {
		if _, err := l.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	if l.StateHash() != w.log.StateHash() {
		t.Fatal("one by one: another State")
	}
}

// TestBudgetIsAFunctionOfTheDAG (rapid): a random DAG (dagGen: joins,
// power struggles, revocations, back-dated entries, checkpoints, plenty of
// entries without effect) with floods of entries without effect, under a
// small budget. Nodes take it in random orders and chunks through the
// gate of replica/cap.go: an entry its author sends itself is refused once
// the node has folded the author's cap; one another peer passes on is
// taken. Then the nodes exchange what they hold (honest peers' answers,
// no gate). Every node ends on the union, and on the State and capped set
// of a Log given the union in one batch: the gate cannot split the State.
func TestBudgetIsAFunctionOfTheDAG(t *testing.T) {
	var actors []*actor
	for i := 0; i < 6; i++ {
		actors = append(actors, newActor(t, byte(1+i)))
	}
	stats := map[string]int{}
	rapid.Check(t, func(rt *rapid.T) {
		budget := rapid.IntRange(1, 4).Draw(rt, "budget")
		g := newDagGen(t, rt, actors)
		for n := rapid.IntRange(5, 50).Draw(rt, "steps"); n > 0; n-- {
			if rapid.IntRange(0, 5).Draw(rt, "flood") > 0 {
				g.step()
				continue
			}
			r := g.reps[rapid.IntRange(2, 4).Draw(rt, "flooder")]
			for k := rapid.IntRange(1, 6).Draw(rt, "floods"); k > 0; k-- {
				g.write(r, KindMachineReject, MachineRef{Machine: fmt.Sprintf("nobody%d", g.now)}, nil)
			}
		}
		nodes := make([]*Log, 3)
		for i := range nodes {
			l := newLog(rapid.IntRange(1, 6).Draw(rt, "cpEvery"), 3)
			l.budget = budget
			order := topoOrder(g.all, rand.New(rand.NewPCG(rapid.Uint64().Draw(rt, "seed"), 1)))
			for len(order) > 0 {
				k := min(len(order), rapid.IntRange(1, 8).Draw(rt, "chunk"))
				var chunk []*Entry
				for _, e := range order[:k] {
					direct := rapid.IntRange(0, 2).Draw(rt, "direct") > 0
					if direct && l.State().IsCapped(e.AuthorString()) {
						stats["refused at the gate"]++
						continue
					}
					if !hasParents(l, e, chunk) {
						continue // its parent was refused: it waits for the exchange
					}
					chunk = append(chunk, e)
				}
				order = order[k:]
				if _, err := l.AddBatch(chunk); err != nil && !errors.Is(err, ErrMissingParents) {
					rt.Fatalf("node %d: %v", i, err)
				}
			}
			nodes[i] = l
		}
		var union []*Entry
		for _, e := range g.all {
			for _, l := range nodes {
				if l.Has(e.CID()) {
					union = append(union, e)
					break
				}
			}
		}
		ref := NewLog()
		ref.budget = budget
		if _, err := ref.AddBatch(union); err != nil {
			rt.Fatal(err)
		}
		for i, l := range nodes {
			var missing []*Entry
			for _, e := range union {
				if !l.Has(e.CID()) {
					missing = append(missing, e)
				}
			}
			if _, err := l.AddBatch(missing); err != nil {
				rt.Fatalf("node %d: the exchange: %v", i, err)
			}
			if l.Len() != len(union) || l.StateHash() != ref.StateHash() || !slices.Equal(l.Capped(), ref.Capped()) {
				rt.Fatalf("node %d: %d entries, state %s capped %v; the union: %d, %s %v",
					i, l.Len(), l.StateHash(), l.Capped(), len(union), ref.StateHash(), ref.Capped())
			}
			checkInternal(t, l)
		}
		checkRevocationWins(rt, ref)
		stats["left out by the gate"] += len(g.all) - len(union)
		stats["capped"] += len(ref.Capped())
		for _, n := range ref.order {
			if n.void {
				stats["void"]++
			}
			if n.revoked {
				stats["revocations"]++
			}
		}
	})
	t.Logf("over all runs: %v", stats)
	if stats["capped"] == 0 || stats["refused at the gate"] == 0 || stats["void"] == 0 || stats["revocations"] == 0 {
		t.Fatalf("the generator did not exercise caps, the gate and revocations: %v", stats)
	}
}

// hasParents reports whether every parent of e is in l or in chunk.
func hasParents(l *Log, e *Entry, chunk []*Entry) bool {
	for _, p := range e.Parents {
		if !l.Has(p) && !slices.ContainsFunc(chunk, func(c *Entry) bool { return c.CID() == p }) {
			return false
		}
	}
	return true
}
