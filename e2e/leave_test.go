//go:build e2e

package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// containers lists the IDs of the Docker containers (running or not) that
// carry every label.
func containers(t *testing.T, labels ...string) []string {
	t.Helper()
	args := []string{"ps", "-a", "-q"}
	for _, l := range labels {
		args = append(args, "--filter", "label="+l)
	}
	out, err := exec.Command("docker", args...).Output()
	if err != nil {
		t.Fatalf("docker %v: %v", args, err)
	}
	return strings.Fields(string(out))
}

// TestLeaveAndDeleteRemoveContainers: with the Docker driver, a member
// that leaves (member leave) stops and removes its containers of the org
// and reports no org, its data kept aside; the owner's org delete then
// leaves no container of the org on any machine, every node reports no org
// and each can create a new one.
func TestLeaveAndDeleteRemoveContainers(t *testing.T) {
	dockerAvailable(t)
	ps := mesh(t, 3)
	var st status
	ps[0].json(&st, "node", "status")
	org := st.Org
	ids := make([]string, len(ps))
	for i, p := range ps {
		var s status
		p.json(&s, "node", "status")
		ids[i] = s.ID
	}
	ps[1].must("job", "submit", "--cpus", "6", "--range", "1-60", "--", "sh", "-c", "sleep 120")
	eventually(t, 90*time.Second, "containers of the org on every machine", func() bool {
		for _, id := range ids {
			if len(containers(t, "cshare.org="+org, "cshare.machine="+id)) == 0 {
				return false
			}
		}
		return true
	})

	out := ps[2].must("member", "leave")
	if want := filepath.Join(ps[2].dir, "orgs", org); !strings.Contains(out, "left org e2e") || !strings.Contains(out, want) {
		t.Fatalf("member leave said %q; want it to name %s", out, want)
	}
	ps[2].json(&st, "node", "status")
	if st.Org != "" {
		t.Fatalf("after member leave the node reports org %q", st.Org)
	}
	if c := containers(t, "cshare.org="+org, "cshare.machine="+ids[2]); len(c) != 0 {
		t.Fatalf("the leaver still has %d containers of the org", len(c))
	}

	ps[1].oneLineErr("only the owner may delete the org", "org", "delete", "--confirm", "e2e")
	ps[0].oneLineErr("does not match the org's name e2e", "org", "delete", "--confirm", "e2")
	out = ps[0].must("org", "delete", "--confirm", "e2e", "--purge")
	if !strings.Contains(out, "deleted org e2e") || !strings.Contains(out, "deleted (--purge)") {
		t.Fatalf("org delete said %q", out)
	}
	// 3 heartbeat intervals (500 ms) and a node's restart.
	eventually(t, 10*time.Second, "no org on any node", func() bool {
		for _, p := range ps {
			// orgOf is "" while the node's API is down: a node that
			// leaves its org starts again.
			if orgOf(p) != "-" {
				return false
			}
		}
		return true
	})
	eventually(t, 10*time.Second, "no container of the org", func() bool {
		return len(containers(t, "cshare.org="+org)) == 0
	})
	for i, p := range ps {
		p.must("org", "create", "--name", "again"+string(rune('a'+i)))
	}
}
