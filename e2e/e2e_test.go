package e2e

import (
	"encoding/json"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Three node processes form an org through the CLI and converge.
func TestThreeProcessesCLI(t *testing.T) {
	ps := mesh(t, 3)
	eventually(t, 20*time.Second, "one state_hash on all nodes", func() bool {
		var a, b, c orgInfo
		ps[0].json(&a, "org", "show")
		ps[1].json(&b, "org", "show")
		ps[2].json(&c, "org", "show")
		return a.StateHash == b.StateHash && b.StateHash == c.StateHash && a.Entries == c.Entries
	})

	// A member cannot approve: one line on stderr, non-zero exit.
	var st1 status
	ps[1].json(&st1, "node", "status")
	ps[0].must("member", "set-role", st1.Person, "member")
	eventually(t, 20*time.Second, "node 2's person a member on node 2", func() bool {
		ps[1].json(&st1, "node", "status")
		return st1.Role == "member"
	})
	_, errs, code := ps[1].cli("machine", "approve", "nobody")
	if code == 0 || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
		t.Fatalf("member approve: exit %d, stderr %q", code, errs)
	}
	// A member cannot invite.
	if _, errs, code := ps[1].cli("org", "invite"); code == 0 || !strings.Contains(errs, "admin") {
		t.Fatalf("member invite: exit %d, stderr %q", code, errs)
	}

	// Bad org keys are refused with one line.
	extra := startNode(t, "extra")
	for _, bad := range []string{"garbage", "cshare1AAAA", "cshare1" + strings.Repeat("x", 50)} {
		_, errs, code := extra.cli("node", "join", "--org-key", bad)
		if code == 0 || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, "org key") {
			t.Fatalf("join with %q: exit %d, stderr %q", bad, code, errs)
		}
	}
	// An invite with one use admits one machine, approved, with its role.
	code1 := lastLine(ps[0].must("org", "invite", "--role", "admin", "--uses", "1"))
	extra.must("node", "join", "--org-key", code1)
	var st status
	extra.json(&st, "node", "status")
	var ms []machine
	eventually(t, 20*time.Second, "invited machine approved on node 1", func() bool {
		ps[0].json(&ms, "machine", "ls")
		for _, m := range ms {
			if m.ID == st.ID {
				return m.Status == "available" || m.Status == "busy"
			}
		}
		return false
	})
	found := false
	for _, m := range ps[0].members() {
		if slices.Contains(m.Machines, st.ID) {
			found = m.Role == "admin"
		}
	}
	if !found {
		t.Fatalf("invited member is not an admin: %+v", ps[0].members())
	}
	// The used-up invite is refused for the next machine.
	another := startNode(t, "another")
	if _, errs, code := another.cli("node", "join", "--org-key", code1); code == 0 || !strings.Contains(errs, "used") {
		t.Fatalf("second use of a one-use invite: exit %d, stderr %q", code, errs)
	}
	// The org key rotated: the old one is refused.
	oldKey := lastLine(ps[0].must("org", "key"))
	ps[0].must("org", "key", "--rotate")
	if _, errs, code := another.cli("node", "join", "--org-key", oldKey); code == 0 || !strings.Contains(errs, "rotated") {
		t.Fatalf("join with a rotated key: exit %d, stderr %q", code, errs)
	}
	newKey := lastLine(ps[0].must("org", "key"))
	another.must("node", "join", "--org-key", newKey)
}

// A node killed with SIGKILL while Docker instances run restarts, adopts its
// containers (no second copy) and records their results.
func TestKill9AdoptsDockerInstances(t *testing.T) {
	dockerAvailable(t)
	p := startNode(t, "solo")
	p.must("org", "create", "--name", "adopt")
	out := p.must("job", "submit", "--cpus", "2", "--max-cpus", "2", "--range", "1-4", "--", "sh", "-c", "sleep 2; echo item $CSHARE_ITEM")
	id := lastLine(out)
	running := func() int {
		ps, _ := exec.Command("docker", "ps", "-q", "--filter", "label=cshare.job="+id).Output()
		return len(strings.Fields(string(ps)))
	}
	eventually(t, 30*time.Second, "two containers running", func() bool { return running() == 2 })
	p.kill9()
	// Its containers keep running without the node.
	if n := running(); n == 0 {
		t.Fatalf("no container of job %s survived the node's death", id)
	}
	p.start()
	eventually(t, 60*time.Second, "job done after restart", func() bool {
		var j job
		p.json(&j, "job", "show", id)
		return j.State == "done"
	})
	var items []item
	p.json(&items, "job", "items", id)
	for _, it := range items {
		if it.Status != "done" || it.Attempts != 1 {
			t.Fatalf("item %d: status %s after %d attempts (want done after exactly 1)", it.Item, it.Status, it.Attempts)
		}
	}
	for i := 1; i <= 4; i++ {
		out := p.must("job", "logs", id, "--item", strconv.Itoa(i))
		if !strings.Contains(out, "item "+strconv.Itoa(i)) {
			t.Fatalf("logs of item %d: %q", i, out)
		}
	}
	// Containers of the finished job are removed (by their instances, or by
	// the node's sweep for runs left behind).
	var left string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		out, _ := exec.Command("docker", "ps", "-a", "--filter", "label=cshare.job="+id,
			"--format", "{{.ID}} item={{.Label \"cshare.item\"}} {{.State}}").Output()
		if left = strings.TrimSpace(string(out)); left == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("containers of the finished job were not removed within 30s:\n%s", left)
		}
	}
}

// Three node processes with the Docker driver run one job across the mesh.
func TestThreeNodesDockerJob(t *testing.T) {
	dockerAvailable(t)
	ps := mesh(t, 3)
	id := lastLine(ps[1].must("job", "submit", "--cpus", "2", "--max-cpus", "6", "--range", "1-12", "--", "sh", "-c", "echo $CSHARE_ITEM; sleep 0.5"))
	items := waitAllDone(t, ps[2], ps[0], id, 90*time.Second)
	machines := map[string]bool{}
	for _, it := range items {
		machines[it.Machine] = true
	}
	if len(machines) < 2 {
		t.Fatalf("the job ran on %d machine(s); want it spread over the mesh", len(machines))
	}
	// Every item's output, from one machine's CLI: most are fetched from
	// the machine that ran them.
	for _, it := range items {
		if out := ps[0].must("job", "logs", id, "--item", strconv.Itoa(int(it.Item))); strings.TrimSpace(out) != strconv.Itoa(int(it.Item)) {
			t.Fatalf("logs of item %d (ran on %s), asked of node 0: %q", it.Item, it.Machine, out)
		}
	}
	b, _ := json.Marshal(items)
	t.Logf("items: %s", b)
}

// One of three machines is killed with SIGKILL mid-job: every item is still
// done exactly once, and the restarted machine converges to the same state.
func TestKillOneMachineMidJob(t *testing.T) {
	dockerAvailable(t)
	ps := mesh(t, 3)
	id := lastLine(ps[0].must("job", "submit", "--cpus", "3", "--max-cpus", "6", "--range", "1-24", "--", "sh", "-c", "sleep 1; echo $CSHARE_ITEM"))
	var victim status
	ps[2].json(&victim, "node", "status")
	eventually(t, 60*time.Second, "the victim runs items", func() bool {
		var j job
		ps[0].json(&j, "job", "show", id)
		for _, in := range j.Instances {
			if in.Machine == victim.ID && in.State == "running" {
				return j.Items.Done > 0
			}
		}
		return false
	})
	ps[2].kill9()
	waitAllDone(t, ps[1], ps[0], id, 120*time.Second)
	ps[2].start()
	eventually(t, 60*time.Second, "the restarted machine converges", func() bool {
		var a, c orgInfo
		ps[0].json(&a, "org", "show")
		ps[2].json(&c, "org", "show")
		return a.StateHash == c.StateHash
	})
}

// Bad job input is refused with one line naming what is wrong.
func TestSubmitBadInput(t *testing.T) {
	dockerAvailable(t)
	p := startNode(t, "bad")
	p.must("org", "create", "--name", "bad")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--image", "cshare-no-such-image:1"}, "cshare-no-such-image:1"},
		{[]string{"--memory", "1m"}, "memory"},
		{[]string{"--range", "5-1"}, "range"},
		{[]string{"--gpus", "65"}, "--gpus: 65 is above the maximum 64"},
		{[]string{"--priority", "1e9"}, "--priority: 1000000000 is above the maximum 9999"},
		{[]string{"--driver", "exec"}, "exec"},
	}
	for _, c := range cases {
		args := append(append([]string{"job", "submit"}, c.args...), "--", "true")
		out, errs, code := p.cli(args...)
		if code == 0 || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("cshare %s: exit %d, stdout %q, stderr %q (want one line naming %q)", strings.Join(args, " "), code, out, errs, c.want)
		}
	}
	var jobs []job
	p.json(&jobs, "job", "ls")
	if len(jobs) != 0 {
		t.Fatalf("refused submissions left jobs: %+v", jobs)
	}
	// One admission rule: a job no machine fits is accepted with a warning
	// naming the resource, whether GPUs, cores or memory; it waits.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--gpus", "1"}, "1 GPU per instance"},
		{[]string{"--cores", "4096"}, "4096 cores per instance"},
	} {
		args := append(append([]string{"job", "submit"}, c.args...), "--", "true")
		out, errs, code := p.cli(args...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != 0 || !strings.HasPrefix(errs, "warning: ") || !strings.Contains(errs, c.want) || len(lines[len(lines)-1]) != 12 {
			t.Errorf("cshare %s: exit %d, stdout %q, stderr %q (want it accepted, with a warning naming %q)", strings.Join(args, " "), code, out, errs, c.want)
		}
	}
}

// waitAllDone waits until watcher shows the job done, then checks on reader
// that every item is done, and returns the items.
func waitAllDone(t *testing.T, watcher, reader *proc, id string, d time.Duration) []item {
	t.Helper()
	eventually(t, d, "job "+id+" done", func() bool {
		var j job
		watcher.json(&j, "job", "show", id)
		return j.State == "done"
	})
	var items []item
	reader.json(&items, "job", "items", id)
	for _, it := range items {
		if it.Status != "done" {
			t.Fatalf("item %d is %s", it.Item, it.Status)
		}
	}
	return items
}
