package cli

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cshare/cshare/node/api"
)

// oneErrorLine checks that r failed with code and exactly one stderr line
// that contains every want.
func oneErrorLine(t *testing.T, r result, code int, want ...string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit code %d, want %d (stderr %q)", r.code, code, r.stderr)
	}
	if strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "cshare: ") {
		t.Errorf("stderr is not one \"cshare: ...\" line: %q", r.stderr)
	}
	for _, w := range want {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr %q does not contain %q", r.stderr, w)
		}
	}
}

// colOf is the display column where the first occurrence of s starts.
func colOf(line, s string) int {
	i := strings.Index(line, s)
	if i < 0 {
		return -1
	}
	return displayWidth(line[:i])
}

func TestMachineLsTable(t *testing.T) {
	n := startNode(t)
	r := n.run("machine", "ls")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("want header + 4 rows, got:\n%s", r.stdout)
	}
	for _, h := range []string{"ID", "NAME", "STATUS", "LAST HEARTBEAT", "RUNNING", "TOTAL JOBS", "CPUS", "MEM", "GPUS", "OWNER"} {
		if !strings.Contains(lines[0], h) {
			t.Errorf("header %q lacks %q", lines[0], h)
		}
	}
	for _, want := range []string{"🟢 available", "🟡 busy", "⚫ offline", "pending", short(m1ID), "12s ago", "3m ago", "2d ago", "never", "64 GiB", "office-gpu-1"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, m1ID) {
		t.Errorf("table shows full IDs:\n%s", r.stdout)
	}
	// Columns line up by display width, emoji or not.
	wantCol := colOf(lines[0], "LAST HEARTBEAT")
	for i, l := range lines[1:] {
		if got := colOf(l, []string{"12s ago", "3m ago", "never", "2d ago"}[i]); got != wantCol {
			t.Errorf("row %d: LAST HEARTBEAT at column %d, header at %d:\n%s", i, got, wantCol, r.stdout)
		}
	}
}

func TestTables(t *testing.T) {
	n := startNode(t)
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"job", "ls"}, []string{"ID", "STATE", "PRIORITY", "INSTANCES", "ITEMS", "FAILED", "SUBMITTER", "AGE",
			short(jobID), "running", "2/2+1", "40/100", "5m", "3d", "0/0+0", "0/1"}},
		{[]string{"job", "show", jobID}, []string{"state:", "running", "reason:", "preempted by a higher priority job",
			`sh -c "echo $CSHARE_ITEM"`, "40/100 done, 1 failed", "per instance:", "0.5 cores, 512 MiB memory, 1 gpus", "MACHINE", "SLOT", "KIND", "secondary", "render-2",
			"reached through a relay (no direct connection yet; their items' output comes through it, slower): render-2 (" + short(m2ID) + ")"}},
		{[]string{"job", "show", jobID, "--explain"}, []string{"instances:", "3 planned of 4 it could use; 59 items left", "MACHINE", "STATUS", "WHY",
			short(m2ID), "offline", "offline: no heartbeat from it within 3 intervals", "pending", "not_approved: it waits for an admin to approve it"}},
		{[]string{"job", "items", jobID}, []string{"ITEM", "STATUS", "ATTEMPTS", "CODE", "DURATION", "1.5s", "2 KiB", "failed"}},
		{[]string{"member", "ls"}, []string{"ID", "NAME", "ROLE", "MACHINES", "JOINED", "owner", "admin", "alice", short(ownerID),
			short(m1ID) + "," + short(m2ID) + ",", short(m3ID), "2d ago"}},
		{[]string{"node", "status"}, []string{"id:", m1ID, "person:", "alice (" + ownerID + ")", "acme (bafyorg)", "peers:", "2 of 2 peers agree"}},
		{[]string{"org", "show"}, []string{"state hash:", "abc123", "smartshare.preempt_policy:", "aggressive", "require_machine_approval:", "true"}},
		{[]string{"machine", "show", m1ID}, []string{"max_concurrent_jobs:", "16", "A100", "GPU-1", "40 GiB", "memory_limit:", "64 GiB", "disk_limit:", "1 TiB",
			"free:", "1.5 cores, 1.5 GiB memory, 4 GiB disk, 1 gpus, 3 slots"}},
		{[]string{"version"}, []string{"cshare ", agentVersion}},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			r := n.run(c.args...)
			if r.code != 0 || r.stderr != "" {
				t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("output lacks %q:\n%s", w, r.stdout)
				}
			}
		})
	}
}

// TestJSONIsOneValue: every --json prints exactly one JSON value with the
// full IDs, and nothing else.
func TestJSONIsOneValue(t *testing.T) {
	n := startNode(t)
	cases := []struct {
		args []string
		into any
	}{
		{[]string{"machine", "ls"}, &[]api.MachineInfo{}},
		{[]string{"machine", "show", m1ID}, &api.MachineInfo{}},
		{[]string{"member", "ls"}, &[]api.MemberInfo{}},
		{[]string{"job", "ls"}, &[]api.JobInfo{}},
		{[]string{"job", "show", jobID}, &api.JobInfo{}},
		{[]string{"job", "show", jobID, "--explain"}, &api.JobExplain{}},
		{[]string{"job", "items", jobID}, &[]api.ItemInfo{}},
		{[]string{"node", "status"}, &api.NodeStatus{}},
		{[]string{"org", "show"}, &api.OrgInfo{}},
		{[]string{"org", "create", "--name", "acme"}, &api.KeyResult{}},
		{[]string{"org", "key"}, &api.KeyResult{}},
		{[]string{"org", "invite"}, &api.KeyResult{}},
		{[]string{"node", "join", "--org-key", orgKey}, &api.JoinResult{}},
		{[]string{"job", "submit", "--json", "--", "true"}, &api.JobInfo{}},
		{[]string{"version"}, &versionInfo{}},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			args := c.args
			if !slices.Contains(args, "--json") {
				args = append(args, "--json")
			}
			r := n.run(args...)
			if r.code != 0 || r.stderr != "" {
				t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
			}
			dec := json.NewDecoder(strings.NewReader(r.stdout))
			dec.DisallowUnknownFields()
			if err := dec.Decode(c.into); err != nil {
				t.Fatalf("not JSON of %T: %v\n%s", c.into, err, r.stdout)
			}
			if _, err := dec.Token(); !errors.Is(err, io.EOF) {
				t.Fatalf("more than one JSON value:\n%s", r.stdout)
			}
		})
	}
	r := n.run("machine", "ls", "--json")
	if !strings.Contains(r.stdout, `"id": "`+m1ID+`"`) {
		t.Errorf("machine ls --json lacks the full ID:\n%s", r.stdout)
	}
}

func TestEmptyListIsArray(t *testing.T) {
	n := startNode(t)
	n.jobs = nil
	r := n.run("job", "ls", "--json")
	if strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("empty job ls --json = %q, want []", r.stdout)
	}
	if r = n.run("job", "ls"); r.code != 0 || !strings.HasPrefix(r.stdout, "ID") {
		t.Errorf("empty job ls: %+v", r)
	}
}

func TestLastLineContracts(t *testing.T) {
	n := startNode(t)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"org", "create", "--name", "acme", "--description", "render farm"}, orgKey},
		{[]string{"org", "key"}, orgKey},
		{[]string{"org", "key", "--rotate"}, orgKey + "-rotated"},
		{[]string{"org", "invite", "--role", "admin", "--uses", "3"}, invite},
		{[]string{"job", "submit", "--range", "1-100", "--", "sleep", "60"}, jobID},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			r := n.run(c.args...)
			if r.code != 0 || r.stderr != "" {
				t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
			}
			if got := r.lastLine(); got != c.want {
				t.Errorf("last line %q, want %q; stdout:\n%s", got, c.want, r.stdout)
			}
		})
	}
	if !slices.Contains(n.called(), "create:acme:render farm") {
		t.Errorf("org create did not send name and description: %v", n.called())
	}
	if r := n.run("org", "key"); r.stdout != orgKey+"\n" {
		t.Errorf("org key prints %q, want the key alone", r.stdout)
	}
}

func TestSubmitRequest(t *testing.T) {
	p := func(v int64) *int64 { return &v }
	cases := []struct {
		name string
		args []string
		want api.JobSubmit
	}{
		{"defaults", []string{"--", "echo", "hi"},
			api.JobSubmit{Driver: "docker", Cmd: []string{"echo", "hi"}, RangeStart: p(1), RangeEnd: p(1), Priority: 9999, CPUs: 1}},
		{"seed example", []string{"--priority", "5", "--cpus", "10", "--max-cpus", "50", "--range", "1-100", "--image", "busybox", "--", "sleep", "60"},
			api.JobSubmit{Image: "busybox", Driver: "docker", Cmd: []string{"sleep", "60"}, RangeStart: p(1), RangeEnd: p(100), Priority: 5, CPUs: 10, MaxCPUs: p(50)}},
		{"everything", []string{"--driver", "exec", "--cores", "0.5", "--memory", "64MiB", "--gpus", "1", "--retries", "2", "--name", "r",
			"--env", "A=1", "--env", "B=x=y", "--max-cpus", "*", "--", "sh", "-c", "exit 0"},
			api.JobSubmit{Name: "r", Driver: "exec", Cmd: []string{"sh", "-c", "exit 0"}, Env: map[string]string{"A": "1", "B": "x=y"},
				CoresMilli: 500, MemoryMB: 64, GPUs: 1, RangeStart: p(1), RangeEnd: p(1), Priority: 9999, CPUs: 1, MaxCPUs: p(-1), Retries: 2}},
		{"max-cpus -1", []string{"--max-cpus", "-1", "--", "true"},
			api.JobSubmit{Driver: "docker", Cmd: []string{"true"}, RangeStart: p(1), RangeEnd: p(1), Priority: 9999, CPUs: 1, MaxCPUs: p(-1)}},
		{"max-cpus 0", []string{"--max-cpus=0", "--", "true"},
			api.JobSubmit{Driver: "docker", Cmd: []string{"true"}, RangeStart: p(1), RangeEnd: p(1), Priority: 9999, CPUs: 1, MaxCPUs: p(0)}},
		{"command without --", []string{"--range", "7", "sleep", "1"},
			api.JobSubmit{Driver: "docker", Cmd: []string{"sleep", "1"}, RangeStart: p(7), RangeEnd: p(7), Priority: 9999, CPUs: 1}},
		{"alias --instances", []string{"--instances", "3", "--max-instances", "*", "--", "true"},
			api.JobSubmit{Driver: "docker", Cmd: []string{"true"}, RangeStart: p(1), RangeEnd: p(1), Priority: 9999, CPUs: 3, MaxCPUs: p(-1)}},
		{"alias agrees", []string{"--cpus", "3", "--instances", "3", "--max-cpus", "8", "--max-instances", "8", "--", "true"},
			api.JobSubmit{Driver: "docker", Cmd: []string{"true"}, RangeStart: p(1), RangeEnd: p(1), Priority: 9999, CPUs: 3, MaxCPUs: p(8)}},
		{"memory 64m", []string{"--memory", "64m", "--", "true"},
			api.JobSubmit{Driver: "docker", Cmd: []string{"true"}, RangeStart: p(1), RangeEnd: p(1), Priority: 9999, CPUs: 1, MemoryMB: 64}},
		{"memory 4MB", []string{"--memory", "4MB", "--", "true"},
			api.JobSubmit{Driver: "docker", Cmd: []string{"true"}, RangeStart: p(1), RangeEnd: p(1), Priority: 9999, CPUs: 1, MemoryMB: 4}},
		{"cores 1000", []string{"--cores", "1000", "--range", "0", "--", "true"},
			api.JobSubmit{Driver: "docker", Cmd: []string{"true"}, RangeStart: p(0), RangeEnd: p(0), Priority: 9999, CPUs: 1, CoresMilli: 1000000}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := startNode(t)
			r := n.run(append([]string{"job", "submit"}, c.args...)...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			if n.submit == nil || !reflect.DeepEqual(*n.submit, c.want) {
				t.Errorf("sent %+v\nwant %+v", n.submit, c.want)
			}
		})
	}
}

// TestSubmitValidation: each bad input is refused before the node sees it,
// with one line that names the flag, and exit code 2.
func TestSubmitValidation(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--range", "5-1", "--", "true"}, "--range: 5-1 is empty; the start must not exceed the end"},
		{[]string{"--range", "a-b", "--", "true"}, "--range"},
		{[]string{"--range", "1-", "--", "true"}, "--range"},
		{[]string{"--range", "1-99999999999999999999", "--", "true"}, "--range"},
		{[]string{"--memory", "lots", "--", "true"}, "--memory"},
		{[]string{"--memory", "3m", "--", "true"}, "--memory: 3 MiB is below the minimum 4 MiB"},
		{[]string{"--memory", "1024", "--", "true"}, "--memory"},
		{[]string{"--priority", "0", "--", "true"}, "--priority"},
		{[]string{"--priority", "10000", "--", "true"}, "--priority"},
		{[]string{"--priority", "x", "--", "true"}, "--priority"},
		{[]string{"--cpus", "-1", "--", "true"}, "--cpus"},
		{[]string{"--instances", "-2", "--", "true"}, "--instances: -2 is below the minimum 1"},
		{[]string{"--max-cpus", "-2", "--", "true"}, "--max-cpus"},
		{[]string{"--max-cpus", "lots", "--", "true"}, "--max-cpus"},
		{[]string{"--max-instances", "x", "--", "true"}, "--max-instances"},
		{[]string{"--cpus", "2", "--instances", "3", "--", "true"}, "--cpus 2 and --instances 3 disagree"},
		{[]string{"--max-cpus", "5", "--max-instances", "*", "--", "true"}, "--max-cpus 5 and --max-instances * disagree"},
		{[]string{"--gpus", "-1", "--", "true"}, "--gpus"},
		{[]string{"--retries", "-1", "--", "true"}, "--retries"},
		{[]string{"--cores", "0", "--", "true"}, "--cores"},
		{[]string{"--cores", "many", "--", "true"}, "--cores"},
		{[]string{"--cores", "0.0001", "--", "true"}, "--cores: 0.0001 is below the minimum 0.001; allowed: 0.001 to 4096 cores"},
		{[]string{"--cores", "", "--", "true"}, "--cores"},
		{[]string{"--memory", "17179869184g", "--", "true"}, "--memory: 16 EiB is above the maximum 16 TiB"},
		{[]string{"--priority", "1000000000", "--", "true"}, "--priority: 1000000000 is above the maximum 9999; allowed: 1 (the highest) to 9999"},
		{[]string{"--priority", "1e9", "--", "true"}, "--priority: 1000000000 is above the maximum 9999"},
		{[]string{"--gpus", "1e3", "--", "true"}, "--gpus: 1000 is above the maximum 64"},
		{[]string{"--retries", "lots", "--", "true"}, `--retries: "lots" is not a number`},
		{[]string{"--env", "CSHARE_ITEM=1", "--", "true"}, "--env"},
		{[]string{"--range", "0-1000000", "--", "true"}, "--range"},
		{[]string{"--driver", "podman", "--", "true"}, "--driver"},
		{[]string{"--env", "=x", "--", "true"}, "--env"},
		{[]string{"--range", "1-10"}, "cmd: [] is empty; give the job's command after --"},
		{[]string{"--range", "1-10", "--"}, "cmd: [] is empty"},
		{[]string{"--", ""}, `cmd: "" is not a program`},
		{[]string{"sleep", "--", "60"}, "before --"},
		{[]string{"echo", "-n", "hi"}, "after --"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			n := startNode(t)
			r := n.run(append([]string{"job", "submit"}, c.args...)...)
			oneErrorLine(t, r, 2, c.want, "see cshare job submit --help")
			if r.stdout != "" {
				t.Errorf("stdout %q, want nothing", r.stdout)
			}
			if calls := n.called(); len(calls) != 0 {
				t.Errorf("the node was called: %v", calls)
			}
		})
	}
}

func TestModify(t *testing.T) {
	n := startNode(t)
	r := n.run("job", "modify", jobID, "--max-instances", "*", "--priority", "3")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if m := n.modify; m == nil || m.MaxCPUs == nil || *m.MaxCPUs != -1 || m.Priority == nil || *m.Priority != 3 {
		t.Errorf("sent %+v", n.modify)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{jobID}, "nothing to change"},
		{[]string{jobID, "--priority", "0"}, "--priority"},
		{[]string{jobID, "--max-cpus", "-5"}, "--max-cpus"},
		{[]string{jobID, "--max-cpus", "4", "--max-instances", "5"}, "disagree"},
		{[]string{"--priority", "3"}, "missing ID"},
	} {
		oneErrorLine(t, n.run(append([]string{"job", "modify"}, c.args...)...), 2, c.want)
	}
}

func TestNodeNotRunning(t *testing.T) {
	empty := t.TempDir()
	want := "no node running for data dir " + empty + "; start one with: cshare node run --data-dir " + empty
	for _, args := range [][]string{{"node", "status"}, {"machine", "ls", "--json"}, {"job", "submit", "--", "true"}, {"org", "create", "--name", "x"}} {
		r := runCLI(append([]string{"--data-dir", empty}, args...)...)
		oneErrorLine(t, r, 1, want)
		if r.stdout != "" {
			t.Errorf("%v: stdout %q", args, r.stdout)
		}
	}

	// api.addr names a port where nothing listens (a node that died).
	stale := t.TempDir()
	writeFile(t, filepath.Join(stale, api.AddrFile), closedAddr(t))
	writeFile(t, filepath.Join(stale, api.TokenFile), "tok")
	oneErrorLine(t, runCLI("--data-dir", stale, "node", "status"), 1,
		"cshare: no node running for data dir "+stale+"; start one with: cshare node run --data-dir "+stale)

	// --api names a closed port.
	addr := closedAddr(t)
	oneErrorLine(t, runCLI("--data-dir", stale, "--api", addr, "job", "ls"), 1, "no node answers at "+addr, "cshare node run --data-dir "+stale)
}

func TestDataDirFromEnv(t *testing.T) {
	n := startNode(t)
	t.Setenv(EnvDataDir, n.dataDir)
	if r := runCLI("node", "status", "--json"); r.code != 0 {
		t.Fatalf("with $%s: exit %d: %s", EnvDataDir, r.code, r.stderr)
	}
	// --api overrides api.addr.
	other := t.TempDir()
	writeFile(t, filepath.Join(other, api.AddrFile), closedAddr(t))
	writeFile(t, filepath.Join(other, api.TokenFile), "test-token")
	if r := runCLI("--data-dir", other, "--api", strings.TrimPrefix(n.srv.URL, "http://"), "node", "status"); r.code != 0 {
		t.Fatalf("with --api: exit %d: %s", r.code, r.stderr)
	}
}

func TestNodeErrorsAreOneLine(t *testing.T) {
	n := startNode(t)
	n.fail = api.Errorf(http.StatusForbidden, "not authorised: approving machines needs the admin role\nask an admin")
	oneErrorLine(t, n.run("machine", "approve", m3ID), 1, "not authorised: approving machines needs the admin role; ask an admin")
	n.fail = nil

	bad := t.TempDir()
	writeFile(t, filepath.Join(bad, api.AddrFile), strings.TrimPrefix(n.srv.URL, "http://"))
	writeFile(t, filepath.Join(bad, api.TokenFile), "wrong")
	oneErrorLine(t, runCLI("--data-dir", bad, "job", "ls"), 1, "api.token")
}

func TestUsageErrors(t *testing.T) {
	n := startNode(t)
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"frobnicate"}, []string{`unknown command "frobnicate"`, "see cshare --help"}},
		{[]string{"machine", "approv", m3ID}, []string{`unknown command "approv"`, "did you mean approve", "see cshare machine --help"}},
		{[]string{"machine", "ls", "--bogus"}, []string{"unknown flag: --bogus", "see cshare machine ls --help"}},
		{[]string{"machine", "approve"}, []string{"missing ID", "see cshare machine approve --help"}},
		{[]string{"machine", "show", "a", "b"}, []string{"too many arguments"}},
		{[]string{"job", "ls", "extra"}, []string{`unexpected argument "extra"`}},
		{[]string{"node", "join"}, []string{"--org-key is required"}},
		{[]string{"member", "join"}, []string{"--invite is required"}},
		{[]string{"member", "set-role", ownerID, "king"}, []string{"ROLE"}},
		{[]string{"org", "create"}, []string{"--name is required"}},
		{[]string{"org", "invite", "--role", "owner"}, []string{"--role"}},
		{[]string{"org", "invite", "--expires", "soon"}, []string{"--expires"}},
		{[]string{"org", "invite", "--expires", "-1h"}, []string{"--expires"}},
		{[]string{"org", "invite", "--uses", "-1"}, []string{"--uses"}},
		{[]string{"org", "set"}, []string{"missing KEY=VALUE"}},
		{[]string{"org", "set", "smartshare.mode"}, []string{"not KEY=VALUE"}},
		{[]string{"org", "set", "=x"}, []string{"not a setting name"}},
		{[]string{"org", "set", "Smart Share=x"}, []string{"not a setting name"}},
		{[]string{"org", "set", "name="}, []string{"value is empty"}},
		{[]string{"org", "set", "name=a", "name=b"}, []string{"given twice"}},
		{[]string{"node", "run", "--log-level", "loud"}, []string{"--log-level"}},
		{[]string{"node", "run", "--heartbeat-interval", "0s"}, []string{"--heartbeat-interval"}},
		{[]string{"node", "run", "--listen", "0.0.0.0:4001"}, []string{"--listen"}},
		{[]string{"smartshare", "plan"}, []string{"--input is required"}},
		{[]string{"job", "logs", job2ID + "x", "--item", "x"}, []string{"--item"}},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			r := n.run(c.args...)
			oneErrorLine(t, r, 2, c.want...)
		})
	}
	if calls := n.called(); len(calls) != 0 {
		t.Errorf("usage errors reached the node: %v", calls)
	}
	// Help is not an error.
	for _, args := range [][]string{{}, {"--help"}, {"job"}, {"job", "submit", "--help"}} {
		if r := n.run(args...); r.code != 0 || r.stdout == "" {
			t.Errorf("%v: exit %d, stdout %q", args, r.code, r.stdout)
		}
	}
}

// TestIDResolution: the CLI sends IDs, prefixes and names as given (the
// node resolves them) and prints the node's answer.
func TestIDResolution(t *testing.T) {
	cases := []struct {
		args []string
		call string
		out  string
	}{
		{[]string{"machine", "approve", m3ID}, "approve:" + m3ID, m3ID},
		{[]string{"machine", "approve", short(m3ID)}, "approve:" + short(m3ID), m3ID},
		{[]string{"machine", "approve", "laptop"}, "approve:laptop", m3ID},
		{[]string{"machine", "reject", "12D3KooWMachineThr"}, "reject:12D3KooWMachineThr", m3ID},
		{[]string{"machine", "remove", "bbbb"}, "remove:bbbb", m2ID},
		{[]string{"machine", "show", "render-2"}, "machine:render-2", m2ID},
		{[]string{"member", "set-role", "bob", "admin"}, "role:bob", "member bob (" + personB + ") is now admin"},
		{[]string{"member", "remove", "dddd"}, "remove-member:dddd", "removed member " + personB},
		{[]string{"org", "transfer", "--to", "bob"}, "transfer:bob", "transferred org acme to person bob (" + personB + ")"},
		{[]string{"job", "show", "0001"}, "job:0001", jobID},
		{[]string{"job", "show", "render"}, "job:render", jobID},
		{[]string{"job", "modify", "0002", "--priority", "2"}, "modify:0002", job2ID},
		{[]string{"job", "items", short(jobID)}, "items", "done"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			n := startNode(t)
			r := n.run(c.args...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			if !slices.Contains(n.called(), c.call) {
				t.Errorf("calls %v lack %q", n.called(), c.call)
			}
			if !strings.Contains(r.stdout, c.out) {
				t.Errorf("stdout %q lacks %q", r.stdout, c.out)
			}
			for _, call := range n.called() {
				if call == "machines" || call == "members" || call == "jobs" {
					t.Errorf("the CLI listed candidates itself: %v", n.called())
				}
			}
		})
	}
	n := startNode(t)
	oneErrorLine(t, n.run("machine", "approve", "12D3KooWMachine"), 1, "is ambiguous: it matches 3 machines", m1ID, m2ID, m3ID)
	oneErrorLine(t, n.run("machine", "approve", "nope"), 1, `unknown machine "nope"`)
	oneErrorLine(t, n.run("job", "cancel", "bafyrei"), 1, "matches 2 jobs")
}

func TestOrgSetAndInvite(t *testing.T) {
	n := startNode(t)
	r := n.run("org", "set", "smartshare.mode=none", "smartshare.preempt_policy=passive", "smartshare.default_max_cpus=-1",
		"smartshare.max_cpus_limit=100", "require_machine_approval=false", "name=X", "description=a b=c")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	want := map[string]string{"smartshare.mode": "none", "smartshare.preempt_policy": "passive", "smartshare.default_max_cpus": "-1",
		"smartshare.max_cpus_limit": "100", "require_machine_approval": "false", "name": "X", "description": "a b=c"}
	if n.settings == nil || !reflect.DeepEqual(n.settings.Set, want) {
		t.Errorf("sent %+v", n.settings)
	}

	for _, c := range []struct {
		args []string
		want api.InviteRequest
	}{
		{nil, api.InviteRequest{Role: "member", Expires: "72h0m0s", Uses: 1}},
		{[]string{"--role", "admin", "--expires", "never", "--uses", "0"}, api.InviteRequest{Role: "admin", Expires: "0", Uses: 0}},
		{[]string{"--expires", "0"}, api.InviteRequest{Role: "member", Expires: "0", Uses: 1}},
		{[]string{"--expires", "7d"}, api.InviteRequest{Role: "member", Expires: "168h0m0s", Uses: 1}},
		{[]string{"--expires", "90m"}, api.InviteRequest{Role: "member", Expires: "1h30m0s", Uses: 1}},
	} {
		r := n.run(append([]string{"org", "invite"}, c.args...)...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d: %s", c.args, r.code, r.stderr)
		}
		if *n.invite != c.want {
			t.Errorf("%v: sent %+v, want %+v", c.args, *n.invite, c.want)
		}
	}
}

func TestJoin(t *testing.T) {
	n := startNode(t)
	r := n.run("node", "join", "--org-key", orgKey, "--name", "laptop")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if want := "joined org acme (bafyorg) as " + m3ID + ": pending approval by an admin"; !strings.HasPrefix(r.stdout, want) {
		t.Errorf("got %q, want prefix %q", r.stdout, want)
	}
	if !reflect.DeepEqual(*n.join, api.JoinRequest{OrgKey: orgKey, Name: "laptop"}) {
		t.Errorf("sent %+v", *n.join)
	}
	r = n.run("member", "join", "--invite", invite)
	if want := "joined org acme (bafyorg) as " + m3ID + ": approved, role admin\n"; r.stdout != want {
		t.Errorf("got %q, want %q", r.stdout, want)
	}
	if !reflect.DeepEqual(*n.join, api.JoinRequest{OrgKey: invite}) {
		t.Errorf("sent %+v", *n.join)
	}
	boot := "/dns4/relay.example.com/tcp/4001/p2p/12D3KooWGRUVh7fV7F5UqiEZZDYpkPTXQmjWfEmSxUGLhLhqQ7Jx"
	if r = n.run("node", "join", "--org-key", orgKey, "--bootstrap", boot); r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if !reflect.DeepEqual(*n.join, api.JoinRequest{OrgKey: orgKey, Bootstrap: []string{boot}}) {
		t.Errorf("sent %+v", *n.join)
	}
	r = n.run("node", "join", "--org-key", orgKey, "--bootstrap", "/dns4/relay.example.com/tcp/4001")
	if r.code != 2 || !strings.Contains(r.stderr, "--bootstrap: ") || !strings.Contains(r.stderr, "/p2p/<machine ID>") {
		t.Errorf("a --bootstrap without /p2p/: exit %d: %s", r.code, r.stderr)
	}
}

func TestMemberLeaveAndCancel(t *testing.T) {
	n := startNode(t)
	if r := n.run("member", "leave"); r.code != 0 || r.stdout != "left org acme (bafyorg); this node is in no org now; its data on this machine is kept in /data/orgs/bafyorg\n" {
		t.Errorf("leave: %+v", r)
	}
	if r := n.run("job", "cancel", jobID); r.code != 0 || !strings.Contains(r.stdout, "cancelled") {
		t.Errorf("cancel: %+v", r)
	}
}

func TestJobLogs(t *testing.T) {
	n := startNode(t)
	r := n.run("job", "logs", jobID, "--item", "42")
	if r.code != 0 || r.stdout != "raw output of item 42\nline two\n" {
		t.Errorf("logs: %+v", r)
	}
	// A one-item job needs no --item.
	if r = n.run("job", "logs", job2ID); r.code != 0 || r.stdout != "raw output of item 1\nline two\n" {
		t.Errorf("logs of a one-item job: %+v", r)
	}
	// The count is the job's (job show's items total): logs reads two items, not all.
	oneErrorLine(t, n.run("job", "logs", jobID), 2, "--item is required: the job has 100 items")
}

func TestNodeRun(t *testing.T) {
	var got runOptions
	fake := func(ctx context.Context, o runOptions) error {
		got = o
		if ctx == nil {
			t.Error("nil context")
		}
		o.Logger.Info("hello from the node")
		return context.Canceled
	}
	withFake := func(a *app) { a.runNode = fake }
	dir := t.TempDir()
	r := runCLIWith(withFake, "node", "run", "--data-dir", dir, "--api", "127.0.0.1:0", "--listen", "/ip4/127.0.0.1/tcp/0", "--listen", "/ip4/127.0.0.1/udp/0/quic-v1",
		"--config", "node.yaml", "--heartbeat-interval", "2s", "--name", "n1", "--log-level", "debug")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	want := runOptions{DataDir: dir, API: "127.0.0.1:0", Listen: []string{"/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1"},
		ConfigPath: "node.yaml", HeartbeatInterval: 2 * time.Second, Name: "n1", Logger: got.Logger}
	if !reflect.DeepEqual(got, want) || got.Logger == nil {
		t.Errorf("options %+v\nwant %+v", got, want)
	}
	if !strings.Contains(r.stderr, "level=INFO msg=\"hello from the node\"") {
		t.Errorf("log not on stderr as slog text: %q", r.stderr)
	}

	// Defaults: the API address, and zero for what the node or node.yaml decides.
	runCLIWith(withFake, "node", "run", "--data-dir", dir)
	if want := (runOptions{DataDir: dir, API: defaultAPI, Logger: got.Logger}); !reflect.DeepEqual(got, want) {
		t.Errorf("default options %+v", got)
	}

	failing := func(a *app) {
		a.runNode = func(ctx context.Context, o runOptions) error {
			return errors.New("node: config: resources.cpu_limit: 120 is outside 1..100")
		}
	}
	oneErrorLine(t, runCLIWith(failing, "node", "run", "--data-dir", dir), 1, "resources.cpu_limit")
}

func TestNodeStop(t *testing.T) {
	n := startNode(t)
	n.onStop = func() {
		go func() {
			time.Sleep(20 * time.Millisecond)
			n.srv.CloseClientConnections()
			n.srv.Close()
		}()
	}
	r := n.run("node", "stop")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if !strings.HasPrefix(r.stdout, "stopping node "+m1ID+"\n") {
		t.Errorf("stdout %q", r.stdout)
	}
	// Stopping a stopped node says no node runs.
	oneErrorLine(t, n.run("node", "stop"), 1, "no node running")

	// A node that does not go away is an error after the timeout.
	n2 := startNode(t)
	short := func(a *app) { a.stopTimeout = 100 * time.Millisecond }
	oneErrorLine(t, runCLIWith(short, "--data-dir", n2.dataDir, "node", "stop"), 1, "still answers")
}

func TestSmartsharePlan(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	writeFile(t, bad, `{"config": {"mode": "sometimes"}, "machines": [{"id": "m1", "slots": 4}], "jobs": [], "instances": []}`)
	oneErrorLine(t, runCLI("smartshare", "plan", "--input", bad), 2, "mode")
	oneErrorLine(t, runCLI("smartshare", "plan", "--input", filepath.Join(dir, "missing.json")), 2)
	writeFile(t, filepath.Join(dir, "junk.json"), `{"machines": [`)
	oneErrorLine(t, runCLI("smartshare", "plan", "--input", filepath.Join(dir, "junk.json")), 2)

	good := filepath.Join(dir, "good.json")
	writeFile(t, good, `{"config": {"mode": "jobs", "preempt_policy": "aggressive", "default_max_cpus": -1, "max_cpus_limit": 100},
 "machines": [{"id": "m1", "slots": 4}],
 "jobs": [{"id": "j1", "priority": 5, "cpus": 1, "max_cpus": 50, "submitted": 1, "items_remaining": 100}],
 "instances": [{"job": "j1", "machine": "m1", "slot": 0, "kind": "primary"}]}`)
	// No node is needed: the data dir is empty.
	r := runCLI("--data-dir", t.TempDir(), "smartshare", "plan", "--input", good, "--json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var plan map[string]any
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	if err := dec.Decode(&plan); err != nil || plan["hash"] == nil || plan["instances"] == nil {
		t.Fatalf("plan --json: %v\n%s", err, r.stdout)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		t.Errorf("more than one JSON value:\n%s", r.stdout)
	}
	if r := runCLI("smartshare", "plan", "--input", good); r.code != 0 || r.stdout == "" {
		t.Errorf("plan: %+v", r)
	}
}

func TestHelpersAndTable(t *testing.T) {
	for s, want := range map[string]int{"abc": 3, "🟢 available": 12, "⚫ offline": 10, "日本": 4, "": 0} {
		if got := displayWidth(s); got != want {
			t.Errorf("displayWidth(%q) = %d, want %d", s, got, want)
		}
	}
	var b strings.Builder
	tb := table{}
	tb.row("A", "B", "C")
	tb.row("🟢 x", "yy", "z")
	tb.row("long value", "", "last")
	if err := tb.write(&b); err != nil {
		t.Fatal(err)
	}
	want := "A           B   C\n🟢 x        yy  z\nlong value      last\n"
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
	if got := short(m1ID); got != m1ID[len(m1ID)-12:] {
		t.Errorf("short = %q", got)
	}
	if got := short("m1"); got != "m1" {
		t.Errorf("short(m1) = %q", got)
	}
}
