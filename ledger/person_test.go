package ledger

import (
	"errors"
	"testing"
)

// joinAs registers machine m for person p with c (witnessed by the owner's
// machine when c needs it).
func (w *world) joinAs(m, p *actor, name string, c Capability) (*Entry, error) {
	w.t.Helper()
	reg := w.register(m, c)
	d := p.s.SignDelegation(name, m.id, w.org)
	reg.Delegation = &d
	return w.write(m, KindMachineReg, reg)
}

func TestPersonWithTwoMachines(t *testing.T) {
	w := newWorld(t)
	pat := newActor(t, 50)
	m1, m2 := newActor(t, 2), newActor(t, 3)
	if _, err := w.joinAs(m1, pat, "pat", w.invite(w.owner, RoleMember, 1, 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.joinAs(m2, pat, "pat", w.orgKey(w.owner, "k1")); err != nil {
		t.Fatal(err)
	}
	st := w.log.State()
	if st.Machines[m2.id].Status != MachinePending || st.Machines[m2.id].Owner != pat.id {
		t.Fatalf("second machine: %s, owner %s", st.Machines[m2.id].Status, st.Machines[m2.id].Owner)
	}
	// A pending machine does not act for its person yet.
	w.denied(ErrNotAuthority, m2, KindJobSubmit, JobSpec{Driver: "exec", Cmd: []string{"x"}, RangeStart: 1, RangeEnd: 1, Priority: 1, CPUs: 1})
	w.ok(w.owner, KindMachineApprove, MachineRef{Machine: m2.id})
	st = w.log.State()
	if len(st.Members) != 2 || st.Members[pat.id] == nil || st.Members[pat.id].Name != "pat" || st.Role(pat.id) != RoleMember {
		t.Fatalf("members %v: want the owner and pat", st.SortedMembers())
	}
	if st.Members[m1.id] != nil || st.Members[m2.id] != nil {
		t.Fatal("a delegated machine became a member of its own")
	}
	if got := st.MachinesOf(pat.id); len(got) != 2 {
		t.Fatalf("pat's machines: %d, want 2", len(got))
	}
	// Either machine's job is pat's; either may cancel the other's.
	j1 := w.submit(m1, 1, 0)
	if st := w.log.State(); st.Jobs[j1].Submitter != pat.id || st.Jobs[j1].Machine != m1.id {
		t.Fatalf("job submitter %s machine %s", st.Jobs[j1].Submitter, st.Jobs[j1].Machine)
	}
	w.ok(m2, KindJobCancel, JobRef{Job: j1})
	// A member removes their own machine; the person stays.
	w.ok(m2, KindMachineRemove, MachineRef{Machine: m1.id})
	if st := w.log.State(); st.Role(pat.id) != RoleMember || st.Machines[m1.id].Status != MachineRemoved {
		t.Fatal("removing one machine should keep its person")
	}
	// Another member may not remove pat's machine.
	other := w.member(4, RoleMember)
	w.denied(ErrNotAuthority, other, KindMachineRemove, MachineRef{Machine: m2.id})
	// Removing the person removes every machine of theirs and ends their jobs.
	j2 := w.submit(m2, 1, 0)
	w.ok(w.owner, KindMemberRemove, MemberRef{Member: pat.id})
	st = w.log.State()
	if st.Members[pat.id] != nil || st.Machines[m2.id].Status != MachineRemoved || st.Jobs[j2].State != JobCancelled {
		t.Fatal("removing pat should remove their machines and cancel their jobs")
	}
	w.denied(ErrNotAuthority, m2, KindJobSubmit, JobSpec{Driver: "exec", Cmd: []string{"x"}, RangeStart: 1, RangeEnd: 1, Priority: 1, CPUs: 1})
}

func TestGenesisOwnerIsAPerson(t *testing.T) {
	machine, alice := newActor(t, 1), newActor(t, 60)
	nonce := []byte{1, 2, 3}
	d := alice.s.SignDelegation("alice", machine.id, GenesisOrg(nonce))
	gen := sign(t, machine, "", KindGenesis, Genesis{Name: "acme", OrgKeyID: "k1", Settings: DefaultSettings(), Nonce: nonce, Owner: &d}, 1)
	l := NewLog()
	if v, err := l.Add(gen); err != nil || v != nil {
		t.Fatal(v, err)
	}
	st := l.State()
	if st.Owner != alice.id || st.Role(alice.id) != RoleOwner || st.Machines[machine.id].Owner != alice.id || st.Members[machine.id] != nil {
		t.Fatalf("owner %s; machine's person %s", st.Owner, st.Machines[machine.id].Owner)
	}
	// A delegation for another genesis (another nonce) founds nothing.
	bad := sign(t, machine, "", KindGenesis, Genesis{Name: "acme", OrgKeyID: "k1", Settings: DefaultSettings(), Nonce: []byte{9}, Owner: &d}, 1)
	if v, _ := NewLog().Add(bad); !errors.Is(v, ErrMalformed) {
		t.Fatalf("replayed delegation: %v", v)
	}
}

func TestForgedDelegation(t *testing.T) {
	w := newWorld(t)
	pat, m := newActor(t, 50), newActor(t, 2)
	inv := w.invite(w.owner, RoleMember, 0, 0)
	for name, d := range map[string]Delegation{
		"other machine": pat.s.SignDelegation("pat", w.owner.id, w.org),
		"other org":     pat.s.SignDelegation("pat", m.id, "bafyother"),
		"bad name":      pat.s.SignDelegation("pat\x1b[2J", m.id, w.org),
		"forged":        func() Delegation { d := pat.s.SignDelegation("pat", m.id, w.org); d.Name = "mallory"; return d }(),
	} {
		reg := w.register(m, inv)
		reg.Delegation = &d
		e, err := w.write(m, KindMachineReg, reg)
		if err == nil {
			t.Fatalf("%s: register took effect", name)
		}
		_ = e
	}
	if w.log.State().Machines[m.id] != nil {
		t.Fatal("a forged delegation admitted the machine")
	}
}

// TestRoles: the roles of docs/design.md §6. Only the owner promotes,
// demotes or removes admins; admins remove members; nobody removes the
// owner; the owner leaves only after handing the org over.
func TestRoles(t *testing.T) {
	w := newWorld(t)
	a := w.member(2, RoleAdmin)
	b := w.member(3, RoleAdmin)
	m := w.member(4, RoleMember)
	n := w.member(5, RoleMember)
	w.denied(ErrNotAuthority, a, KindMemberRole, MemberRole{Member: b.id, Role: RoleMember})
	w.denied(ErrNotAuthority, a, KindMemberRole, MemberRole{Member: m.id, Role: RoleAdmin})
	w.denied(ErrNotAuthority, a, KindMemberRemove, MemberRef{Member: b.id})
	w.denied(ErrNotAuthority, a, KindMemberRemove, MemberRef{Member: w.owner.id})
	w.denied(ErrNotAuthority, m, KindMemberRemove, MemberRef{Member: n.id})
	w.denied(ErrNotAuthority, m, KindOrgUpdate, OrgUpdate{RequireMachineApproval: ptr(false)})
	w.denied(ErrNotAuthority, w.owner, KindMemberRemove, MemberRef{Member: w.owner.id})
	w.denied(ErrNotAuthority, a, KindOrgTransfer, OrgTransfer{To: b.id})
	w.denied(ErrNotAuthority, w.owner, KindOrgTransfer, OrgTransfer{To: m.id}) // members cannot own
	w.ok(a, KindMemberRemove, MemberRef{Member: n.id})
	w.ok(a, KindOrgUpdate, OrgUpdate{RequireMachineApproval: ptr(false)})
	w.ok(w.owner, KindMemberRole, MemberRole{Member: m.id, Role: RoleAdmin})
	w.ok(w.owner, KindMemberRole, MemberRole{Member: b.id, Role: RoleMember})
	w.ok(w.owner, KindMemberRemove, MemberRef{Member: b.id})
	// Transfer: a becomes the owner, the old owner an admin, who may then leave.
	w.ok(w.owner, KindOrgTransfer, OrgTransfer{To: a.id})
	st := w.log.State()
	if st.Owner != a.id || st.Role(a.id) != RoleOwner || st.Role(w.owner.id) != RoleAdmin {
		t.Fatalf("after transfer: owner %s, a %q, old owner %q", st.Owner, st.Role(a.id), st.Role(w.owner.id))
	}
	w.denied(ErrNotAuthority, w.owner, KindMemberRole, MemberRole{Member: m.id, Role: RoleMember})
	w.ok(a, KindMemberRole, MemberRole{Member: m.id, Role: RoleMember})
	w.ok(w.owner, KindMemberRemove, MemberRef{Member: w.owner.id})
	if w.log.State().Role(w.owner.id) != "" {
		t.Fatal("the old owner could not leave")
	}
}

func TestOrgDelete(t *testing.T) {
	w := newWorld(t)
	a := w.member(2, RoleAdmin)
	w.denied(ErrNotAuthority, a, KindOrgDelete, OrgDelete{Name: "acme"})
	w.denied(ErrMalformed, w.owner, KindOrgDelete, OrgDelete{Name: "acm"})
	w.ok(w.owner, KindOrgDelete, OrgDelete{Name: "acme"})
	st := w.log.State()
	if !st.Deleted || st.DeletedAt == 0 {
		t.Fatal("no tombstone")
	}
	w.denied(ErrDeleted, w.owner, KindOrgUpdate, OrgUpdate{RequireMachineApproval: ptr(false)})
	w.denied(ErrDeleted, a, KindMachineUpdate, MachineUpdate{Name: "x"})
	w.denied(ErrDeleted, newActor(t, 9), KindMachineReg, w.register(newActor(t, 9), w.invite(w.owner, RoleMember, 0, 0)))
}

// TestInviteWitness: an invite's expiry is measured on its witness's clock
// and its uses are counted in ledger order; a joiner cannot back-date,
// skip or forge the witness.
func TestInviteWitness(t *testing.T) {
	w := newWorld(t)
	pend := newActor(t, 8)
	if _, err := w.join(pend, w.orgKey(w.owner, "k1")); err != nil {
		t.Fatal(err)
	}
	exp := w.now + 100
	inv := w.invite(w.owner, RoleMember, 0, exp)
	j := newActor(t, 2)

	// Witness-less.
	reg := w.register(j, inv)
	reg.Witness = nil
	w.denied(ErrNotAuthority, j, KindMachineReg, reg)
	// Forged: the witness signed another joiner's redemption, or the joiner
	// edited the witness's time.
	other := w.owner.s.SignWitness(inv, w.owner.id, w.now)
	reg.Witness = &other
	w.denied(ErrMalformed, j, KindMachineReg, reg)
	edited := w.owner.s.SignWitness(inv, j.id, exp+50)
	edited.Time = exp - 1
	reg.Witness = &edited
	w.denied(ErrBadSignature, j, KindMachineReg, reg)
	// Witnessed by a machine that is not approved (its own, pending).
	byPending := pend.s.SignWitness(inv, j.id, w.now)
	reg.Witness = &byPending
	w.denied(ErrNotAuthority, j, KindMachineReg, reg)
	// Back-dated: the joiner's entry says it is early, the witness saw it late.
	late := w.owner.s.SignWitness(inv, j.id, exp+1)
	reg.Witness = &late
	e := sign(t, j, w.org, KindMachineReg, reg, exp-50, w.heads()...)
	if v := w.mustAdd(e); !errors.Is(v, ErrNotAuthority) {
		t.Fatalf("back-dated redemption: %v", v)
	}
	// In time, witnessed: admitted.
	ok := w.owner.s.SignWitness(inv, j.id, exp)
	reg.Witness = &ok
	w.ok(j, KindMachineReg, reg)

	// Uses: two concurrent redemptions of a one-use invite; the one first in
	// ledger order is admitted, in every delivery order.
	one := w.invite(w.owner, RoleMember, 1, 0)
	x, y := newActor(t, 3), newActor(t, 4)
	base := w.heads()
	ex := w.on(x, KindMachineReg, w.register(x, one), base...)
	ey := w.on(y, KindMachineReg, w.register(y, one), base...)
	first, second := x, y
	if ey.Key().Less(ex.Key()) {
		first, second = y, x
	}
	prefix := w.log.Entries()
	for _, order := range [][]*Entry{{ex, ey}, {ey, ex}} {
		st := replay(t, append(append([]*Entry(nil), prefix...), order...)).State()
		if st.Machines[first.id] == nil || st.Machines[first.id].Status != MachineApproved || st.Machines[second.id] != nil {
			t.Fatal("a one-use invite admitted other than the first redemption in ledger order")
		}
	}
}

// TestRevocationWinsForPersons: the owner removes a person while one of
// their machines, unaware, approves a machine; that act is void on every
// node whichever machine of the person wrote it.
func TestRevocationWinsForPersons(t *testing.T) {
	w := newWorld(t)
	pat := newActor(t, 50)
	m1, m2 := newActor(t, 2), newActor(t, 3)
	if _, err := w.joinAs(m1, pat, "pat", w.invite(w.owner, RoleAdmin, 1, 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.joinAs(m2, pat, "pat", w.invite(w.owner, RoleAdmin, 1, 0)); err != nil {
		t.Fatal(err)
	}
	pend := newActor(t, 9)
	if _, err := w.join(pend, w.orgKey(w.owner, "k1")); err != nil {
		t.Fatal(err)
	}
	base := w.heads()
	r := w.on(w.owner, KindMemberRemove, MemberRef{Member: pat.id}, base...)
	var acts []*Entry
	for _, m := range []*actor{m1, m2} {
		acts = append(acts, w.on(m, KindMachineApprove, MachineRef{Machine: pend.id}, base...))
	}
	prefix := w.log.Entries()
	var want string
	for _, order := range permutations(append([]*Entry{r}, acts...)) {
		l := replay(t, append(append([]*Entry(nil), prefix...), order...))
		st := l.State()
		if st.Machines[pend.id].Status != MachinePending || st.Members[pat.id] != nil {
			t.Fatalf("pend %s, pat %v: the removed person's concurrent act should be void", st.Machines[pend.id].Status, st.Members[pat.id])
		}
		if want == "" {
			want = st.Hash()
		} else if st.Hash() != want {
			t.Fatal("delivery order changed the state")
		}
	}
}

// TestLateRunCounted: a run that ends after its job is done is a real run:
// the item's attempts count it, as they count every run the ledger knows.
func TestLateRunCounted(t *testing.T) {
	w := newWorld(t)
	m := w.member(2, RoleMember)
	j := w.submit(m, 1, 0)
	w.ok(m, KindJobResults, JobResults{Job: j, Results: []ItemResult{{Item: 1}}})
	w.ok(w.owner, KindJobResults, JobResults{Job: j, Results: []ItemResult{{Item: 1}}})
	st := w.log.State()
	it := st.Jobs[j].Items.At(0)
	if st.Jobs[j].State != JobDone || it.Attempts != 2 || st.Jobs[j].Runs.Len() != 2 || st.Jobs[j].Duplicates != 1 {
		t.Fatalf("state %s, attempts %d, runs %d, duplicates %d; want done, 2, 2, 1", st.Jobs[j].State, it.Attempts, st.Jobs[j].Runs.Len(), st.Jobs[j].Duplicates)
	}
}
