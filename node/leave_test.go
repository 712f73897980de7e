package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/node/orgsvc"
	"github.com/cshare/cshare/runtime"
)

// noOrg says what is wrong with node i reporting no org (following its
// reset as node.Run would), or "".
func (m *mesh) noOrg(i int) string {
	n := m.follow(i)
	if n == nil {
		return m.nodes[i].name + " is stopped"
	}
	st, err := n.Status(context.Background())
	if err != nil {
		return fmt.Sprintf("%s: status: %v", m.nodes[i].name, err)
	}
	if st.Org != "" || st.Status != "no org" {
		return fmt.Sprintf("%s reports org %q (%s)", m.nodes[i].name, st.Org, st.Status)
	}
	return ""
}

// waitNoOrg waits until every node of idx reports no org.
func (m *mesh) waitNoOrg(d time.Duration, idx ...int) {
	m.t.Helper()
	eventually(m.t, d, "no org on every node", func() string {
		for _, i := range idx {
			if msg := m.noOrg(i); msg != "" {
				return msg
			}
		}
		return ""
	})
}

// checkArchived checks that the org's data of node i went to dir, and that
// what belongs to the machine stayed.
func checkArchived(t *testing.T, mn *meshNode, org, dir string) {
	t.Helper()
	if want := filepath.Join(mn.opts.DataDir, "orgs", org); dir != want && !strings.HasPrefix(dir, want+".") {
		t.Fatalf("%s: archive %q, want %s", mn.name, dir, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "ledger")); err != nil {
		t.Fatalf("%s: the old ledger is not in %s: %v", mn.name, dir, err)
	}
	if _, err := os.Stat(filepath.Join(mn.opts.DataDir, "node.key")); err != nil {
		t.Fatalf("%s: node.key moved: %v", mn.name, err)
	}
}

// TestLeaveThenCreate: a member leaves; its removal reaches the owner; its
// node restarts in no org, on the same API address, with the old org's data
// aside; it can then create an org of its own.
func TestLeaveThenCreate(t *testing.T) {
	m := newMesh(t, meshConfig{n: 2, interval: 250 * time.Millisecond})
	m.formOrg()
	ctx := ctxT(t)
	n0, n1 := m.nodes[0].Node, m.nodes[1].Node
	org, id1, addr, tok := n0.rep.Org(), n1.idStr, n1.APIAddr(), n1.Token()
	res, err := n1.orgs.Leaving().Leave(ctx, api.LeaveRequest{})
	if err != nil {
		t.Fatalf("leave: %v", err)
	}
	if res.Org != org || res.OrgName != "acme" || res.Purged || res.Warning != "" {
		t.Fatalf("leave: %+v", res)
	}
	if st := machineStatus(n0, id1); st != ledger.MachineRemoved {
		t.Fatalf("the owner sees the leaver's machine %q just after leave answered; want removed (leave waits until a peer has it)", st)
	}
	m.waitNoOrg(30*time.Second, 1)
	n1 = m.nodes[1].Node
	if n1.APIAddr() != addr || n1.Token() != tok || n1.idStr != id1 {
		t.Fatalf("restarted on %s (token kept %v, id %s); want %s, the same token and id", n1.APIAddr(), n1.Token() == tok, n1.idStr, addr)
	}
	checkArchived(t, m.nodes[1], org, res.Archive)
	if _, err := n1.orgs.CreateOrg(ctx, api.OrgCreate{Name: "solo"}); err != nil {
		t.Fatalf("create an org after leaving: %v", err)
	}
	if got := n1.rep.Org(); got == "" || got == org {
		t.Fatalf("in org %q after create, want a new one", got)
	}
}

// TestLeavePurge: leave --purge deletes the org's data rather than keeping
// it; the machine's own files stay.
func TestLeavePurge(t *testing.T) {
	m := newMesh(t, meshConfig{n: 2, interval: 250 * time.Millisecond})
	m.formOrg()
	res, err := m.nodes[1].orgs.Leaving().Leave(ctxT(t), api.LeaveRequest{Purge: true})
	if err != nil || !res.Purged || res.Archive != "" {
		t.Fatalf("leave --purge: %+v, %v", res, err)
	}
	m.waitNoOrg(30*time.Second, 1)
	dir := m.nodes[1].opts.DataDir
	if _, err := os.Stat(filepath.Join(dir, "orgs")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("orgs/ exists after --purge: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node.key")); err != nil {
		t.Fatalf("node.key: %v", err)
	}
}

// TestRemovedThenCreateAndRejoin: an admin removes a member; the member's
// node leaves the org by itself and can create an org; a removed machine
// that joins again with the org key is pending, and its history shows the
// removal before the new registration.
func TestRemovedThenCreateAndRejoin(t *testing.T) {
	m := newMesh(t, meshConfig{n: 3, interval: 250 * time.Millisecond})
	key := m.formOrg()
	ctx := ctxT(t)
	n0 := m.nodes[0].Node
	org := n0.rep.Org()
	for _, i := range []int{1, 2} {
		person := m.nodes[i].Node.orgs.Person()
		if _, err := n0.orgs.RemoveMember(ctx, person); err != nil {
			t.Fatalf("remove %s: %v", m.nodes[i].name, err)
		}
	}
	m.waitNoOrg(30*time.Second, 1, 2)
	if _, err := m.nodes[1].Node.orgs.CreateOrg(ctx, api.OrgCreate{Name: "elsewhere"}); err != nil {
		t.Fatalf("create an org after removal: %v", err)
	}

	// Rejoin: pending until approved, with its history.
	n2 := m.nodes[2].Node
	id2 := n2.idStr
	res, err := n2.orgs.Join(ctx, api.JoinRequest{OrgKey: key})
	if err != nil || res.Status != ledger.MachinePending || res.Org != org {
		t.Fatalf("rejoin: %+v, %v; want pending in %s", res, err, org)
	}
	if msg := m.noOrg(2); msg == "" {
		t.Fatal("the rejoined node left again")
	}
	eventually(t, 20*time.Second, "the owner sees the rejoined machine pending", func() string {
		if st := machineStatus(n0, id2); st != ledger.MachinePending {
			return "status " + st
		}
		return ""
	})
	mi, err := n0.orgs.Machine(ctx, id2)
	if err != nil {
		t.Fatal(err)
	}
	var hist []string
	n0.rep.View(func(st *ledger.State) {
		for _, ev := range st.Machines[id2].History {
			hist = append(hist, ev.Status)
		}
	})
	checkHistory(t, "ledger", hist)
	// The API's machine JSON carries the same history once machine show
	// renders it (another part of issue 17).
	b, _ := json.Marshal(mi)
	var raw struct {
		History []struct {
			Status string `json:"status"`
		} `json:"history"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), `"history"`) {
		hist = hist[:0]
		for _, ev := range raw.History {
			hist = append(hist, ev.Status)
		}
		checkHistory(t, "API", hist)
	}
	m.approve(n0, id2)
	eventually(t, 20*time.Second, "the rejoined machine approved on its own node", func() string {
		if st := machineStatus(m.nodes[2].Node, id2); st != ledger.MachineApproved {
			return "status " + st
		}
		return ""
	})
}

// checkHistory: a removed status comes before the last, pending one.
func checkHistory(t *testing.T, where string, hist []string) {
	t.Helper()
	removed := -1
	for i, s := range hist {
		if s == ledger.MachineRemoved {
			removed = i
		}
	}
	if len(hist) < 2 || hist[len(hist)-1] != ledger.MachinePending || removed < 0 || removed >= len(hist)-1 {
		t.Fatalf("%s history %v; want removed before the last, pending", where, hist)
	}
}

// TestOrgDelete: only the owner deletes, and only with the org's name;
// then every node of a 3-node mesh reports no org within 3 heartbeat
// intervals (plus slack for restarting a node), no fake driver has a run of
// the org, each node keeps the tombstone and can create a new org.
func TestOrgDelete(t *testing.T) {
	iv := 300 * time.Millisecond
	m := newMesh(t, meshConfig{n: 3, interval: iv, slots: 2, runFor: time.Minute})
	m.formOrg()
	ctx := ctxT(t)
	n0 := m.nodes[0].Node
	org := n0.rep.Org()
	j := submit(t, n0, api.JobSubmit{Name: "long", CPUs: 6, RangeStart: ptr[int64](1), RangeEnd: ptr[int64](50)})
	eventually(t, 30*time.Second, "runs on every machine", func() string {
		for _, mn := range m.nodes {
			if runs, _ := mn.drv.List(ctx, map[string]string{runtime.LabelOrg: org}); len(runs) == 0 {
				return mn.name + " runs nothing"
			}
		}
		return ""
	})
	_, err := m.nodes[1].orgs.Leaving().DeleteOrg(ctx, api.OrgDeleteRequest{Confirm: "acme"})
	if statusCode(err) != http.StatusForbidden || !strings.Contains(err.Error(), "only the owner may delete the org") {
		t.Fatalf("a member's delete: %v", err)
	}
	_, err = n0.orgs.Leaving().DeleteOrg(ctx, api.OrgDeleteRequest{Confirm: "acne"})
	if statusCode(err) != http.StatusBadRequest || err.Error() != "--confirm: acne does not match the org's name acme" {
		t.Fatalf("delete with a wrong name: %v", err)
	}
	if msg := m.noOrg(0); msg == "" {
		t.Fatal("a refused delete left the org")
	}
	res, err := n0.orgs.Leaving().DeleteOrg(ctx, api.OrgDeleteRequest{Confirm: "acme"})
	if err != nil || res.Org != org || res.Warning != "" {
		t.Fatalf("delete: %+v, %v", res, err)
	}
	m.waitNoOrg(3*iv+5*time.Second, 0, 1, 2)
	for i, mn := range m.nodes {
		if runs, err := mn.drv.List(ctx, map[string]string{runtime.LabelOrg: org}); err != nil || len(runs) != 0 {
			t.Errorf("%s: %d runs of the deleted org left (%v)", mn.name, len(runs), err)
		}
		if b := orgsvc.TombstoneDir(filepath.Join(mn.opts.DataDir, orgsvc.TombstonesDir)).Tombstone(org); b == nil {
			t.Errorf("%s keeps no tombstone of %s", mn.name, org)
		}
		n := m.follow(i)
		if _, err := n.jobs.Job(ctx, j.ID); err == nil {
			t.Errorf("%s still shows job %s", mn.name, j.ID)
		}
		if _, err := n.orgs.CreateOrg(ctx, api.OrgCreate{Name: fmt.Sprintf("next%d", i)}); err != nil {
			t.Errorf("%s: create after delete: %v", mn.name, err)
		}
	}
}

// TestTombstoneForLateNode: a node that is down while the owner deletes
// the org, and starts when every other node has already left it, learns of
// the deletion from a machine it dials (p2p.TombstoneProtocol) and leaves
// too.
func TestTombstoneForLateNode(t *testing.T) {
	m := newMesh(t, meshConfig{n: 3, interval: 250 * time.Millisecond, fixPorts: true})
	m.formOrg()
	ctx := ctxT(t)
	org := m.nodes[0].rep.Org()
	m.stop(2)
	if _, err := m.nodes[0].orgs.Leaving().DeleteOrg(ctx, api.OrgDeleteRequest{Confirm: "acme"}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	m.waitNoOrg(30*time.Second, 0, 1)
	n2 := m.restart(2)
	if n2.rep.Org() != org {
		t.Fatalf("the late node starts in org %q, want %s (it has not heard yet)", n2.rep.Org(), org)
	}
	m.waitNoOrg(30*time.Second, 2)
	if b := orgsvc.TombstoneDir(filepath.Join(m.nodes[2].opts.DataDir, orgsvc.TombstonesDir)).Tombstone(org); b == nil {
		t.Fatal("the late node keeps no tombstone")
	}
	if _, err := os.Stat(filepath.Join(m.nodes[2].opts.DataDir, "orgs", org, "ledger")); err != nil {
		t.Fatalf("the late node's old ledger: %v", err)
	}
}

// TestPendingMachineLeaves: a member's second machine, still pending, leaves:
// it goes back to no org by itself, and its person stays a member with
// their approved machine (a pending machine's entries would have no effect,
// so it writes none).
func TestPendingMachineLeaves(t *testing.T) {
	m := newMesh(t, meshConfig{n: 3, interval: 250 * time.Millisecond})
	all := m.nodes
	m.nodes = all[:2] // node 2 joins later, by hand
	key := m.formOrg()
	m.nodes = all
	ctx := ctxT(t)
	n1, n2 := m.nodes[1].Node, m.nodes[2].Node
	m.sharePerson(1, 2)
	res, err := n2.orgs.Join(ctx, api.JoinRequest{OrgKey: key})
	if err != nil || res.Status != ledger.MachinePending {
		t.Fatalf("join: %+v, %v", res, err)
	}
	person := n1.orgs.Person()
	if n2.orgs.Person() != person {
		t.Fatal("node 2 does not act for node 1's person")
	}
	left, err := n2.orgs.Leaving().Leave(ctx, api.LeaveRequest{})
	if err != nil {
		t.Fatalf("a pending machine leaves: %v", err)
	}
	if left.Org == "" {
		t.Fatalf("leave: %+v", left)
	}
	m.waitNoOrg(30*time.Second, 2)
	var role, status string
	m.nodes[0].Node.rep.View(func(st *ledger.State) {
		role, status = st.Role(person), st.Machines[n1.idStr].Status
	})
	if role != ledger.RoleMember || status != ledger.MachineApproved {
		t.Fatalf("after the pending machine left: person %q, their approved machine %s", role, status)
	}
}

// TestRemoveSelfReachesTheOrg: a node that removes its own person or
// machine, by any command, leaves only once another machine of the org has
// the entry (issue 27: a member's `member remove` of herself reset her node
// 13 ms later and the entry reached nobody, for good); with no other machine
// of the org connected the command fails and changes nothing. The paths: a
// member's member remove of herself, an admin's, and a machine remove of
// the node's own machine (one of the owner's).
func TestRemoveSelfReachesTheOrg(t *testing.T) {
	m := newMesh(t, meshConfig{n: 4, interval: 250 * time.Millisecond})
	m.ownerToo = []int{3} // n3 is a second machine of the owner's
	m.formOrg()
	ctx := ctxT(t)
	n0, n1 := m.nodes[0].Node, m.nodes[1].Node
	if _, err := n0.orgs.SetRole(ctx, n1.orgs.Person(), ledger.RoleAdmin); err != nil {
		t.Fatal(err)
	}
	m.waitConverged(30 * time.Second)

	// Cut off: every other machine stopped. The command fails, nothing changes.
	n2 := m.nodes[2].Node
	for _, i := range []int{0, 1, 3} {
		m.stop(i)
	}
	eventually(t, 20*time.Second, "n2 connected to no machine of the org", func() string {
		for _, p := range n2.peers.OrgMachines() {
			if n2.host.Connected(p) {
				return "connected to " + p.String()
			}
		}
		return ""
	})
	before := entryCount(n2)
	if _, err := n2.orgs.RemoveMember(ctx, n2.orgs.Person()); err == nil || statusCode(err) != http.StatusServiceUnavailable || strings.Contains(err.Error(), "\n") {
		t.Fatalf("member remove of oneself, cut off: %v; want one line, 503", err)
	}
	if _, err := n2.orgs.MachineAction(ctx, n2.idStr, "remove"); err == nil {
		t.Fatal("machine remove of oneself, cut off: no error")
	}
	if got := entryCount(n2); got != before || m.noOrg(2) == "" {
		t.Fatalf("cut off: %d entries after the refused removals, %d before; no org: %q", got, before, m.noOrg(2))
	}
	for _, i := range []int{0, 1, 3} {
		m.restart(i)
	}
	m.waitConverged(60 * time.Second)
	n0, n1 = m.nodes[0].Node, m.nodes[1].Node

	// gone: when the command answers, another machine of the org (one of
	// others) already has the removal.
	gone := func(who, id string, others ...int) {
		t.Helper()
		var seen []string
		for _, i := range others {
			st := machineStatus(m.nodes[i].Node, id)
			if st == ledger.MachineRemoved {
				return
			}
			seen = append(seen, m.nodes[i].name+": "+st)
		}
		t.Fatalf("%s: as soon as the command answered, the org's other machines see the machine as %v; want removed on one", who, seen)
	}
	// A member removes herself.
	id2, p2 := n2.idStr, n2.orgs.Person()
	if got, err := n2.orgs.RemoveMember(ctx, p2); err != nil || got != p2 {
		t.Fatalf("member remove of oneself: %q, %v", got, err)
	}
	gone("member remove self", id2, 0, 1, 3)
	// An admin removes himself.
	id1 := n1.idStr
	if _, err := n1.orgs.RemoveMember(ctx, n1.orgs.Person()); err != nil {
		t.Fatalf("an admin's member remove of himself: %v", err)
	}
	gone("an admin's member remove self", id1, 0, 3)
	// The owner's second machine removes itself.
	n3 := m.nodes[3].Node
	id3 := n3.idStr
	if _, err := n3.orgs.MachineAction(ctx, id3, "remove"); err != nil {
		t.Fatalf("machine remove of oneself: %v", err)
	}
	gone("machine remove self", id3, 0)
	m.waitNoOrg(30*time.Second, 1, 2, 3)
	if role := func() (r string) {
		n0.rep.View(func(st *ledger.State) { r = st.Role(n0.orgs.Person()) })
		return
	}(); role != ledger.RoleOwner {
		t.Fatalf("the owner's person is %q after her second machine left; want owner", role)
	}
}

// TestRemovedWhileCutOffRejoinsPending: a person removed while their only
// node was down learns it when the node comes back, leaves, and joining
// again with the org key makes the machine pending, never approved.
func TestRemovedWhileCutOffRejoinsPending(t *testing.T) {
	m := newMesh(t, meshConfig{n: 2, interval: 250 * time.Millisecond, fixPorts: true})
	key := m.formOrg()
	ctx := ctxT(t)
	n0 := m.nodes[0].Node
	person, id1 := m.nodes[1].Node.orgs.Person(), m.nodes[1].Node.idStr
	m.stop(1)
	if _, err := n0.orgs.RemoveMember(ctx, person); err != nil {
		t.Fatal(err)
	}
	m.restart(1)
	m.waitNoOrg(30*time.Second, 1)
	res, err := m.nodes[1].Node.orgs.Join(ctx, api.JoinRequest{OrgKey: key})
	if err != nil || res.Status != ledger.MachinePending {
		t.Fatalf("rejoin after being removed while down: %+v, %v; want pending", res, err)
	}
	eventually(t, 20*time.Second, "the owner sees the machine pending", func() string {
		if st := machineStatus(n0, id1); st != ledger.MachinePending {
			return "status " + st
		}
		return ""
	})
}
