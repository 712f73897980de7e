package ledger

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestNonAdminHasNoAuthority(t *testing.T) {
	w := newWorld(t)
	mem := w.member(2, RoleMember)
	other := w.member(3, RoleMember)
	pend := newActor(t, 4)
	if _, err := w.join(pend, w.orgKey(w.owner, "k1")); err != nil {
		t.Fatal(err)
	}
	if got := w.log.State().Machines[pend.id].Status; got != MachinePending {
		t.Fatalf("org-key join: machine is %s, want pending (approval required by default)", got)
	}
	w.denied(ErrNotAuthority, mem, KindMachineApprove, MachineRef{Machine: pend.id})
	w.denied(ErrNotAuthority, mem, KindMachineReject, MachineRef{Machine: pend.id})
	w.denied(ErrNotAuthority, mem, KindMemberRole, MemberRole{Member: other.id, Role: RoleAdmin})
	w.denied(ErrNotAuthority, mem, KindMemberRole, MemberRole{Member: mem.id, Role: RoleAdmin})
	w.denied(ErrNotAuthority, mem, KindMemberRemove, MemberRef{Member: other.id})
	w.denied(ErrNotAuthority, mem, KindOrgKey, OrgKey{KeyID: "k2"})
	w.denied(ErrNotAuthority, mem, KindOrgUpdate, OrgUpdate{RequireMachineApproval: ptr(false)})
	w.denied(ErrNotAuthority, mem, KindMachineRemove, MachineRef{Machine: other.id})
	// A pending machine is not a member yet.
	w.denied(ErrNotAuthority, pend, KindJobSubmit, JobSpec{Driver: "exec", Cmd: []string{"x"}, RangeStart: 1, RangeEnd: 1, Priority: 1, CPUs: 1})
	// An invite (or org key) issued by a member admits no one.
	for _, c := range []Capability{w.invite(mem, RoleMember, 0, 0), w.orgKey(mem, "k1")} {
		j := newActor(t, 5)
		w.denied(ErrNotAuthority, j, KindMachineReg, MachineRegister{Cap: c})
		if w.log.State().Machines[j.id] != nil {
			t.Fatalf("a %s issued by a member admitted a machine", c.Kind)
		}
	}
	// Strangers have no say at all.
	w.denied(ErrNotAuthority, newActor(t, 6), KindMachineApprove, MachineRef{Machine: pend.id})
	// An admin can.
	w.ok(w.owner, KindMachineApprove, MachineRef{Machine: pend.id})
	st := w.log.State()
	if st.Machines[pend.id].Status != MachineApproved || st.Role(pend.id) != RoleMember {
		t.Fatalf("after approval: machine %s, role %q", st.Machines[pend.id].Status, st.Role(pend.id))
	}
	// Owner's role is untouchable, even by an admin.
	adm := w.member(7, RoleAdmin)
	w.denied(ErrNotAuthority, adm, KindMemberRole, MemberRole{Member: w.owner.id, Role: RoleMember})
	w.denied(ErrNotAuthority, adm, KindMemberRemove, MemberRef{Member: w.owner.id})
	w.denied(ErrNotAuthority, w.owner, KindMemberRemove, MemberRef{Member: w.owner.id})
	// Entries of an unknown kind have no effect.
	w.denied(ErrMalformed, w.owner, "org.delete", MemberRef{})
}

func TestOrgKeyRotation(t *testing.T) {
	w := newWorld(t)
	adm := w.member(2, RoleAdmin)
	old := w.orgKey(adm, "k1")
	a := newActor(t, 3)
	if _, err := w.join(a, old); err != nil {
		t.Fatal(err)
	}
	w.ok(adm, KindOrgKey, OrgKey{KeyID: "k2"})
	b := newActor(t, 4)
	w.denied(ErrNotAuthority, b, KindMachineReg, MachineRegister{Cap: old})
	if w.log.State().Machines[b.id] != nil {
		t.Fatal("the rotated org key admitted a machine")
	}
	if _, err := w.join(b, w.orgKey(w.owner, "k2")); err != nil {
		t.Fatalf("new org key: %v", err)
	}
	if got := w.log.State().Machines[b.id].Status; got != MachinePending {
		t.Fatalf("new org key: machine %s, want pending", got)
	}
	// An org key admits members only, and needs approval unless the org
	// says otherwise.
	adminKey := adm.s.SignCapability(Capability{Org: w.org, Kind: CapOrgKey, ID: "k2", Role: RoleAdmin})
	w.denied(ErrNotAuthority, newActor(t, 5), KindMachineReg, MachineRegister{Cap: adminKey})
	w.ok(w.owner, KindOrgUpdate, OrgUpdate{RequireMachineApproval: ptr(false)})
	c := newActor(t, 6)
	if _, err := w.join(c, w.orgKey(w.owner, "k2")); err != nil {
		t.Fatal(err)
	}
	if st := w.log.State(); st.Machines[c.id].Status != MachineApproved || st.Role(c.id) != RoleMember {
		t.Fatalf("without required approval: machine %s, role %q", st.Machines[c.id].Status, st.Role(c.id))
	}
	// A capability for another org, or with a forged signature, admits no one.
	other := newWorldNamed(t, "other")
	w.denied(ErrWrongOrg, newActor(t, 7), KindMachineReg, MachineRegister{Cap: other.orgKey(other.owner, "k2")})
	forged := w.orgKey(w.owner, "k2")
	forged.ID = "k3"
	w.denied(ErrBadSignature, newActor(t, 8), KindMachineReg, MachineRegister{Cap: forged})
}

func TestInviteUsesExpiryRole(t *testing.T) {
	w := newWorld(t)
	once := w.invite(w.owner, RoleMember, 1, 0)
	a, b := newActor(t, 2), newActor(t, 3)
	if _, err := w.join(a, once); err != nil {
		t.Fatal(err)
	}
	st := w.log.State()
	if st.Machines[a.id].Status != MachineApproved || st.Role(a.id) != RoleMember {
		t.Fatalf("invite: machine %s, role %q; want approved member", st.Machines[a.id].Status, st.Role(a.id))
	}
	w.denied(ErrNotAuthority, b, KindMachineReg, MachineRegister{Cap: once})
	if w.log.State().Machines[b.id] != nil {
		t.Fatal("a used-up invite admitted a second machine")
	}
	// Re-registering the admitted machine renames it and uses nothing.
	twice := w.invite(w.owner, RoleMember, 2, 0)
	if _, err := w.join(a, twice); err != nil {
		t.Fatal(err)
	}
	if _, err := w.join(b, twice); err != nil {
		t.Fatalf("second use of a 2-use invite after a re-register: %v", err)
	}

	// Expiry, against the register entry's time.
	exp := w.now + 10
	late := w.invite(w.owner, RoleMember, 0, exp)
	c := newActor(t, 4)
	w.now = exp // the next entry's time is exp+1
	w.denied(ErrNotAuthority, c, KindMachineReg, MachineRegister{Cap: late})
	early := w.invite(w.owner, RoleMember, 0, w.now+5)
	if _, err := w.join(c, early); err != nil {
		t.Fatalf("unexpired invite: %v", err)
	}

	// Role: an admin invite makes an admin; an invite never makes an owner.
	d := newActor(t, 5)
	if _, err := w.join(d, w.invite(w.owner, RoleAdmin, 1, 0)); err != nil {
		t.Fatal(err)
	}
	if got := w.log.State().Role(d.id); got != RoleAdmin {
		t.Fatalf("admin invite: role %q", got)
	}
	for _, role := range []string{RoleOwner, "", "root"} {
		w.denied(ErrNotAuthority, newActor(t, 6), KindMachineReg, MachineRegister{Cap: w.invite(d, role, 1, 0)})
	}
	// A removed admin's invites stop working.
	inv := w.invite(d, RoleMember, 0, 0)
	w.ok(w.owner, KindMemberRemove, MemberRef{Member: d.id})
	w.denied(ErrNotAuthority, newActor(t, 7), KindMachineReg, MachineRegister{Cap: inv})
}

// TestMutualRemoval: two admins try to remove each other concurrently, and
// one promotes a member. Only the owner removes or promotes admins: in every
// delivery order both stay admins and nothing of that happens, while their
// concurrent admin acts (approving a machine) stand.
func TestMutualRemoval(t *testing.T) {
	w := newWorld(t)
	x := w.member(2, RoleAdmin)
	a := w.member(3, RoleAdmin)
	mem := w.member(4, RoleMember)
	pend := newActor(t, 5)
	if _, err := w.join(pend, w.orgKey(w.owner, "k1")); err != nil {
		t.Fatal(err)
	}
	base := w.heads()
	rx := w.on(x, KindMemberRemove, MemberRef{Member: a.id}, base...)
	ra := w.on(a, KindMemberRemove, MemberRef{Member: x.id}, base...)
	xs := w.on(x, KindMemberRole, MemberRole{Member: mem.id, Role: RoleAdmin}, base...)
	as := w.on(a, KindMachineApprove, MachineRef{Machine: pend.id}, base...)
	prefix := w.log.Entries()
	var want string
	for _, order := range permutations([]*Entry{rx, ra, xs, as}) {
		l := replay(t, append(append([]*Entry(nil), prefix...), order...))
		st := l.State()
		if st.Role(x.id) != RoleAdmin || st.Role(a.id) != RoleAdmin || st.Role(mem.id) != RoleMember {
			t.Fatalf("x %q, a %q, mem %q: admins cannot remove admins or promote", st.Role(x.id), st.Role(a.id), st.Role(mem.id))
		}
		for _, e := range []*Entry{rx, ra, xs} {
			if !errors.Is(l.Verdict(e.CID()), ErrNotAuthority) {
				t.Fatalf("%s by an admin: verdict %v, want not authorised", e.Kind, l.Verdict(e.CID()))
			}
		}
		if !l.Effective(as.CID()) || st.Machines[pend.id].Status != MachineApproved {
			t.Fatal("an admin's approval should stand")
		}
		if want == "" {
			want = st.Hash()
		} else if st.Hash() != want {
			t.Fatal("delivery order changed the state")
		}
	}
	// The owner can.
	w.mustAdd(rx)
	w.mustAdd(ra)
	w.ok(w.owner, KindMemberRemove, MemberRef{Member: a.id})
	w.ok(w.owner, KindMemberRole, MemberRole{Member: x.id, Role: RoleMember})
	if st := w.log.State(); st.Role(a.id) != "" || st.Role(x.id) != RoleMember {
		t.Fatalf("owner's acts: a %q, x %q", st.Role(a.id), st.Role(x.id))
	}
}

// TestDemotionConflict: the owner demotes an admin who, concurrently,
// demotes another admin and promotes a member. The demotion stands; the
// demoted admin's concurrent admin acts are void if they sort before it and
// powerless if after, in every delivery order.
func TestDemotionConflict(t *testing.T) {
	sawBefore := map[bool]bool{}
	for try := 0; try < 40 && len(sawBefore) < 2; try++ {
		w := newWorld(t)
		w.now += int64(try) * 1000
		a := w.member(2, RoleAdmin)
		b := w.member(3, RoleAdmin)
		m := w.member(4, RoleMember)
		base := w.heads()
		d := w.on(w.owner, KindMemberRole, MemberRole{Member: a.id, Role: RoleMember}, base...)
		x := w.on(a, KindMemberRole, MemberRole{Member: b.id, Role: RoleMember}, base...)
		y := w.on(a, KindMemberRole, MemberRole{Member: m.id, Role: RoleAdmin}, base...)
		z := w.on(a, KindJobSubmit, JobSpec{Driver: "exec", Cmd: []string{"x"}, RangeStart: 1, RangeEnd: 1, Priority: 1, CPUs: 1}, base...)
		sawBefore[x.Key().Less(d.Key())] = true
		prefix := w.log.Entries()
		var want string
		for _, order := range permutations([]*Entry{d, x, y, z}) {
			l := replay(t, append(append([]*Entry(nil), prefix...), order...))
			st := l.State()
			if st.Role(a.id) != RoleMember || st.Role(b.id) != RoleAdmin || st.Role(m.id) != RoleMember {
				t.Fatalf("roles a %q b %q m %q", st.Role(a.id), st.Role(b.id), st.Role(m.id))
			}
			// "Revocation wins" voids every concurrent entry of a that sorts
			// before the demotion, even one a member may write.
			if z.Key().Less(d.Key()) == l.Effective(z.CID()) {
				t.Fatalf("job.submit by the demoted admin: effective %v, sorts before the demotion %v",
					l.Effective(z.CID()), z.Key().Less(d.Key()))
			}
			if want == "" {
				want = st.Hash()
			} else if want != st.Hash() {
				t.Fatal("delivery order changed the state")
			}
		}
	}
	if len(sawBefore) < 2 {
		t.Fatal("did not get both sort orders")
	}
}

// TestBackdatedRevokedAdmin: an admin removed by R writes entries on parents
// chosen before R (so they sort before R, or tie with it). On every node, in
// every delivery order, they have no effect.
func TestBackdatedRevokedAdmin(t *testing.T) {
	for try := 0; try < 6; try++ {
		w := newWorld(t)
		w.now += int64(try) * 7919
		a := w.member(2, RoleAdmin)
		m := w.member(3, RoleMember)
		pend := newActor(t, 4)
		if _, err := w.join(pend, w.orgKey(w.owner, "k1")); err != nil {
			t.Fatal(err)
		}
		job := w.submit(m, 2, 0)
		old := w.heads()
		w.ok(w.owner, KindMachineUpdate, MachineUpdate{Name: "busy"}) // R is not on the old heads
		r := w.ok(w.owner, KindMemberRemove, MemberRef{Member: a.id})
		// a, removed, back-dates: parents from before R.
		e1 := w.on(a, KindMemberRole, MemberRole{Member: m.id, Role: RoleAdmin}, old...)
		e2 := w.on(a, KindMachineApprove, MachineRef{Machine: pend.id}, e1)
		e3 := w.on(a, KindJobCancel, JobRef{Job: job}, old...)
		e4 := w.on(a, KindOrgKey, OrgKey{KeyID: "mine"}, old...)
		if !e1.Key().Less(r.Key()) || !e3.Key().Less(r.Key()) {
			t.Fatal("back-dated entries should sort before the removal")
		}
		prefix := w.log.Entries()
		before := slices.Index(prefix, r)
		var want string
		check := func(l *Log) {
			st := l.State()
			for _, e := range []*Entry{e1, e2, e3, e4} {
				if l.Effective(e.CID()) {
					t.Fatalf("back-dated %s took effect", e.Kind)
				}
				if !errors.Is(l.Verdict(e.CID()), ErrNotAuthority) {
					t.Fatalf("back-dated %s: verdict %v", e.Kind, l.Verdict(e.CID()))
				}
			}
			if st.Role(m.id) != RoleMember || st.Machines[pend.id].Status != MachinePending ||
				st.Jobs[job].State != JobActive || st.OrgKeyID != "k1" {
				t.Fatal("a back-dated entry changed the state")
			}
			if want == "" {
				want = st.Hash()
			} else if st.Hash() != want {
				t.Fatal("delivery order changed the state")
			}
		}
		// The back-dated entries arrive before R (a node that has not yet
		// heard of R applies them, then R voids them), or after it.
		for _, order := range permutations([]*Entry{e1, e3, e4}) {
			es := append([]*Entry(nil), prefix[:before]...)
			es = append(es, order...)
			es = append(es, e2)
			es = append(es, prefix[before:]...)
			check(replay(t, es))
			es = append(append(append([]*Entry(nil), prefix...), order...), e2)
			check(replay(t, es))
		}
		// The reference log, which had R first.
		for _, e := range []*Entry{e1, e2, e3, e4} {
			w.mustAdd(e)
		}
		check(w.log)
	}
}

func TestRemovedMemberCleanup(t *testing.T) {
	w := newWorld(t)
	m := w.member(2, RoleMember)
	other := w.member(3, RoleMember)
	j1 := w.submit(m, 3, 0)
	j2 := w.submit(other, 3, 0)
	w.ok(m, KindJobResults, JobResults{Job: j2, Results: []ItemResult{{Item: 1}}})
	w.ok(w.owner, KindMemberRemove, MemberRef{Member: m.id})
	st := w.log.State()
	if st.Role(m.id) != "" || st.Machines[m.id].Status != MachineRemoved {
		t.Fatalf("removed member: role %q, machine %s", st.Role(m.id), st.Machines[m.id].Status)
	}
	if st.Jobs[j1].State != JobCancelled || st.Jobs[j1].Error == "" || st.Jobs[j2].State != JobActive {
		t.Fatalf("jobs after removal: %s (%q), %s", st.Jobs[j1].State, st.Jobs[j1].Error, st.Jobs[j2].State)
	}
	if st.Revoked[m.id] == nil {
		t.Fatal("no revocation record")
	}
	// Nothing it writes afterwards counts.
	w.denied(ErrNotAuthority, m, KindJobSubmit, JobSpec{Driver: "exec", Cmd: []string{"x"}, RangeStart: 1, RangeEnd: 1, Priority: 1, CPUs: 1})
	w.denied(ErrNotAuthority, m, KindJobResults, JobResults{Job: j2, Results: []ItemResult{{Item: 2}}})
	w.denied(ErrNotAuthority, m, KindMachineUpdate, MachineUpdate{Name: "still here"})
	// A member may leave by itself; its jobs are cancelled the same way.
	j3 := w.submit(other, 1, 0)
	w.ok(other, KindMemberRemove, MemberRef{Member: other.id})
	if st := w.log.State(); st.Jobs[j3].State != JobCancelled || st.Machines[other.id].Status != MachineRemoved {
		t.Fatal("leaving did not clean up")
	}
	// It can come back, even with an invite, only through an admin: its
	// machine is pending, with its history kept.
	if _, err := w.join(other, w.invite(w.owner, RoleMember, 1, 0)); err != nil {
		t.Fatalf("rejoin: %v", err)
	}
	if st := w.log.State(); st.Role(other.id) != "" || st.Machines[other.id].Status != MachinePending {
		t.Fatalf("rejoin of a removed person: role %q, machine %s; want no role, pending", st.Role(other.id), st.Machines[other.id].Status)
	}
	w.ok(w.owner, KindMachineApprove, MachineRef{Machine: other.id})
	st = w.log.State()
	if st.Role(other.id) != RoleMember || st.Machines[other.id].Status != MachineApproved {
		t.Fatal("approval did not restore membership")
	}
	var hist []string
	for _, ev := range st.Machines[other.id].History {
		hist = append(hist, ev.Status)
	}
	if want := "pending approved removed pending approved"; strings.Join(hist, " ") != want {
		t.Fatalf("history %v, want %s", hist, want)
	}
}

func TestJobResults(t *testing.T) {
	w := newWorld(t)
	m1 := w.member(2, RoleMember)
	m2 := w.member(3, RoleMember)
	job := w.submit(m1, 3, 1)
	// Two machines finish item 1 concurrently: the first in total order counts.
	base := w.heads()
	r1 := w.on(m1, KindJobResults, JobResults{Job: job, Results: []ItemResult{{Item: 1, DurationMS: 10}}}, base...)
	r2 := w.on(m2, KindJobResults, JobResults{Job: job, Results: []ItemResult{{Item: 1, DurationMS: 20}}}, base...)
	first := m1.id
	if r2.Key().Less(r1.Key()) {
		first = m2.id
	}
	w.mustAdd(r2)
	w.mustAdd(r1)
	it := w.log.State().Jobs[job].Items.At(0)
	if it.Status != ItemDone || it.Machine != first || it.Attempts != 2 || w.log.State().Jobs[job].Done != 1 {
		t.Fatalf("item 1: %+v; want done once, by %s, after 2 real attempts", it, first)
	}
	// Both runs are visible; the second in total order is a duplicate.
	j1 := w.log.State().Jobs[job]
	var runs []Run
	j1.Runs.Each(func(r Run) { runs = append(runs, r) })
	if len(runs) != 2 || j1.Runs.Len() != 2 || j1.Duplicates != 1 ||
		!runs[0].Counted || runs[0].Machine != first || runs[1].Counted || runs[1].Machine == first {
		t.Fatalf("runs %+v, duplicates %d; want the first counted and the other a duplicate", runs, j1.Duplicates)
	}
	// A stopped run (preempted) is a real attempt but no result: the item
	// stays pending, no failure counts against its retries, and it is not
	// a duplicate.
	w.ok(m1, KindJobResults, JobResults{Job: job, Results: []ItemResult{{Item: 2, Code: 137, Stopped: true}}})
	if it := w.log.State().Jobs[job].Items.At(1); it.Status != ItemPending || it.Attempts != 1 || it.Failures != 0 || w.log.State().Jobs[job].Duplicates != 1 {
		t.Fatalf("item 2 after a stopped run: %+v, duplicates %d", it, w.log.State().Jobs[job].Duplicates)
	}
	// Retries: item 2 fails once (retries=1, still pending), then fails again.
	w.ok(m1, KindJobResults, JobResults{Job: job, Results: []ItemResult{{Item: 2, Code: 3}}})
	if it := w.log.State().Jobs[job].Items.At(1); it.Status != ItemPending || it.Attempts != 2 || it.Failures != 1 {
		t.Fatalf("item 2 after one failure: %+v", it)
	}
	w.ok(m2, KindJobResults, JobResults{Job: job, Results: []ItemResult{{Item: 2, Code: 4, Error: "boom"}, {Item: 3}}})
	j := w.log.State().Jobs[job]
	if j.Items.At(1).Status != ItemFailed || j.Items.At(1).Attempts != 3 || j.Items.At(1).Failures != 2 || j.Failed != 1 || j.Done != 2 {
		t.Fatalf("after the retry failed: %+v", j)
	}
	if j.State != JobFailed || j.Error == "" || j.Ended == 0 {
		t.Fatalf("job with a failed item: state %s, error %q", j.State, j.Error)
	}
	if !j.Machines[m1.id] || !j.Machines[m2.id] {
		t.Fatal("machines that worked on the job are not recorded")
	}
	// Late results of a finished job count for nothing.
	// (It was a real run all the same: item 2's Attempts counts it.)
	before := w.log.State().Jobs[job].Items.Slice()
	w.write(m1, KindJobResults, JobResults{Job: job, Results: []ItemResult{{Item: 2}}})
	before[1].Attempts++
	if after := w.log.State().Jobs[job].Items.Slice(); !slices.Equal(before, after) {
		t.Fatalf("a late result changed a finished job: %+v, was %+v", after, before)
	}
	if j := w.log.State().Jobs[job]; j.Duplicates != 2 || j.Runs.Len() != 7 {
		t.Fatalf("a late result is a duplicate run: runs %+v, duplicates %d", j.Runs, j.Duplicates)
	}
	// All items done: done.
	ok := w.submit(m2, 2, 0)
	w.ok(m1, KindJobResults, JobResults{Job: ok, Results: []ItemResult{{Item: 1}, {Item: 2}, {Item: 2, Code: 9}}})
	if j := w.log.State().Jobs[ok]; j.State != JobDone || j.Done != 2 || j.Failed != 0 {
		t.Fatalf("all items done: %+v", j)
	}
	// Results from a machine that is not approved, for an unknown job, or
	// outside the range have no effect.
	pend := newActor(t, 4)
	if _, err := w.join(pend, w.orgKey(w.owner, "k1")); err != nil {
		t.Fatal(err)
	}
	j3 := w.submit(m1, 2, 0)
	w.denied(ErrNotAuthority, pend, KindJobResults, JobResults{Job: j3, Results: []ItemResult{{Item: 1}}})
	w.denied(ErrMalformed, m1, KindJobResults, JobResults{Job: "nope", Results: []ItemResult{{Item: 1}}})
	w.denied(ErrMalformed, m1, KindJobResults, JobResults{Job: j3, Results: []ItemResult{{Item: 3}}})
	w.denied(ErrMalformed, m1, KindJobResults, JobResults{Job: j3, Results: []ItemResult{{Item: -1 << 63}}})
	w.denied(ErrMalformed, m1, KindJobResults, JobResults{Job: j3})
	// Modify and cancel: the submitter or an admin.
	w.denied(ErrNotAuthority, m2, KindJobCancel, JobRef{Job: j3})
	w.denied(ErrNotAuthority, m2, KindJobModify, JobModify{Job: j3, Priority: i64(9)})
	w.ok(m1, KindJobModify, JobModify{Job: j3, Priority: i64(9), MaxCPUs: i64(-1)})
	if j := w.log.State().Jobs[j3]; j.Priority != 9 || j.MaxCPUs == nil || *j.MaxCPUs != -1 {
		t.Fatalf("modify: %+v", j)
	}
	w.ok(w.owner, KindJobCancel, JobRef{Job: j3})
	w.denied(ErrMalformed, m1, KindJobCancel, JobRef{Job: j3})
	if j := w.log.State().Jobs[j3]; j.State != JobCancelled {
		t.Fatalf("cancel: %s", j.State)
	}
}

// TestJobRangeOverflow: a range whose size overflows int64 is refused; it
// once made results index out of range and panic every node.
func TestJobRangeOverflow(t *testing.T) {
	w := newWorld(t)
	for _, r := range [][2]int64{{-1 << 63, 1<<63 - 1}, {-1 << 62, 1 << 62}, {0, MaxJobItems}, {-3, -5}, {-2, 2}} {
		w.denied(ErrMalformed, w.owner, KindJobSubmit, JobSpec{Driver: "exec", Cmd: []string{"x"}, RangeStart: r[0], RangeEnd: r[1], Priority: 1, CPUs: 1})
	}
	e := w.ok(w.owner, KindJobSubmit, JobSpec{Driver: "exec", Cmd: []string{"x"}, RangeStart: 0, RangeEnd: 4, Priority: 1, CPUs: 1})
	w.ok(w.owner, KindJobResults, JobResults{Job: JobIDFor(e), Results: []ItemResult{{Item: 0}, {Item: 4}}})
	if j := w.log.State().Jobs[JobIDFor(e)]; j.Items.Len() != 5 || j.Done != 2 {
		t.Fatalf("job 0..4: %d items, %d done", j.Items.Len(), j.Done)
	}
}

// permutations returns every order of es.
func permutations(es []*Entry) [][]*Entry {
	if len(es) <= 1 {
		return [][]*Entry{append([]*Entry(nil), es...)}
	}
	var out [][]*Entry
	for i := range es {
		rest := append(append([]*Entry(nil), es[:i]...), es[i+1:]...)
		for _, p := range permutations(rest) {
			out = append(out, append([]*Entry{es[i]}, p...))
		}
	}
	return out
}

// TestMerge: an approved machine's ledger.merge names the heads as its
// parents and changes nothing else; anyone else's has no effect.
func TestMerge(t *testing.T) {
	w := newWorld(t)
	m := w.member(2, RoleMember)
	other := w.member(3, RoleMember)
	// Two concurrent writes: two heads.
	base := w.heads()
	w.mustAdd(w.on(m, KindMachineUpdate, MachineUpdate{Name: "a"}, base...))
	w.mustAdd(w.on(other, KindMachineUpdate, MachineUpdate{Name: "b"}, base...))
	if hs := w.heads(); len(hs) != 2 {
		t.Fatalf("%d heads, want 2", len(hs))
	}
	before := w.log.State().Hash()
	e := w.ok(m, KindMerge, Merge{})
	if hs := w.heads(); len(hs) != 1 || hs[0].CID() != e.CID() || len(e.Parents) != 2 {
		t.Fatalf("after the merge: %d heads, the merge names %d parents", len(hs), len(e.Parents))
	}
	st := w.log.State().Clone()
	st.Applied-- // the only change it makes
	if st.Hash() != before {
		t.Fatal("the merge changed the state")
	}
	stranger := newActor(t, 9)
	w.denied(ErrNotAuthority, stranger, KindMerge, Merge{})
	w.ok(w.owner, KindMemberRemove, MemberRef{Member: other.id})
	w.denied(ErrNotAuthority, other, KindMerge, Merge{})
}
