package cli

import (
	"strings"
	"testing"
)

// Shell completion completes references from the node: machines and jobs
// by ID with their names, filtered by what is typed; every shell's script
// is printed.
func TestCompletion(t *testing.T) {
	n := startNode(t)
	r := n.run("__complete", "machine", "approve", "")
	if r.code != 0 || !strings.Contains(r.stdout, m1ID+"\t") || !strings.Contains(r.stdout, m2ID+"\t") || !strings.HasSuffix(strings.TrimSpace(r.stdout), ":4") {
		t.Fatalf("machine approve completion: %+v", r)
	}
	r = n.run("__complete", "machine", "show", m2ID[:20])
	if strings.Contains(r.stdout, m1ID) || !strings.Contains(r.stdout, m2ID) {
		t.Fatalf("prefix completion: %q", r.stdout)
	}
	if r := n.run("__complete", "job", "cancel", ""); !strings.Contains(r.stdout, jobID+"\t") {
		t.Fatalf("job completion: %q", r.stdout)
	}
	if r := n.run("__complete", "member", "remove", ""); !strings.Contains(r.stdout, ownerID) {
		t.Fatalf("member completion: %q", r.stdout)
	}
	if r := n.run("__complete", "job", "cancel", jobID, ""); strings.Contains(r.stdout, jobID) {
		t.Fatalf("a second argument completed: %q", r.stdout)
	}
	for _, sh := range []string{"bash", "zsh", "fish"} {
		if r := runCLI("completion", sh); r.code != 0 || !strings.Contains(r.stdout, "cshare") {
			t.Errorf("completion %s: %+v", sh, r.code)
		}
	}
}
