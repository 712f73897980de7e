package cli

import (
	"strings"
	"testing"
)

func TestOfferCLI(t *testing.T) {
	n := startNode(t)
	if r := n.run("offer", "create", "--price", "1.5", "--for", "3d", "--memory", "8g"); r.code != 0 || r.lastLine() != "0123456789abcdef" {
		t.Fatalf("offer create: %+v", r)
	}
	if r := n.run("offer", "ls", "gpus>=2", "gpu_name", "in", "[RTX_4090,H100_SXM]", "-o", "price,gpus-", "--json"); r.code != 0 || strings.TrimSpace(r.stdout) != "[]" {
		t.Fatalf("offer ls --json: %+v", r)
	}
	n.mu.Lock()
	calls := strings.Join(n.calls, "; ")
	n.mu.Unlock()
	if !strings.Contains(calls, "offer create 1.5") || !strings.Contains(calls, "offer ls gpus>=2 gpu_name in [RTX_4090,H100_SXM] -o price,gpus-") {
		t.Fatalf("calls: %s", calls)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"offer", "create"}, "--price is required"},
		{[]string{"offer", "create", "--price", "1", "--for", "2x"}, "--for"},
		{[]string{"offer", "create", "--price", "1", "--until", "2026-12-01", "--for", "1h"}, "give one"},
		{[]string{"offer", "ls", "gpus>=two"}, `offer query: "gpus>=two": gpus takes a number`},
		{[]string{"offer", "ls", "-o", "colour"}, "unknown sort field"},
		{[]string{"offer", "rm", "nope"}, "no offer nope"},
	} {
		r := n.run(tc.args...)
		if r.code == 0 || !strings.Contains(r.stderr, tc.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") > 1 {
			t.Errorf("%v: code %d, stderr %q; want an error with %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
}
