//go:build e2e

package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type policiesShown struct {
	Policies map[string]int64 `json:"policies"`
	Totals   struct {
		Machines   int64   `json:"machines"`
		ActiveJobs int64   `json:"active_jobs"`
		CPUSeconds float64 `json:"cpu_seconds"`
	} `json:"totals"`
}

type jobReason struct {
	ID     string `json:"id"`
	State  string `json:"state"`
	Reason string `json:"reason"`
	Error  string `json:"error"`
}

func (p *proc) jobState(id string) jobReason {
	p.t.Helper()
	var j jobReason
	p.json(&j, "job", "show", id)
	return j
}

// TestPoliciesThroughTheCLI: the org's policies (issue 30), set by the
// owner with org set and listed by org show, hold on every node, through
// the CLI of separate node processes: mo's second machine cannot join
// while max_machines_per_user is 1 (node join says so in one line), and
// can once it is lifted; a job asking more memory than max_job_memory is
// refused in one line; with max_concurrent_jobs_per_user 1, mo's later
// jobs wait queued, naming the policy, and the higher priority one starts
// first when the running one ends; a job still running max_job_runtime
// after its start fails, naming the policy. Then org usage prints the
// same JSON on every node for the same window.
func TestPoliciesThroughTheCLI(t *testing.T) {
	began := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	conf := execConf(t, 2)
	owner := startNode(t, "owner", "--config", conf)
	mo1 := startNode(t, "mo1", "--config", conf)
	mo2 := startNode(t, "mo2", "--config", conf)
	key := lastLine(owner.must("org", "create", "--name", "policies", "--user-name", "olive"))

	owner.must("org", "set", "policy.max_machines_per_user=1", "policy.max_job_memory=64m",
		"policy.max_concurrent_jobs_per_user=1", "policy.default_item_timeout=10m")
	var shown policiesShown
	owner.json(&shown, "org", "show")
	want := map[string]int64{"max_machines_per_user": 1, "max_job_memory": 64, "max_concurrent_jobs_per_user": 1, "default_item_timeout": 600}
	if fmt.Sprint(shown.Policies) != fmt.Sprint(want) {
		t.Fatalf("org show --json policies %v, want %v", shown.Policies, want)
	}
	owner.oneLineErr("policy.max_job_runtime", "org", "set", "policy.max_job_runtime=soon")
	owner.oneLineErr("policy.max_jobs", "org", "set", "policy.max_jobs=3")

	// mo is one person on two machines.
	mo1.must("user", "init", "--name", "mo")
	export := filepath.Join(t.TempDir(), "mo.person")
	mo1.must("user", "export", "--out", export)
	mo2.must("user", "import", export)
	mo1.must("node", "join", "--org-key", key)
	owner.must("machine", "approve", machineID(t, mo1))
	mo2.oneLineErr("policy.max_machines_per_user", "node", "join", "--org-key", key)
	eventually(t, 30*time.Second, "mo1 approved, a member, on its own node", func() bool {
		var st status
		mo1.json(&st, "node", "status")
		return st.Role == "member"
	})
	mo1.oneLineErr("only the owner and admins", "org", "set", "policy.max_machines_per_user=5")

	// max_job_memory: refused before anything is written.
	mo1.oneLineErr("policy.max_job_memory", "job", "submit", "--driver", "exec", "--memory", "128m", "--", "true")

	// max_concurrent_jobs_per_user: a runs; b (priority 9) and c
	// (priority 2) wait; c starts before b when a ends.
	submit := func(prio string, cmd ...string) string {
		return lastLine(mo1.must(append([]string{"job", "submit", "--driver", "exec", "--priority", prio, "--"}, cmd...)...))
	}
	a := submit("5", "sleep", "3")
	b := submit("9", "true")
	c := submit("2", "sleep", "2")
	for _, p := range []*proc{owner, mo1} {
		eventually(t, 30*time.Second, "b and c queued by the policy on every node", func() bool {
			for _, id := range []string{b, c} {
				if j := p.jobState(id); j.State != "queued" || !strings.Contains(j.Reason, "policy.max_concurrent_jobs_per_user") {
					return false
				}
			}
			return true
		})
	}
	if j := mo1.jobState(b); !strings.Contains(j.Reason, "AssocMaxJobsLimit") {
		t.Fatalf("b's reason %q does not name AssocMaxJobsLimit", j.Reason)
	}
	sawC := false
	var last string
	defer func() {
		if t.Failed() {
			t.Logf("last states: %s", last)
		}
	}()
	eventually(t, 60*time.Second, "a, then c, then b done", func() bool {
		ja, jb, jc := mo1.jobState(a), mo1.jobState(b), mo1.jobState(c)
		last = fmt.Sprintf("a %+v\nb %+v\nc %+v", ja, jb, jc)
		if jc.State == "running" || (jc.State == "done" && !sawC) {
			sawC = true
			if jb.State != "queued" && jb.State != "done" {
				t.Fatalf("b is %s while c runs: the queue is not in priority order", jb.State)
			}
			if jb.State == "done" && jc.State == "running" {
				t.Fatalf("b done before c")
			}
		}
		if jb.State != "queued" && ja.State != "done" {
			t.Fatalf("b is %s while a is %s", jb.State, ja.State)
		}
		return ja.State == "done" && jb.State == "done" && jc.State == "done"
	})

	// max_job_runtime: a job still running 3 s after its start fails,
	// naming the policy, long before its own minute is up.
	owner.must("org", "set", "policy.max_job_runtime=3s", "policy.max_concurrent_jobs_per_user=none")
	shown = policiesShown{}
	owner.json(&shown, "org", "show")
	if shown.Policies["max_job_runtime"] != 3 || shown.Policies["max_concurrent_jobs_per_user"] != 0 {
		t.Fatalf("policies after the change: %v", shown.Policies)
	}
	d := submit("5", "sleep", "60")
	started := time.Now()
	eventually(t, 30*time.Second, "the long job failed by max_job_runtime", func() bool {
		j := mo1.jobState(d)
		return j.State == "failed" && strings.Contains(j.Reason, "policy.max_job_runtime") && strings.Contains(j.Error, "policy.max_job_runtime")
	})
	t.Logf("the 60 s job failed by the 3 s policy %s after submit", time.Since(started).Round(time.Millisecond))
	eventually(t, 20*time.Second, "the owner's node shows it failed too", func() bool { return owner.jobState(d).State == "failed" })

	// Lifted: mo's second machine joins.
	owner.must("org", "set", "policy.max_machines_per_user=none")
	eventually(t, 20*time.Second, "mo2 joins once the policy is lifted", func() bool {
		_, _, code := mo2.cli("node", "join", "--org-key", key)
		return code == 0
	})
	owner.must("machine", "approve", machineID(t, mo2))
	ps := []*proc{owner, mo1, mo2}
	converged(t, ps)

	// org usage: the same bytes on every node for the same window.
	until := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	var first string
	for _, p := range ps {
		out := p.must("org", "usage", "--since", began, "--until", until, "--json")
		if first == "" {
			first = out
		} else if out != first {
			t.Fatalf("org usage differs between nodes:\n%s\n---\n%s", first, out)
		}
	}
	if !strings.Contains(first, `"items_done": 3`) || !strings.Contains(first, `"jobs": 4`) {
		t.Fatalf("org usage: want mo's 3 items done of 4 jobs:\n%s", first)
	}
	shown = policiesShown{}
	owner.json(&shown, "org", "show")
	if shown.Totals.Machines != 3 || shown.Totals.ActiveJobs != 0 || shown.Totals.CPUSeconds < 4 {
		t.Fatalf("org show totals %+v: want 3 machines, no active job, the CPU-seconds of the runs", shown.Totals)
	}
}
