//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Issue 30: machine limits that hold and stuck items, through the CLI.

// writeConf writes a node.yaml with the given body and returns its path.
func writeConf(t *testing.T, body string) string {
	t.Helper()
	conf := filepath.Join(t.TempDir(), "node.yaml")
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return conf
}

// TestItemTimeoutThroughTheCLI: `job submit --item-timeout 2s --retries 1`
// of a command that never ends: each run is stopped at 2s and fails with
// an error naming the timeout, the item runs twice and fails for good,
// and its processes are gone. The org's policy.default_item_timeout does
// the same for a job that sets none; bad values are refused in one line
// naming the flag or setting.
func TestItemTimeoutThroughTheCLI(t *testing.T) {
	p := startNode(t, "timeout", "--config", execConf(t, 2))
	p.must("org", "create", "--name", "e2e")
	marker := "cshare-e2e-stuck-" + fmt.Sprint(time.Now().UnixNano())
	check := func(id string, wantMS int64) {
		t.Helper()
		var j struct {
			job
			ItemTimeoutMS int64 `json:"item_timeout_ms"`
		}
		eventually(t, 60*time.Second, "job "+id+" failed", func() bool {
			p.json(&j, "job", "show", id)
			return j.State == "failed"
		})
		if j.ItemTimeoutMS != wantMS {
			t.Errorf("job show: item_timeout_ms %d, want %d", j.ItemTimeoutMS, wantMS)
		}
		want := "item timeout of " + (time.Duration(wantMS) * time.Millisecond).String()
		if !strings.Contains(j.Error, want) {
			t.Errorf("job error %q does not name the timeout (%q)", j.Error, want)
		}
		var items []struct {
			item
			Runs []struct {
				ExitCode int64 `json:"exit_code"`
				TimedOut bool  `json:"timed_out"`
			} `json:"runs"`
		}
		p.json(&items, "job", "items", id)
		if len(items) != 1 || items[0].Status != "failed" || items[0].Attempts != 2 || len(items[0].Runs) != 2 {
			t.Fatalf("job items: %+v; want one failed item run twice", items)
		}
		for _, r := range items[0].Runs {
			if !r.TimedOut || r.ExitCode == 0 {
				t.Errorf("run %+v: want a failure, timed_out", r)
			}
		}
		eventually(t, 20*time.Second, "the stuck processes gone", func() bool {
			return exec.Command("pgrep", "-f", marker).Run() != nil
		})
	}
	id := lastLine(p.must("job", "submit", "--driver", "exec", "--item-timeout", "2s", "--retries", "1", "--", "sh", "-c", "sleep 600; : "+marker))
	check(id, 2000)

	p.must("org", "set", "policy.default_item_timeout=3s")
	var o struct {
		Policies struct {
			DefaultItemTimeout int64 `json:"default_item_timeout"` // seconds
		} `json:"policies"`
	}
	p.json(&o, "org", "show")
	if o.Policies.DefaultItemTimeout != 3 {
		t.Errorf("org show: policies.default_item_timeout %d, want 3 (seconds)", o.Policies.DefaultItemTimeout)
	}
	id = lastLine(p.must("job", "submit", "--driver", "exec", "--retries", "1", "--", "sh", "-c", "sleep 600; : "+marker))
	check(id, 3000)

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"job", "submit", "--driver", "exec", "--item-timeout", "10", "--", "true"}, `--item-timeout: "10" is not a duration`},
		{[]string{"job", "submit", "--driver", "exec", "--item-timeout", "100ms", "--", "true"}, "--item-timeout: 100ms is below the minimum 1s"},
		{[]string{"org", "set", "policy.default_item_timeout=soon"}, "policy.default_item_timeout"},
	} {
		_, errs, code := p.cli(c.args...)
		if code == 0 || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") > 0 && !strings.HasPrefix(errs, "Error") {
			t.Errorf("cshare %s: exit %d, stderr %q; want an error with %q", strings.Join(c.args, " "), code, errs, c.want)
		}
	}
}

// TestDefaultCapsInDocker: on a machine with memory_limit 1024 and
// max_concurrent_jobs 4, a job that asks for neither cores nor memory runs
// in containers capped at its share: HostConfig.Memory above 0 and at most
// 256 MiB, NanoCpus above 0, and the caps of all four at most the limits.
func TestDefaultCapsInDocker(t *testing.T) {
	dockerAvailable(t)
	p := startNode(t, "caps", "--config", writeConf(t, "resources: {memory_limit: 1024, max_concurrent_jobs: 4}\ndiscovery: {mdns: false}\n"))
	p.must("org", "create", "--name", "e2e")
	id := lastLine(p.must("job", "submit", "--range", "1-40", "--cpus", "4", "--", "sleep", "60"))
	t.Cleanup(func() {
		p.cli("job", "cancel", id)
		// The node stops right after: remove what it had no time to.
		if out, err := exec.Command("docker", "ps", "-aq", "--filter", "label=cshare.job="+id).Output(); err == nil && len(strings.Fields(string(out))) > 0 {
			_ = exec.Command("docker", append([]string{"rm", "-f"}, strings.Fields(string(out))...)...).Run()
		}
	})
	var ids []string
	// Created is enough: the caps are the container's HostConfig, set at
	// creation (starting four containers takes long on a loaded host).
	eventually(t, 3*time.Minute, "four containers of the job", func() bool {
		out, err := exec.Command("docker", "ps", "-a", "-q", "--no-trunc", "--filter", "label=cshare.job="+id).Output()
		if err != nil {
			t.Fatal(err)
		}
		ids = strings.Fields(string(out))
		return len(ids) == 4
	})
	out, err := exec.Command("docker", append([]string{"inspect"}, ids...)...).Output()
	if err != nil {
		t.Fatal(err)
	}
	var cs []struct {
		HostConfig struct {
			Memory   int64
			NanoCpus int64
		}
	}
	if err := json.Unmarshal(out, &cs); err != nil {
		t.Fatal(err)
	}
	var nproc int64
	if b, err := exec.Command("nproc").Output(); err == nil {
		fmt.Sscan(string(b), &nproc)
	}
	var mem, cpu int64
	for i, c := range cs {
		hc := c.HostConfig
		if hc.Memory <= 0 || hc.Memory > 256<<20 {
			t.Errorf("container %d: HostConfig.Memory %d, want > 0 and <= 256 MiB", i, hc.Memory)
		}
		if hc.NanoCpus <= 0 {
			t.Errorf("container %d: HostConfig.NanoCpus %d, want > 0", i, hc.NanoCpus)
		}
		mem += hc.Memory
		cpu += hc.NanoCpus
	}
	if mem > 1024<<20 {
		t.Errorf("the containers' memory caps add up to %d, above the memory_limit 1024 MiB", mem)
	}
	if nproc > 0 && cpu > nproc*1e9 {
		t.Errorf("the containers' CPU caps add up to %d nano-CPUs, above the machine's %d CPUs", cpu, nproc)
	}
	t.Logf("4 containers: Memory %d each (sum %d), NanoCpus %d each", cs[0].HostConfig.Memory, mem, cs[0].HostConfig.NanoCpus)
}
