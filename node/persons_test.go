package node

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cshare/cshare/internal/userkey"
	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/p2p"
	"github.com/cshare/cshare/runtime"
)

// givePerson puts person key k in node i's data dir before it creates or
// joins an org.
func (m *mesh) givePerson(i int, k *userkey.Key) {
	m.t.Helper()
	if err := userkey.Save(m.nodes[i].opts.DataDir, k, false); err != nil {
		m.t.Fatal(err)
	}
}

func newPerson(t testing.TB, name string) *userkey.Key {
	t.Helper()
	k, err := userkey.New(name)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// oneLine fails unless err is an API error of status code, on one line,
// saying each of want.
func oneLine(t testing.TB, what string, err error, code int, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error; want a %d", what, code)
	}
	if statusCode(err) != code || strings.Contains(err.Error(), "\n") {
		t.Fatalf("%s: %v (status %d); want one line, status %d", what, err, statusCode(err), code)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("%s: %q does not say %q", what, err, w)
		}
	}
}

// TestPersonsMachinesAndVisibility: one person on two machines (the same
// user.key in two data dirs) is one member with both machines, on every
// node; a member sees only their own jobs (ls, show, items, logs; another's
// is not found, and changing it is refused), the owner sees every job, and
// the logs protocol refuses a machine whose person may not see the job.
func TestPersonsMachinesAndVisibility(t *testing.T) {
	m := newMesh(t, meshConfig{n: 3, interval: 250 * time.Millisecond, slots: 1, runFor: 20 * time.Millisecond})
	alice, bob := newPerson(t, "alice"), newPerson(t, "bob")
	m.givePerson(0, alice)
	m.givePerson(1, alice)
	m.givePerson(2, bob)
	m.formOrg()
	n0, n1, n2 := m.nodes[0].Node, m.nodes[1].Node, m.nodes[2].Node
	ctx := ctxT(t)

	want01 := []string{n0.idStr, n1.idStr}
	slices.Sort(want01)
	eventually(t, 30*time.Second, "two members, alice with two machines, on every node", func() string {
		for _, mn := range m.nodes {
			ms, err := mn.orgs.Members(ctx)
			if err != nil {
				return err.Error()
			}
			if len(ms) != 2 {
				return fmt.Sprintf("%s: %d members: %+v", mn.name, len(ms), ms)
			}
			a, b := ms[0], ms[1] // the owner first
			if a.ID != alice.ID || a.Name != "alice" || a.Role != ledger.RoleOwner || !slices.Equal(a.Machines, want01) || a.Joined == "" {
				return fmt.Sprintf("%s: alice is %+v", mn.name, a)
			}
			if b.ID != bob.ID || b.Name != "bob" || b.Role != ledger.RoleMember || !slices.Equal(b.Machines, []string{n2.idStr}) {
				return fmt.Sprintf("%s: bob is %+v", mn.name, b)
			}
		}
		return ""
	})
	for _, n := range []*Node{n0, n1} {
		st, err := n.Status(ctx)
		if err != nil || st.Person != alice.ID || st.PersonName != "alice" || st.Role != ledger.RoleOwner {
			t.Fatalf("status of alice's machine %s: %+v, %v", n.idStr, st, err)
		}
		mi, err := n2.orgs.Machine(ctx, n.idStr)
		if err != nil || mi.Owner != alice.ID || mi.OwnerName != "alice" || len(mi.History) == 0 || mi.History[len(mi.History)-1].Status != ledger.MachineApproved {
			t.Fatalf("machine %s as bob's node shows it: %+v, %v", n.idStr, mi, err)
		}
	}
	if o, err := n2.orgs.Org(ctx); err != nil || o.Owner != alice.ID || o.OwnerName != "alice" {
		t.Fatalf("org: %+v, %v", o, err)
	}

	// Each submits a job; both finish.
	ja := submit(t, n1, api.JobSubmit{Name: "alices"})
	jb := submit(t, n2, api.JobSubmit{Name: "bobs"})
	if ja.Submitter != alice.ID || ja.SubmitterName != "alice" || jb.Submitter != bob.ID {
		t.Fatalf("submitters: %s (%s), %s", ja.Submitter, ja.SubmitterName, jb.Submitter)
	}
	eventually(t, 30*time.Second, "both jobs on every node", func() string {
		for _, mn := range m.nodes {
			for _, id := range []string{ja.ID, jb.ID} {
				if _, err := jobOf(mn.Node, id); err != nil {
					return err.Error()
				}
			}
		}
		return ""
	})
	m.waitJobDone(30*time.Second, ja.ID)
	m.waitJobDone(30*time.Second, jb.ID)

	// bob, a member, sees his own job only.
	js, err := n2.jobs.Jobs(ctx)
	if err != nil || len(js) != 1 || js[0].ID != jb.ID {
		t.Fatalf("bob's job ls: %+v, %v", js, err)
	}
	_, err = n2.jobs.Job(ctx, ja.ID)
	oneLine(t, "bob's job show of alice's job", err, http.StatusNotFound, "no such job")
	_, err = n2.jobs.Job(ctx, "alices")
	oneLine(t, "bob's job show of alice's job by name", err, http.StatusNotFound, "no such job")
	_, err = n2.jobs.JobItems(ctx, ja.ID)
	oneLine(t, "bob's job items of alice's job", err, http.StatusNotFound, "no such job")
	_, err = n2.jobs.JobLogs(ctx, ja.ID, 1)
	oneLine(t, "bob's job logs of alice's job", err, http.StatusNotFound, "no such job")
	_, err = n2.jobs.CancelJob(ctx, ja.ID)
	// Cancel and modify say what show says: they do not reveal that the
	// job exists (issue 27).
	oneLine(t, "bob's cancel of alice's job", err, http.StatusNotFound, "no such job")
	_, err = n2.jobs.ModifyJob(ctx, ja.ID, api.JobModify{Priority: ptr(int64(3))})
	oneLine(t, "bob's modify of alice's job", err, http.StatusNotFound, "no such job")
	if _, err := n2.jobs.JobLogs(ctx, jb.ID, 1); err != nil {
		t.Fatalf("bob's logs of his own job: %v", err)
	}

	// alice, the owner, sees both, from either machine.
	for _, n := range []*Node{n0, n1} {
		js, err := n.jobs.Jobs(ctx)
		if err != nil || len(js) != 2 {
			t.Fatalf("alice's job ls on %s: %d jobs, %v", n.idStr, len(js), err)
		}
		if _, err := n.jobs.JobLogs(ctx, jb.ID, 1); err != nil {
			t.Fatalf("alice's logs of bob's job on %s: %v", n.idStr, err)
		}
		if _, err := n.jobs.JobLogs(ctx, ja.ID, 1); err != nil {
			t.Fatalf("alice's logs of her job on %s: %v", n.idStr, err)
		}
	}

	// The logs protocol itself: bob's machine is refused alice's job by
	// each of alice's machines, whether or not it holds the output.
	// fetch is the node's way to a log: connect, fetch, and try again
	// while the stream could not be opened at all (a connection the gate
	// resets when a machine is let into a topic leaves the peerstore no
	// address a moment: "no addresses"); the answer of the logs protocol
	// is what is checked.
	fetch := func(n *Node, job string) error {
		var err error
		eventually(t, 10*time.Second, "an answer of the logs protocol from "+n.idStr, func() string {
			n2.peers.EnsureConnected(ctx, n.id)
			_, err = p2p.FetchLog(ctx, n2.host.LibP2P(), n.id, p2p.LogsRequest{Org: n.rep.Org(), Job: job, Item: 1}, runtime.LogCap)
			if err != nil && strings.Contains(err.Error(), "failed to dial") {
				return err.Error()
			}
			return ""
		})
		return err
	}
	for _, n := range []*Node{n0, n1} {
		if err := fetch(n, ja.ID); !errors.Is(err, p2p.ErrLogsRefused) || !strings.Contains(err.Error(), "may not see job") {
			t.Fatalf("bob's machine fetching alice's output from %s: %v", n.idStr, err)
		}
		if err := fetch(n, jb.ID); err != nil && !errors.Is(err, p2p.ErrNoLog) {
			t.Fatalf("bob's machine fetching his own output from %s: %v", n.idStr, err)
		}
	}
}

// TestPersonsRoles: only the owner promotes and demotes admins; admins
// remove members but not admins or the owner; nobody removes the owner;
// a reference to a machine is told whose it is; entries written past the
// API's checks (a modified client) are kept without effect on every node;
// org transfer makes an admin the owner, who may then do what the owner
// does.
func TestPersonsRoles(t *testing.T) {
	m := newMesh(t, meshConfig{n: 4, interval: 250 * time.Millisecond})
	for i, name := range []string{"olive", "ada", "cy", "dee"} {
		m.givePerson(i, newPerson(t, name))
	}
	m.formOrg()
	all := m.nodes
	t.Cleanup(func() { m.nodes = all }) // before m.close: every node is closed
	owner, ada, cy, dee := m.nodes[0].Node, m.nodes[1].Node, m.nodes[2].Node, m.nodes[3].Node
	o, a, c, d := owner.orgs.Person(), ada.orgs.Person(), cy.orgs.Person(), dee.orgs.Person()
	ctx := ctxT(t)
	roles := func(want map[string]string) {
		t.Helper()
		m.waitConverged(30 * time.Second)
		for _, mn := range m.live() {
			mn.rep.View(func(st *ledger.State) {
				for p, r := range want {
					if st.Role(p) != r {
						t.Fatalf("%s: %s has role %q, want %q", mn.name, st.PersonName(p), st.Role(p), r)
					}
				}
			})
		}
	}

	// A member promotes nobody; the owner does, by ID or by name.
	_, err := ada.orgs.SetRole(ctx, c, ledger.RoleAdmin)
	oneLine(t, "a member promoting", err, http.StatusForbidden, "this machine acts for person ada", "a member", "only the owner promotes")
	if mi, err := owner.orgs.SetRole(ctx, a, ledger.RoleAdmin); err != nil || mi.Role != ledger.RoleAdmin || mi.Name != "ada" || len(mi.Machines) != 1 {
		t.Fatalf("owner promotes ada: %+v, %v", mi, err)
	}
	if _, err := owner.orgs.SetRole(ctx, "cy", ledger.RoleAdmin); err != nil {
		t.Fatalf("owner promotes cy by name: %v", err)
	}
	// A machine's ID is no member's.
	_, err = owner.orgs.SetRole(ctx, dee.idStr, ledger.RoleAdmin)
	oneLine(t, "set-role of a machine", err, http.StatusNotFound, "is machine n3", "acts for person dee ("+d+")")
	roles(map[string]string{o: ledger.RoleOwner, a: ledger.RoleAdmin, c: ledger.RoleAdmin, d: ledger.RoleMember})

	// An admin can neither demote nor remove another admin, nor promote,
	// nor remove the owner.
	_, err = ada.orgs.SetRole(ctx, c, ledger.RoleMember)
	oneLine(t, "an admin demoting an admin", err, http.StatusForbidden, "this machine acts for person ada", "an admin", "only the owner")
	_, err = ada.orgs.RemoveMember(ctx, c)
	oneLine(t, "an admin removing an admin", err, http.StatusForbidden, "only the owner removes admins")
	_, err = ada.orgs.SetRole(ctx, d, ledger.RoleAdmin)
	oneLine(t, "an admin promoting", err, http.StatusForbidden, "only the owner")
	_, err = ada.orgs.RemoveMember(ctx, o)
	oneLine(t, "an admin removing the owner", err, http.StatusForbidden, "whom nobody may remove")
	_, err = owner.orgs.SetRole(ctx, o, ledger.RoleAdmin)
	oneLine(t, "the owner demoting themselves", err, http.StatusConflict, "org transfer")

	// The same, written past the API's checks: each entry is kept, on
	// every node, and has no effect anywhere.
	var raw []*ledger.Entry
	for _, w := range []struct {
		kind    string
		payload any
	}{
		{ledger.KindMemberRole, ledger.MemberRole{Member: c, Role: ledger.RoleMember}},
		{ledger.KindMemberRemove, ledger.MemberRef{Member: c}},
		{ledger.KindMemberRole, ledger.MemberRole{Member: d, Role: ledger.RoleAdmin}},
		{ledger.KindMemberRemove, ledger.MemberRef{Member: o}},
		{ledger.KindOrgTransfer, ledger.OrgTransfer{To: a}},
	} {
		e, err := ada.rep.Write(ctx, w.kind, w.payload)
		if err == nil || e == nil {
			t.Fatalf("ada's raw %s %+v: took effect on her node (%v)", w.kind, w.payload, err)
		}
		raw = append(raw, e)
	}
	eventually(t, 30*time.Second, "every node to hold ada's raw entries", func() string {
		for _, mn := range m.nodes {
			for _, e := range raw {
				if !mn.rep.Has(e.CID()) {
					return mn.name + " lacks " + e.Kind
				}
			}
		}
		return ""
	})
	roles(map[string]string{o: ledger.RoleOwner, a: ledger.RoleAdmin, c: ledger.RoleAdmin, d: ledger.RoleMember})
	for _, mn := range m.nodes {
		lg, unlock := mn.rep.ReadLog()
		for _, e := range raw {
			if lg.Effective(e.CID()) {
				t.Errorf("%s: ada's raw %s is effective", mn.name, e.Kind)
			}
		}
		unlock()
	}

	// An admin removes a member, with the member's machine.
	if id, err := ada.orgs.RemoveMember(ctx, d); err != nil || id != d {
		t.Fatalf("an admin removing a member: %q, %v", id, err)
	}
	m.nodes = m.nodes[:3] // dee's machine is out of the org
	roles(map[string]string{d: ""})
	if st := machineStatus(owner, dee.idStr); st != ledger.MachineRemoved {
		t.Fatalf("removed member's machine is %q", st)
	}
	// The owner demotes an admin.
	if _, err := owner.orgs.SetRole(ctx, c, ledger.RoleMember); err != nil {
		t.Fatalf("owner demotes cy: %v", err)
	}
	roles(map[string]string{c: ledger.RoleMember})

	// Transfer: only the owner, only to an admin.
	_, err = ada.orgs.TransferOrg(ctx, a)
	oneLine(t, "an admin transferring", err, http.StatusForbidden, "only the owner may transfer")
	_, err = owner.orgs.TransferOrg(ctx, c)
	oneLine(t, "transfer to a member", err, http.StatusConflict, "make them an admin first: cshare member set-role "+c+" admin")
	info, err := owner.orgs.TransferOrg(ctx, "ada")
	if err != nil || info.Owner != a || info.OwnerName != "ada" {
		t.Fatalf("transfer to ada: %+v, %v", info, err)
	}
	roles(map[string]string{a: ledger.RoleOwner, o: ledger.RoleAdmin, c: ledger.RoleMember})
	for _, mn := range m.nodes {
		if oi, err := mn.orgs.Org(context.Background()); err != nil || oi.Owner != a {
			t.Fatalf("%s: org owner %q, %v", mn.name, oi.Owner, err)
		}
	}
	// The old owner, an admin now, may not demote the new one; the new
	// owner removes an admin.
	_, err = owner.orgs.RemoveMember(ctx, a)
	oneLine(t, "the old owner removing the new", err, http.StatusForbidden, "whom nobody may remove")
	if _, err := ada.orgs.RemoveMember(ctx, o); err != nil {
		t.Fatalf("the new owner removing the old, an admin: %v", err)
	}
	m.nodes = m.nodes[1:3]
	roles(map[string]string{o: ""})
}

// TestPersonKeyAtCreate: org create makes the person key when the data dir
// has none, named as asked (a bad name is refused, naming user_name), and
// the owner is that person; node status names them before and after.
func TestPersonKeyAtCreate(t *testing.T) {
	m := newMesh(t, meshConfig{n: 1, interval: 250 * time.Millisecond})
	n := m.nodes[0].Node
	ctx := ctxT(t)
	if st, _ := n.Status(ctx); st.Person != "" {
		t.Fatalf("a person before any key: %+v", st)
	}
	_, err := n.orgs.CreateOrg(ctx, api.OrgCreate{Name: "acme", UserName: "olive\x1b[2J"})
	oneLine(t, "bad user name", err, http.StatusBadRequest, "user_name")
	var se *api.StatusError
	if !errors.As(err, &se) || se.Field != "user_name" {
		t.Fatalf("bad user name: field %+v", se)
	}
	if _, err := userkey.Load(n.opts.DataDir); err == nil {
		t.Fatal("a refused create made a person key")
	}
	if _, err := n.orgs.CreateOrg(ctx, api.OrgCreate{Name: "acme", UserName: "olive"}); err != nil {
		t.Fatal(err)
	}
	k, err := userkey.Load(n.opts.DataDir)
	if err != nil || k.Name != "olive" {
		t.Fatalf("person key: %+v, %v", k, err)
	}
	st, _ := n.Status(ctx)
	o, _ := n.orgs.Org(ctx)
	ms, _ := n.orgs.Members(ctx)
	if st.Person != k.ID || st.PersonName != "olive" || st.Role != ledger.RoleOwner || o.Owner != k.ID || len(ms) != 1 || ms[0].ID != k.ID ||
		!slices.Equal(ms[0].Machines, []string{n.idStr}) {
		t.Fatalf("status %+v, org owner %s, members %+v; want person %s", st, o.Owner, ms, k.ID)
	}
}
