package cli

import (
	"strings"
	"testing"
)

// TestNodeDashboardURL: the printed URL carries a one-time sign-in code
// from the node, not the token.
func TestNodeDashboardURL(t *testing.T) {
	n := startNode(t)
	r := n.run("node", "dashboard")
	want := n.srv.URL + "/login?code=c0de\n"
	if r.code != 0 || r.stdout != want || strings.Contains(r.stdout, "test-token") {
		t.Fatalf("node dashboard: exit %d, %q (stderr %q), want %q", r.code, r.stdout, r.stderr, want)
	}
	t.Setenv("PATH", t.TempDir()) // no xdg-open: the URL, and a line that says so
	r = n.run("node", "dashboard", "--open")
	if r.code != 0 || r.stdout != want || !strings.Contains(r.stderr, "--open: no ") {
		t.Errorf("node dashboard --open without xdg-open: exit %d, %q, %q", r.code, r.stdout, r.stderr)
	}
	if r := runCLI("--data-dir", t.TempDir(), "node", "dashboard"); r.code == 0 || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("without a node: exit %d, %q; want one line and a failure", r.code, r.stderr)
	}
}

func TestBrowserBase(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:7480": "http://127.0.0.1:7480",
		"https://[::]:7480":     "https://localhost:7480",
		"http://0.0.0.0:9":      "http://localhost:9",
		"https://10.0.0.5:7480": "https://10.0.0.5:7480",
	} {
		if got := browserBase(in); got != want {
			t.Errorf("browserBase(%q) = %q, want %q", in, got, want)
		}
	}
}
