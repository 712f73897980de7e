package node

import (
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
)

// /metrics passes promtool check metrics (Prometheus's linter: names,
// help, types, counters ending in _total), with the org's usage and the
// notify counters in it. make test installs promtool (scripts/promtool.sh).
func TestMetricsPassPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed (apt-get install prometheus; make test installs it): /metrics is not linted")
	}
	m := newMesh(t, meshConfig{n: 1, interval: 250 * time.Millisecond, slots: 2, runFor: 10 * time.Millisecond,
		conf: "notify:\n  - webhook: http://127.0.0.1:1/hook\n    events: [job.failed]\n"})
	m.formOrg()
	n := m.nodes[0].Node
	js, err := n.jobs.SubmitJob(ctxT(t), api.JobSubmit{Cmd: []string{"true"}, RangeStart: ptr[int64](1), RangeEnd: ptr[int64](3)})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the job done", func() string {
		if st := ledgerJobState(n, js.ID); st != ledger.JobDone {
			return "job " + st
		}
		return ""
	})
	req, _ := http.NewRequest(http.MethodGet, "http://"+n.APIAddr()+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+n.Token())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"cshare_usage_cpu_seconds_total", "cshare_notify_dropped_total", "cshare_ledger_entries"} {
		if !strings.Contains(string(body), want) {
			t.Fatalf("/metrics lacks %s", want)
		}
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(string(body))
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}
