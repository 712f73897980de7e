package cli

import (
	"strings"
	"testing"
)

// TestMachineDiskFull: a machine whose disk is below its reserve says so in
// machine ls and machine show, after its status; the others do not.
func TestMachineDiskFull(t *testing.T) {
	n := startNode(t)
	n.machines[1].DiskFull = true
	r := n.run("machine", "ls")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var full []string
	for _, line := range strings.Split(r.stdout, "\n") {
		if strings.Contains(line, "disk full") {
			full = append(full, line)
		}
	}
	if len(full) != 1 || !strings.Contains(full[0], "render-2") || !strings.Contains(full[0], "busy, disk full") {
		t.Fatalf("machine ls shows disk full on %q; want render-2's line only, as busy, disk full:\n%s", full, r.stdout)
	}
	r = n.run("machine", "show", "render-2")
	if r.code != 0 || !strings.Contains(r.stdout, "busy, disk full") {
		t.Fatalf("machine show (exit %d) lacks the disk:\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = n.run("machine", "ls", "--json")
	if strings.Count(r.stdout, `"disk_full": true`) != 1 {
		t.Fatalf("machine ls --json: want one disk_full:\n%s", r.stdout)
	}
}
