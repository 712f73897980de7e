package ledger

import (
	"errors"
	"math/rand/v2"
	"testing"
)

// checkInternal verifies the Log's bookkeeping against a fold from scratch:
// every checkpoint is the state of its prefix, the current state covers the
// whole order, and every verdict is what a plain fold with the current void
// set gives.
func checkInternal(tb testing.TB, l *Log) {
	tb.Helper()
	if l.stFolded != len(l.order) {
		tb.Fatalf("state covers %d of %d entries", l.stFolded, len(l.order))
	}
	if len(l.cps) > l.cpMax {
		tb.Fatalf("%d checkpoints, max %d", len(l.cps), l.cpMax)
	}
	st := NewState()
	cp := 0
	for i := 0; i <= len(l.order); i++ {
		for cp < len(l.cps) && l.cps[cp].pos == i {
			if l.cps[cp].st.Hash() != st.Hash() {
				tb.Fatalf("checkpoint at %d is stale", i)
			}
			cp++
		}
		if i == len(l.order) {
			break
		}
		n := l.order[i]
		if i > 0 && !l.order[i-1].before(n) {
			tb.Fatalf("order is not sorted at %d", i)
		}
		err := foldCounted(st, n.e, n.void, l.budget)
		if (err == nil) != n.applied {
			tb.Fatalf("entry %d (%s): applied %v, a fresh fold says %v (%v)", i, n.e.Kind, n.applied, err == nil, err)
		}
	}
	if cp != len(l.cps) {
		tb.Fatalf("checkpoints out of order or past the end")
	}
	if st.Hash() != l.State().Hash() {
		tb.Fatal("state differs from a fresh fold")
	}
}

// TestLateEntries: a long ledger with entries arriving late, far back in the
// total order, re-folds from checkpoints to the same state as a fresh load.
func TestLateEntries(t *testing.T) {
	w := newWorld(t)
	m := w.member(2, RoleMember)
	job := w.submit(m, 400, 0)
	// A side branch by another machine, written early but delivered late.
	late := w.member(3, RoleMember)
	fork := w.heads()
	var side []*Entry
	prev := fork
	for i := 0; i < 30; i++ {
		e := w.on(late, KindJobResults, JobResults{Job: job, Results: []ItemResult{{Item: int64(i + 1), Code: int64(i % 2)}}}, prev...)
		side = append(side, e)
		prev = []*Entry{e}
	}
	l := newLog(8, 4)
	for _, e := range w.log.Entries() {
		if _, err := l.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 300; i++ {
		e, _ := w.write(m, KindJobResults, JobResults{Job: job, Results: []ItemResult{{Item: int64(i + 1)}}})
		if _, err := l.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	checkInternal(t, l)
	if len(l.cps) < 2 {
		t.Fatalf("%d checkpoints", len(l.cps))
	}
	// Deliver the side branch one by one: each sorts far back.
	for _, e := range side {
		if _, err := l.Add(e); err != nil {
			t.Fatal(err)
		}
		checkInternal(t, l)
	}
	for _, e := range side {
		w.mustAdd(e)
	}
	fresh := NewLog()
	if _, err := fresh.AddBatch(w.log.Entries()); err != nil {
		t.Fatal(err)
	}
	if l.State().Hash() != fresh.State().Hash() || w.log.State().Hash() != fresh.State().Hash() {
		t.Fatal("late delivery differs from a fresh load")
	}
	// The side branch's failures came first in total order for the items
	// they share with the main branch.
	if it := fresh.State().Jobs[job].Items.At(0); it.Machine != late.id && it.Machine != m.id {
		t.Fatalf("item 1 machine %q", it.Machine)
	}
}

// TestCheckpointsSpacedByStateSize: a large State is copied less often.
func TestCheckpointsSpacedByStateSize(t *testing.T) {
	w := newWorld(t)
	m := w.member(2, RoleMember)
	job := w.submit(m, 100_000, 0)
	l := newLog(16, 8)
	if _, err := l.AddBatch(w.log.Entries()); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		e, _ := w.write(m, KindJobResults, JobResults{Job: job, Results: []ItemResult{{Item: int64(i + 1)}}})
		if _, err := l.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	if len(l.cps) > 1 {
		t.Fatalf("%d checkpoints of a 100000-item state in 200 entries", len(l.cps))
	}
}

func TestAddBatchVerdicts(t *testing.T) {
	w := newWorld(t)
	m := newActor(t, 2)
	reg := w.on(m, KindMachineReg, w.register(m, w.invite(w.owner, RoleMember, 0, 0)), w.gen)
	bad := w.on(m, KindMachineApprove, MachineRef{Machine: m.id}, reg)
	l := NewLog()
	errs, err := l.AddBatch([]*Entry{bad, w.gen, reg, reg})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(errs[0], ErrNotAuthority) || errs[1] != nil || errs[2] != nil || errs[3] != nil {
		t.Fatalf("verdicts %v", errs)
	}
	if l.Len() != 3 {
		t.Fatalf("len %d", l.Len())
	}
	// Re-adding reports the current verdict.
	if v, err := l.Add(bad); err != nil || !errors.Is(v, ErrNotAuthority) {
		t.Fatalf("re-add: %v, %v", v, err)
	}
	if !errors.Is(l.Verdict(bad.CID()), ErrNotAuthority) || l.Verdict(reg.CID()) != nil {
		t.Fatal("Verdict disagrees with AddBatch")
	}
	if !errors.Is(l.Verdict(w.on(m, KindMachineUpdate, MachineUpdate{}, reg).CID()), ErrNotFound) {
		t.Fatal("Verdict of an unknown entry")
	}
	hs, clock := l.Heads()
	if len(hs) != 1 || !hs[0].Equals(bad.CID()) || clock != bad.Clock {
		t.Fatalf("heads %v clock %d", hs, clock)
	}
	if es := l.Entries(); len(es) != 3 || es[0] != w.gen || es[2] != bad {
		t.Fatal("entries not in total order")
	}
	if l.Get(reg.CID()) != reg || !l.Has(reg.CID()) || l.Org() != w.org {
		t.Fatal("Get/Has/Org")
	}
}

// TestRandomLateDeliveryKeepsBookkeeping: random DAGs with power struggles,
// delivered one entry at a time in random orders, keep every checkpoint and
// verdict equal to a fresh fold after every single Add.
func TestRandomLateDeliveryKeepsBookkeeping(t *testing.T) {
	for seed := uint64(0); seed < 6; seed++ {
		rng := rand.New(rand.NewPCG(seed, 99))
		w := newWorld(t)
		var people []*actor
		for i := 0; i < 4; i++ {
			people = append(people, w.member(byte(2+i), []string{RoleAdmin, RoleMember}[i%2]))
		}
		job := w.submit(people[1], 10, 1)
		var es []*Entry
		tips := map[*actor][]*Entry{}
		for i := 0; i < 80; i++ {
			a := people[rng.IntN(len(people))]
			parents := tips[a]
			if parents == nil || rng.IntN(4) == 0 {
				parents = w.heads()
			}
			var e *Entry
			switch rng.IntN(4) {
			case 0:
				e = w.on(a, KindMemberRemove, MemberRef{Member: people[rng.IntN(len(people))].id}, parents...)
			case 1:
				e = w.on(a, KindMemberRole, MemberRole{Member: people[rng.IntN(len(people))].id, Role: []string{RoleAdmin, RoleMember}[rng.IntN(2)]}, parents...)
			default:
				e = w.on(a, KindJobResults, JobResults{Job: job, Results: []ItemResult{{Item: int64(1 + rng.IntN(10)), Code: int64(rng.IntN(2))}}}, parents...)
			}
			tips[a] = []*Entry{e}
			es = append(es, e)
			if rng.IntN(3) == 0 { // the shared heads move on now and then
				for _, e := range es {
					if !w.log.Has(e.CID()) {
						w.mustAdd(e)
					}
				}
			}
		}
		for _, e := range es {
			if !w.log.Has(e.CID()) {
				w.mustAdd(e)
			}
		}
		all := w.log.Entries()
		l := newLog(1+int(seed%4), 3)
		for _, e := range topoOrder(all, rng) {
			if _, err := l.Add(e); err != nil {
				t.Fatal(err)
			}
			checkInternal(t, l)
		}
		if l.State().Hash() != w.log.State().Hash() {
			t.Fatalf("seed %d: delivery order changed the state", seed)
		}
	}
}
