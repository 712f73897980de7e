package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/cshare/cshare/node/api"
)

// OrgUsage makes the fake node an api.UsageService: one person and one
// machine, and the window it was asked for as its since and until.
func (f *fakeNode) OrgUsage(_ context.Context, since, until int64) (api.OrgUsage, error) {
	x := api.UsageTotals{CPUSeconds: 7200, GPUSeconds: 3600, MemoryMiBSeconds: 1024, ItemsDone: 3, ItemsFailed: 1, Jobs: 2,
		DatasetBytes: 1 << 20, DatasetByteSeconds: 1 << 30, ContractSpendUSD: 0.5}
	return api.OrgUsage{Since: fmt.Sprint(since), Until: fmt.Sprint(until),
		Persons:  []api.PersonUsage{{ID: ownerID, Name: "alice\x1b[31m", UsageTotals: x}},
		Machines: []api.MachineUsage{{ID: m1ID, Name: "m1", CPUSeconds: 7200, GPUSeconds: 3600}}, Totals: x}, f.call("usage")
}

// TestOrgUsageCLI: org usage passes its window in unix ms, prints one JSON
// value with the keys, a table with names escaped, and refuses a
// window that is not one in a line.
func TestOrgUsageCLI(t *testing.T) {
	n := startNode(t)
	r := n.run("org", "usage", "--since", "2026-01-01", "--until", "2026-01-02T00:00:00Z", "--json")
	if r.code != 0 {
		t.Fatalf("org usage --json: %+v", r)
	}
	var u map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &u); err != nil {
		t.Fatalf("not one JSON value: %v\n%s", err, r.stdout)
	}
	if u["since"] != "1767225600000" || u["until"] != "1767312000000" {
		t.Fatalf("window %v..%v", u["since"], u["until"])
	}
	p := u["persons"].([]any)[0].(map[string]any)
	for _, k := range []string{"id", "name", "cpu_seconds", "gpu_seconds", "memory_mib_seconds", "items_done", "items_failed", "jobs",
		"dataset_bytes", "contract_spend_usd", "contract_earned_usd"} {
		if _, ok := p[k]; !ok {
			t.Errorf("persons[0] has no %q: %v", k, p)
		}
	}
	for _, k := range []string{"id", "name", "cpu_seconds", "gpu_seconds"} {
		if _, ok := u["machines"].([]any)[0].(map[string]any)[k]; !ok {
			t.Errorf("machines[0] has no %q", k)
		}
	}
	r = n.run("org", "usage")
	if r.code != 0 || !strings.Contains(r.stdout, "2h0m0s") || strings.Contains(r.stdout, "\x1b") || !strings.Contains(r.stdout, "total") {
		t.Fatalf("org usage: %+v", r)
	}
	for _, bad := range [][]string{{"--since", "yesterday"}, {"--since", "2026-02-01", "--until", "2026-01-01"}, {"extra"}} {
		r := n.run(append([]string{"org", "usage"}, bad...)...)
		if r.code != 2 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("org usage %q: exit %d, stderr %q; want 2 and one line", bad, r.code, r.stderr)
		}
	}
}
