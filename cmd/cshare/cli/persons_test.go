package cli

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/cshare/cshare/node/api"
)

// TestPersonsOutput: members are persons with their machines (an array in
// JSON); machines, the org, the node and jobs name persons; machine show
// prints the machine's history, escaped.
func TestPersonsOutput(t *testing.T) {
	n := startNode(t)
	r := n.run("member", "ls", "--json")
	var ms []api.MemberInfo
	if err := json.Unmarshal([]byte(r.stdout), &ms); err != nil || r.code != 0 {
		t.Fatalf("member ls --json: %v, exit %d: %s", err, r.code, r.stdout)
	}
	if len(ms) != 2 || len(ms[0].Machines) != 3 || !slices.Contains(ms[0].Machines, m1ID) || ms[1].Name != "bob" {
		t.Errorf("member ls --json: %+v", ms)
	}
	var raw []map[string]any
	_ = json.Unmarshal([]byte(r.stdout), &raw)
	for _, k := range []string{"id", "name", "role", "machines", "joined"} {
		if _, ok := raw[0][k]; !ok {
			t.Errorf("member ls --json lacks %q: %s", k, r.stdout)
		}
	}

	r = n.run("machine", "show", "laptop")
	if r.code != 0 {
		t.Fatalf("machine show: %s", r.stderr)
	}
	for _, w := range []string{"owner:", "bob (" + personB + ")", "HISTORY", "TIME", "BY", "removed", "2026-03-01T10:30:00Z", ownerID, `bob\x1b[2J`} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("machine show lacks %q:\n%s", w, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "\x1b") {
		t.Errorf("machine show prints a raw escape:\n%q", r.stdout)
	}
	r = n.run("machine", "show", "laptop", "--json")
	var mi api.MachineInfo
	if err := json.Unmarshal([]byte(r.stdout), &mi); err != nil || len(mi.History) != 3 || mi.OwnerName != "bob" || mi.History[2].By != "bob\x1b[2J" {
		t.Errorf("machine show --json: %v %+v", err, mi)
	}
	if r := n.run("machine", "ls"); !strings.Contains(r.stdout, "OWNER") || !strings.Contains(r.stdout, "bob") {
		t.Errorf("machine ls lacks the owner's name:\n%s", r.stdout)
	}
	if r := n.run("org", "show"); !strings.Contains(r.stdout, "alice ("+ownerID+")") {
		t.Errorf("org show lacks the owner person:\n%s", r.stdout)
	}
}

// TestOrgTransferCLI: org transfer needs --to; the node's refusal is one
// line; set-role refuses owner and points at org transfer.
func TestOrgTransferCLI(t *testing.T) {
	n := startNode(t)
	oneErrorLine(t, n.run("org", "transfer"), 2, "--to is required")
	oneErrorLine(t, n.run("member", "set-role", "bob", "owner"), 2, "cshare org transfer --to PERSON")
	oneErrorLine(t, n.run("org", "transfer", "--to", "alice"), 1, "make them an admin first: cshare member set-role "+ownerID+" admin")
	oneErrorLine(t, n.run("org", "transfer", "--to", "nobody"), 1, `unknown member "nobody"`)
	r := n.run("org", "transfer", "--to", personB, "--json")
	var o api.OrgInfo
	if err := json.Unmarshal([]byte(r.stdout), &o); err != nil || o.Owner != personB || o.OwnerName != "bob" {
		t.Fatalf("org transfer --json: %v %q", err, r.stdout)
	}
}
