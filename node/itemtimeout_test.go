package node

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
)

// TestItemTimeoutStopsAndRetries: runs that never end are stopped at the
// job's item timeout and fail, with an error naming the timeout; the item
// is retried per --retries and then fails for good. The org's
// policy.default_item_timeout does the same for a job that sets none.
func TestItemTimeoutStopsAndRetries(t *testing.T) {
	m := newMesh(t, meshConfig{n: 1, interval: 200 * time.Millisecond, slots: 1, runFor: time.Hour})
	m.formOrg()
	n := m.nodes[0].Node
	check := func(id string, timeout time.Duration) {
		t.Helper()
		eventually(t, 60*time.Second, "job "+id+" failed", func() string {
			if ji := jobState(t, n, id); ji.State != ledger.JobFailed {
				return fmt.Sprintf("%s, items %+v", ji.State, ji.Items)
			}
			return ""
		})
		ji := jobState(t, n, id)
		if ji.ItemTimeoutMS != timeout.Milliseconds() {
			t.Errorf("job show's item_timeout_ms %d, want %d", ji.ItemTimeoutMS, timeout.Milliseconds())
		}
		if want := "item timeout of " + timeout.String(); !strings.Contains(ji.Error, want) {
			t.Errorf("job error %q does not name the timeout (%q)", ji.Error, want)
		}
		items, err := jobItemsAny(n, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(items) != 1 || items[0].Attempts != 2 || len(items[0].Runs) != 2 {
			t.Fatalf("items %+v: want one item run twice (retries 1)", items)
		}
		for _, r := range items[0].Runs {
			if !r.TimedOut || r.ExitCode == 0 || !r.Counted {
				t.Errorf("run %+v: want a counted failure, timed out", r)
			}
		}
		for _, r := range m.runs.all() {
			if r.Job == id && !r.Stopped {
				t.Errorf("run of item %d was not stopped: %+v", r.Item, r)
			}
		}
	}
	j := submit(t, n, api.JobSubmit{Name: "stuck", Cmd: []string{"sleep", "inf"}, ItemTimeoutMS: 1000, Retries: 1, Driver: "exec"})
	check(j.ID, time.Second)

	if _, err := n.orgs.SetSettings(ctxT(t), api.SettingsRequest{Set: map[string]string{"policy.default_item_timeout": "1500ms"}}); err != nil {
		t.Fatal(err)
	}
	j = submit(t, n, api.JobSubmit{Name: "stuck-too", Cmd: []string{"sleep", "inf"}, Retries: 1, Driver: "exec"})
	check(j.ID, 1500*time.Millisecond)
	if _, err := n.orgs.SetSettings(ctxT(t), api.SettingsRequest{Set: map[string]string{"policy.default_item_timeout": "1ms"}}); err == nil || !strings.Contains(err.Error(), "policy.default_item_timeout") {
		t.Errorf("a default item timeout of 1ms: %v, want an error naming the setting", err)
	}
}
