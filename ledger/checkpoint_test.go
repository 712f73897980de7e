package ledger

import (
	"errors"
	"slices"
	"testing"
)

// busyWorld is an org with an admin, a member, a job with results, a
// dataset-free market-free mix: enough tables to round-trip.
func busyWorld(t testing.TB) (*world, *actor) {
	w := newWorld(t)
	m := w.member(2, RoleMember)
	w.member(3, RoleAdmin)
	id := w.submit(m, 5, 1)
	w.ok(m, KindJobResults, JobResults{Job: id, Results: []ItemResult{{Item: 1, DurationMS: 5}, {Item: 2, Code: 1}}})
	w.ok(w.owner, KindOrgUpdate, OrgUpdate{LedgerCheckpointEvery: i64(1000), Policies: map[string]int64{PolicyMaxJobMemory: 4096}})
	return w, m
}

func checkpointOf(l *Log) Checkpoint {
	st := l.State()
	var prev string
	if t := l.Top(); t.Entry != nil {
		prev = t.Entry.CID().String()
	}
	return Checkpoint{Prev: prev, Entries: st.Applied + st.Ineffective, Hash: l.StateHash()}
}

// TestStateCodec: DecodeState gives back a State of the same hash whose
// encoding is the input, and refuses anything else with ErrMalformed.
func TestStateCodec(t *testing.T) {
	w, _ := busyWorld(t)
	b, err := EncodeState(w.log.State())
	if err != nil {
		t.Fatal(err)
	}
	st, err := DecodeState(b)
	if err != nil {
		t.Fatalf("DecodeState: %v", err)
	}
	if st.Hash() != w.log.State().Hash() {
		t.Fatal("decoded State has another hash")
	}
	if st.Settings.Ledger.CheckpointEvery != 1000 || len(st.Jobs) != 1 {
		t.Fatalf("decoded State lost content: %+v", st.Settings.Ledger)
	}
	// The decoded State folds on like the original.
	st2 := w.log.State().Clone()
	e := w.on(w.owner, KindOrgUpdate, OrgUpdate{Name: ptr("acme2")}, w.heads()...)
	if err1, err2 := Apply(st, e), Apply(st2, e); err1 != nil || err2 != nil || st.Hash() != st2.Hash() {
		t.Fatalf("folding on the decoded State: %v, %v", err1, err2)
	}
	for name, bad := range map[string][]byte{
		"empty":      {},
		"trailing":   append(append([]byte(nil), b...), 0),
		"not a map":  {0x01},
		"null table": mustEncode(t, map[string]any{"members": nil}),
	} {
		if _, err := DecodeState(bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
}

func mustEncode(t testing.TB, v any) []byte {
	b, err := EncodePayload(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzDecodeState: DecodeState never panics, and what it accepts encodes
// back to the same bytes.
func FuzzDecodeState(f *testing.F) {
	w, _ := busyWorld(f)
	b, err := EncodeState(w.log.State())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	empty, _ := EncodeState(NewState())
	f.Add(empty)
	f.Add([]byte{0xa0})
	capped := NewState() // a machine capped by the budget (log_budget.go)
	capped.Budgets = map[string]Budget{"m": {Ineffective: 65, Capped: &OrderKey{Clock: 3, CID: "x"}}, "n": {Ineffective: 2}}
	cb, _ := EncodeState(capped)
	f.Add(cb)
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := DecodeState(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		again, err := EncodeState(st)
		if err != nil || string(again) != string(b) {
			t.Fatalf("accepted bytes do not re-encode: %v", err)
		}
		st.Clone().Hash()
	})
}

// TestCheckpointBarrier: an entry written concurrently with a checkpoint
// sorts after it, whatever its clock and CID and whenever it arrives, so
// the State before the checkpoint is the one it names; a Log started at
// the checkpoint reaches the same State as one that has all history.
func TestCheckpointBarrier(t *testing.T) {
	w, m := busyWorld(t)
	fork := w.heads()
	// m's entry on the old heads, concurrent with the checkpoint; a chain
	// of the owner's entries makes the checkpoint's clock larger.
	late := w.on(m, KindJobSubmit, JobSpec{Driver: "exec", Cmd: []string{"true"}, RangeStart: 1, RangeEnd: 2, Priority: 5, CPUs: 1}, fork...)
	w.ok(w.owner, KindOrgUpdate, OrgUpdate{Description: ptr("one")})
	cp := w.ok(w.owner, KindCheckpoint, checkpointOf(w.log))
	if !late.Key().Less(cp.Key()) {
		t.Fatal("test setup: the late entry should sort before the checkpoint by clock")
	}
	named := w.log.State().Clone()
	named.Applied-- // the State before the checkpoint
	after := w.ok(w.owner, KindOrgUpdate, OrgUpdate{Description: ptr("two")})
	w.mustAdd(late)
	if w.log.Top().Entry != cp || w.log.Top().Depth != 1 {
		t.Fatalf("top: %+v", w.log.Top())
	}
	st, below, err := w.log.AtBarrier(cp)
	if err != nil {
		t.Fatal(err)
	}
	if st.Hash() != named.Hash() {
		t.Fatal("the State at the checkpoint changed when a concurrent entry arrived")
	}
	if !w.log.Effective(late.CID()) || len(w.log.State().Jobs) != 2 {
		t.Fatal("the late entry did not take effect after the checkpoint")
	}
	// Every delivery order agrees.
	all := w.log.Entries()
	for i := range 3 {
		l := replay(t, rotate(all, late, i))
		if l.StateHash() != w.log.StateHash() {
			t.Fatalf("delivery %d: another state", i)
		}
	}
	// A Log started at the checkpoint.
	j, err := NewLogAt(st, cp, 1, below)
	if err != nil {
		t.Fatal(err)
	}
	tail := w.log.Tail()
	if len(tail) != 2 || tail[0] != after && tail[1] != after {
		t.Fatalf("tail: %d entries", len(tail))
	}
	if _, err := j.AddBatch(tail); err != nil {
		t.Fatal(err)
	}
	if j.StateHash() != w.log.StateHash() {
		t.Fatal("the Log started at the checkpoint reached another state")
	}
	// A new entry on both.
	e := w.ok(m, KindJobCancel, JobRef{Job: JobIDFor(late)})
	if _, err := j.Add(e); err != nil || j.StateHash() != w.log.StateHash() {
		t.Fatalf("after a new entry: %v", err)
	}

	// What a joiner refuses: another hash, another count, a member's
	// checkpoint.
	bad := st.Clone()
	bad.Name = "forged"
	if _, err := NewLogAt(bad, cp, 1, below); !errors.Is(err, ErrMalformed) {
		t.Fatalf("forged state: %v", err)
	}
	if _, err := NewLogAt(st, cp, 2, below); !errors.Is(err, ErrMalformed) {
		t.Fatalf("wrong depth: %v", err)
	}
}

// rotate moves late to position i of the topological order es (it has
// no children there).
func rotate(es []*Entry, late *Entry, i int) []*Entry {
	var out []*Entry
	for _, e := range es {
		if e != late {
			out = append(out, e)
		}
	}
	pos := len(out) - i
	return append(out[:pos:pos], append([]*Entry{late}, out[pos:]...)...)
}

// TestCheckpointFold: only admins write checkpoints, with a well-formed
// payload naming the count of its ancestors.
func TestCheckpointFold(t *testing.T) {
	w, m := busyWorld(t)
	good := checkpointOf(w.log)
	w.denied(ErrNotAuthority, m, KindCheckpoint, good)
	c := checkpointOf(w.log)
	c.Entries++
	w.denied(ErrMalformed, w.owner, KindCheckpoint, c)
	c = checkpointOf(w.log)
	c.Hash = "ABC"
	w.denied(ErrMalformed, w.owner, KindCheckpoint, c)
	c = checkpointOf(w.log)
	c.Prev = "not a cid"
	w.denied(ErrMalformed, w.owner, KindCheckpoint, c)
	w.ok(w.owner, KindCheckpoint, checkpointOf(w.log))
}

// TestLedgerSettings: org.update's ledger settings are checked together.
func TestLedgerSettings(t *testing.T) {
	w, _ := busyWorld(t)
	w.denied(ErrMalformed, w.owner, KindOrgUpdate, OrgUpdate{LedgerCheckpointEvery: i64(5)})
	w.denied(ErrMalformed, w.owner, KindOrgUpdate, OrgUpdate{LedgerCheckpointEveryMS: i64(1000)})
	w.denied(ErrMalformed, w.owner, KindOrgUpdate, OrgUpdate{LedgerRetainMS: i64(-1)})
	w.ok(w.owner, KindOrgUpdate, OrgUpdate{LedgerCheckpointEveryMS: i64(3_600_000), LedgerRetainMS: i64(720 * 3_600_000)})
	s := w.log.State().Settings.Ledger
	if s.CheckpointEvery != 0 || s.CheckpointEveryMS != 3_600_000 || s.RetainMS != 720*3_600_000 {
		t.Fatalf("settings: %+v", s)
	}
	if !s.CheckpointDue(1, 0, 3_600_000) || s.CheckpointDue(1, 0, 3_599_999) || s.CheckpointDue(0, 0, 1<<40) {
		t.Fatal("CheckpointDue by time")
	}
	if (LedgerSettings{}).CheckpointDue(DefaultCheckpointEvery-1, 0, 0) || !(LedgerSettings{}).CheckpointDue(DefaultCheckpointEvery, 0, 0) {
		t.Fatal("CheckpointDue by count")
	}
}

// TestCheckpointAncestorsSentAgain: a node that started at a checkpoint
// and syncs with a peer gets again the checkpoint's ancestors above the
// sync's floor, in one answer with their descendants on the way to the
// checkpoint. Those whose parents it holds (entries below the checkpoint
// that later entries name) were folded a second time: a joiner in the
// nemesis counted runs twice and reached another state. They are known
// as ancestors and left out, whatever else comes with them.
func TestCheckpointAncestorsSentAgain(t *testing.T) {
	w, m := busyWorld(t)
	fork := w.heads()
	late := w.on(m, KindJobSubmit, JobSpec{Driver: "exec", Cmd: []string{"true"}, RangeStart: 1, RangeEnd: 2, Priority: 5, CPUs: 1}, fork...)
	id := w.submit(m, 3, 1)
	w.ok(m, KindJobResults, JobResults{Job: id, Results: []ItemResult{{Item: 1, DurationMS: 5, Instance: "i", Started: 1}}})
	under := w.ok(m, KindJobResults, JobResults{Job: id, Results: []ItemResult{{Item: 2, DurationMS: 5, Instance: "i", Started: 2}}})
	cp := w.ok(w.owner, KindCheckpoint, checkpointOf(w.log))
	w.ok(m, KindJobResults, JobResults{Job: id, Results: []ItemResult{{Item: 3, DurationMS: 5, Instance: "i", Started: 3}}})
	w.mustAdd(late)
	st, below, err := w.log.AtBarrier(cp)
	if err != nil {
		t.Fatal(err)
	}
	if len(below) == 0 {
		t.Fatal("test setup: the late entry should name entries below the checkpoint")
	}
	join := func() *Log {
		j := joinAt(t, st, cp, below, w.log.Tail())
		if j.StateHash() != w.log.StateHash() {
			t.Fatal("the Log started at the checkpoint reached another state")
		}
		return j
	}
	all := w.log.Entries()
	// Everything, as a sync from the genesis answers; and the newest
	// entries, as one above a floor does.
	for _, from := range []int{0, len(all) - 8, len(all) - 5} {
		j := join()
		_, _ = j.AddBatch(all[from:])
		if j.StateHash() != w.log.StateHash() {
			t.Errorf("entries %d.. sent again: another state (%d applied, want %d)", from, j.State().Applied, w.log.State().Applied)
		}
		// And a new entry after that.
		e := w.ok(m, KindJobResults, JobResults{Job: id, Results: []ItemResult{{Item: 2, DurationMS: 7, Instance: "k", Started: int64(10 + from)}}})
		if _, err := j.Add(e); err != nil || j.StateHash() != w.log.StateHash() {
			t.Errorf("entries %d.. sent again, then a new entry: %v, same state %t", from, err, j.StateHash() == w.log.StateHash())
		}
	}

	// An entry written later on a parent below the checkpoint that the
	// joiner was not sent (a machine cut off while the checkpoint was
	// written): it waits for that parent, then sorts after the checkpoint
	// as on every node (it left the joiner stuck on it, every later entry
	// an orphan). The parent, once it arrives, counts as held.
	j := join()
	lag := w.on(m, KindJobResults, JobResults{Job: id, Results: []ItemResult{{Item: 3, DurationMS: 9, Instance: "l", Started: 99}}}, under)
	w.mustAdd(lag)
	if _, err := j.Add(lag); !errors.Is(err, ErrMissingParents) {
		t.Fatalf("an entry on a parent the joiner has not seen: %v, want missing parents", err)
	}
	if _, err := j.AddBatch([]*Entry{under, lag}); err != nil {
		t.Fatal(err)
	}
	if !j.Has(under.CID()) || j.Get(under.CID()) != nil || !j.Has(lag.CID()) {
		t.Fatalf("held: the parent %t (as an entry: %v), the late entry %t", j.Has(under.CID()), j.Get(under.CID()) != nil, j.Has(lag.CID()))
	}
	if j.StateHash() != w.log.StateHash() {
		t.Errorf("an entry on a parent below the checkpoint: another state (%d applied, want %d)", j.State().Applied, w.log.State().Applied)
	}
	// Started again at the checkpoint (a compaction, or a joiner of the
	// joiner): the held parent comes as a stub, and the late entry links.
	st2, below2, err := j.AtBarrier(cp)
	if err != nil {
		t.Fatal(err)
	}
	after, err := j.After(cp)
	if err != nil {
		t.Fatal(err)
	}
	if again := joinAt(t, st2, cp, below2, after); again.StateHash() != w.log.StateHash() || !again.Has(lag.CID()) {
		t.Error("started again at the checkpoint: another state")
	}
}

// TestLinkPruned: an entry on a parent below the start links through the
// parent's stub (its CID and clock, what a node that pruned it keeps) as
// on a Log that links the parent itself: the same state and count; the
// stub is held but is no entry (Get, Entries, Heads), and a Log started
// again at the barrier holds it as the other holds the real parent.
func TestLinkPruned(t *testing.T) {
	w, m := busyWorld(t)
	id := w.submit(m, 3, 1)
	under := w.ok(m, KindJobResults, JobResults{Job: id, Results: []ItemResult{{Item: 1, DurationMS: 5, Instance: "i", Started: 1}}})
	cp := w.ok(w.owner, KindCheckpoint, checkpointOf(w.log))
	w.ok(w.owner, KindOrgUpdate, OrgUpdate{Description: ptr("after")})
	st, below, err := w.log.AtBarrier(cp)
	if err != nil {
		t.Fatal(err)
	}
	held, pruned := joinAt(t, st, cp, below, w.log.Tail()), joinAt(t, st, cp, below, w.log.Tail())
	if err := w.log.LinkPruned(under.CID(), under.Clock); err == nil {
		t.Fatal("LinkPruned on a Log that holds all of history")
	}
	if err := pruned.LinkPruned(under.CID(), cp.Clock+1); !errors.Is(err, ErrMalformed) {
		t.Fatalf("a stub that does not sort below the start: %v", err)
	}
	lag := w.on(m, KindJobResults, JobResults{Job: id, Results: []ItemResult{{Item: 2, DurationMS: 9, Instance: "l", Started: 9}}}, under)
	w.mustAdd(lag)
	if err := held.LinkBelow([]*Entry{under}); err != nil {
		t.Fatal(err)
	}
	if err := pruned.LinkPruned(under.CID(), under.Clock); err != nil {
		t.Fatal(err)
	}
	for _, l := range []*Log{held, pruned} {
		if _, err := l.Add(lag); err != nil {
			t.Fatal(err)
		}
	}
	heads, _ := pruned.Heads()
	hheads, _ := held.Heads()
	if pruned.StateHash() != w.log.StateHash() || pruned.StateHash() != held.StateHash() || pruned.Len() != held.Len() ||
		!pruned.Effective(lag.CID()) || !slices.Equal(heads, hheads) {
		t.Fatalf("pruned: %d entries (want %d), same state %v, %d heads", pruned.Len(), held.Len(), pruned.StateHash() == w.log.StateHash(), len(heads))
	}
	if !pruned.Has(under.CID()) || pruned.Get(under.CID()) != nil {
		t.Fatal("a stub must be held and not returned as an entry")
	}
	for _, e := range pruned.Entries() {
		if e.Stub() {
			t.Fatal("Entries returned a stub")
		}
	}
	// Started again at the barrier: the stub comes with AtBarrier's.
	again := func(l *Log) *Log {
		st, below, err := l.AtBarrier(cp)
		if err != nil {
			t.Fatal(err)
		}
		after, err := l.After(cp)
		if err != nil {
			t.Fatal(err)
		}
		return joinAt(t, st, cp, below, after)
	}
	p2, h2 := again(pruned), again(held)
	if p2.StateHash() != h2.StateHash() || p2.Len() != h2.Len() || p2.Get(under.CID()) != nil || h2.Get(under.CID()) == nil {
		t.Fatalf("started again: %d and %d entries, same state %v", p2.Len(), h2.Len(), p2.StateHash() == h2.StateHash())
	}
}

// joinAt is a Log started at checkpoint cp (depth 1) on st and below,
// with after added.
func joinAt(t *testing.T, st *State, cp *Entry, below, after []*Entry) *Log {
	t.Helper()
	j, err := NewLogAt(st, cp, 1, below)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.AddBatch(after); err != nil {
		t.Fatal(err)
	}
	return j
}
