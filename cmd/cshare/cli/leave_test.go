package cli

import (
	"strings"
	"testing"

	"github.com/cshare/cshare/node/api"
)

// TestLeaveAndDelete: member leave and org delete send their bodies, wait
// until the node reports no org (the fake does from its third status), and
// say in one line where the org's data went; a wrong or missing --confirm
// is refused with one line.
func TestLeaveAndDelete(t *testing.T) {
	n := startNode(t)
	r := n.run("member", "leave", "--purge")
	if r.code != 0 || r.stdout != "left org acme (bafyorg); this node is in no org now; its data on this machine was deleted (--purge)\n" {
		t.Fatalf("leave --purge: %+v", r)
	}
	n.mu.Lock()
	leave, togo := *n.leave, n.left
	n.mu.Unlock()
	if leave != (api.LeaveRequest{Purge: true}) || togo != 0 {
		t.Fatalf("sent %+v; %d statuses to go", leave, togo)
	}

	n = startNode(t)
	r = n.run("org", "delete")
	if r.code != 2 || !strings.Contains(r.stderr, "--confirm is required") {
		t.Fatalf("delete without --confirm: %+v", r)
	}
	r = n.run("org", "delete", "--confirm", "acne")
	if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "--confirm: acne does not match the org's name acme") {
		t.Fatalf("delete with the wrong name: %+v", r)
	}
	// --confirm is compared exactly: a tab or a space is not the name.
	for _, c := range []string{"acme\t", " acme", "acme\n"} {
		r = n.run("org", "delete", "--confirm", c)
		if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "does not match the org's name acme") {
			t.Fatalf("delete with --confirm %q: %+v", c, r)
		}
	}
	r = n.run("org", "delete", "--confirm", "acme")
	if r.code != 0 || r.stdout != "deleted org acme (bafyorg); this node is in no org now; its data on this machine is kept in /data/orgs/bafyorg\n" {
		t.Fatalf("delete: %+v", r)
	}
	n.mu.Lock()
	del := *n.del
	n.mu.Unlock()
	if del != (api.OrgDeleteRequest{Confirm: "acme"}) {
		t.Fatalf("sent %+v", del)
	}
}
