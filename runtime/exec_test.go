package runtime

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// recordHandler is a slog.Handler that keeps the records it gets.
type recordHandler struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.recs = append(h.recs, r)
	h.mu.Unlock()
	return nil
}
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordHandler) WithGroup(string) slog.Handler      { return h }

func (h *recordHandler) count(level slog.Level, msgContains string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range h.recs {
		if r.Level == level && strings.Contains(r.Message, msgContains) {
			n++
		}
	}
	return n
}

func newTestExec(t *testing.T, root string) (*Exec, *recordHandler) {
	t.Helper()
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("exec driver needs /bin/sh")
	}
	h := &recordHandler{}
	e := NewExec(root, slog.New(h))
	t.Cleanup(e.Release) // the cgroups it kept for reuse
	return e, h
}

// stopAll kills whatever the test left running under root.
func stopAll(t *testing.T, root string) {
	t.Cleanup(func() {
		e := NewExec(root, slog.New(slog.DiscardHandler))
		runs, _ := e.List(context.Background(), nil)
		for _, r := range runs {
			if r.Running {
				_ = e.Stop(context.Background(), r.ID, 0)
			}
		}
	})
}

func execSpec(item int, cmd ...string) Spec {
	return Spec{Org: "org1", Job: "job1", Instance: "inst-1", Machine: "machine-1", Item: item, Cmd: cmd}
}

func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestExecEnvLogsAndExitCodes(t *testing.T) {
	root := t.TempDir()
	e, _ := newTestExec(t, root)
	stopAll(t, root)
	ctx := waitCtx(t)

	s := execSpec(7, "sh", "-c", `echo "job=$CSHARE_JOB_ID item=$CSHARE_ITEM inst=$CSHARE_INSTANCE machine=$CSHARE_MACHINE extra=$EXTRA"
echo "home=$HOME pwd=$(pwd) path=$PATH cuda=$CUDA_VISIBLE_DEVICES"
echo to-stderr >&2
exit 4`)
	s.Env = map[string]string{"EXTRA": "yes"}
	s.GPUUUIDs = []string{"GPU-recorded-1", "GPU-recorded-0"}
	id, es := startWait(t, e, ctx, s)
	if es.Code != 4 {
		t.Errorf("exit code = %d, want 4", es.Code)
	}
	logs, err := e.Logs(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(root, "instances", "inst-1")
	for _, want := range []string{
		"job=job1 item=7 inst=inst-1 machine=machine-1 extra=yes",
		"home=" + work + " pwd=" + work,
		"path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin cuda=GPU-recorded-1,GPU-recorded-0",
		"to-stderr",
	} {
		if !strings.Contains(string(logs), want) {
			t.Errorf("logs %q lack %q", logs, want)
		}
	}
	if env := os.Getenv("HOME"); env != "" && env != work && strings.Contains(string(logs), "HOME="+env) {
		t.Errorf("the node's environment leaked into the run")
	}

	// Exit 0, and a command that does not exist (127, like a shell).
	ok, err := e.Start(ctx, execSpec(8, "true"))
	if err != nil {
		t.Fatal(err)
	}
	if es, err := e.Wait(ctx, ok); err != nil || es.Code != 0 {
		t.Errorf("true: %+v, %v; want code 0", es, err)
	}
	missing, err := e.Start(ctx, execSpec(9, "cshare-no-such-command"))
	if err != nil {
		t.Fatal(err)
	}
	if es, err := e.Wait(ctx, missing); err != nil || es.Code != 127 {
		t.Errorf("missing command: %+v, %v; want code 127", es, err)
	}

	runs, err := e.List(ctx, map[string]string{LabelJob: "job1", LabelItem: "7"})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].ID != id || runs[0].Running || runs[0].ExitCode != 4 ||
		runs[0].Labels[LabelOrg] != "org1" || runs[0].Labels[LabelMachine] != "machine-1" ||
		runs[0].StartedAt.IsZero() || runs[0].FinishedAt.Before(runs[0].StartedAt) ||
		strings.Join(GPUsOf(runs[0].Labels), ",") != "GPU-recorded-1,GPU-recorded-0" {
		t.Errorf("List(item 7) = %+v", runs)
	}
	if all, _ := e.List(ctx, nil); len(all) != 3 {
		t.Errorf("List(nil) = %d runs, want 3", len(all))
	}

	if _, err := e.Start(ctx, execSpec(1)); !errors.Is(err, ErrInvalidSpec) {
		t.Errorf("Start without cmd = %v, want ErrInvalidSpec", err)
	}
	for _, bad := range []RunID{"nope", "../../etc", ""} {
		if _, err := e.Wait(ctx, bad); !errors.Is(err, ErrNotFound) {
			t.Errorf("Wait(%q) = %v, want ErrNotFound", bad, err)
		}
	}
}

func TestExecWorkDirAndMounts(t *testing.T) {
	root := t.TempDir()
	e, _ := newTestExec(t, root)
	stopAll(t, root)
	ctx := waitCtx(t)

	ds := t.TempDir()
	if err := os.WriteFile(filepath.Join(ds, "hello.txt"), []byte("dataset-ok\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(t.TempDir(), "w")
	s := execSpec(1, "sh", "-c", "pwd; cat data/hello.txt")
	s.WorkDir = work
	s.Mounts = []Mount{{Source: ds, Target: "/data", ReadOnly: true}}
	id, err := e.Start(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if es, err := e.Wait(ctx, id); err != nil || es.Code != 0 {
		t.Fatalf("Wait = %+v, %v", es, err)
	}
	logs, _ := e.Logs(ctx, id)
	if want := work + "\ndataset-ok\n"; string(logs) != want {
		t.Errorf("logs = %q, want %q", logs, want)
	}
	// A second run of the same instance reuses the directory and the link.
	id2, err := e.Start(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if es, err := e.Wait(ctx, id2); err != nil || es.Code != 0 {
		t.Fatalf("second run: %+v, %v", es, err)
	}
}

// TestExecReadOnlyMountsHoldForRoot: a root run cannot write a ReadOnly
// mount, through its link or the source's own path, nor remount it
// writable; the host sees no mount and the source stays unchanged.
func TestExecReadOnlyMountsHoldForRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("read-only mounts are enforced for a root node only")
	}
	root := t.TempDir()
	e, _ := newTestExec(t, root)
	stopAll(t, root)
	ctx := waitCtx(t)

	ds := t.TempDir()
	if err := os.WriteFile(filepath.Join(ds, "hello.txt"), []byte("dataset-ok\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(t.TempDir(), "w")
	script := `cat data/hello.txt
id -u
for p in data/new data/hello.txt "$DS/new" "$DS/hello.txt"; do
  if (echo x > "$p") 2>/dev/null; then echo "wrote $p"; else echo "refused $p"; fi
done
if mount -o remount,bind,rw "$DS" 2>/dev/null; then echo remounted; else echo "no remount"; fi
if (echo x > "$DS/new") 2>/dev/null; then echo "wrote after remount"; fi`
	s := execSpec(1, "sh", "-c", script)
	s.WorkDir = work
	s.Env = map[string]string{"DS": ds}
	s.Mounts = []Mount{{Source: ds, Target: "/data", ReadOnly: true}}
	id, err := e.Start(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if es, err := e.Wait(ctx, id); err != nil || es.Code != 0 {
		logs, _ := e.Logs(ctx, id)
		t.Fatalf("Wait = %+v, %v; logs %q", es, err, logs)
	}
	logs, _ := e.Logs(ctx, id)
	want := "dataset-ok\n0\nrefused data/new\nrefused data/hello.txt\nrefused " + ds + "/new\nrefused " + ds + "/hello.txt\nno remount\n"
	if string(logs) != want {
		t.Errorf("logs = %q, want %q", logs, want)
	}
	if b, err := os.ReadFile(filepath.Join(ds, "hello.txt")); err != nil || string(b) != "dataset-ok\n" {
		t.Errorf("source hello.txt = %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(ds, "new")); err == nil {
		t.Error("the run created a file in the source")
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mounts), " "+ds+" ") {
		t.Errorf("the host sees a mount on %s", ds)
	}
}

func TestExecStopKillsProcessGroup(t *testing.T) {
	root := t.TempDir()
	e, _ := newTestExec(t, root)
	stopAll(t, root)
	ctx := waitCtx(t)
	work := t.TempDir()

	// The command leaves a grandchild in the background: Stop must kill it too.
	s := execSpec(1, "sh", "-c", "sleep 60 & echo $! > child.pid; wait")
	s.WorkDir = work
	id, err := e.Start(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	var child int
	eventually(t, 10*time.Second, "child.pid", func() bool {
		b, err := os.ReadFile(filepath.Join(work, "child.pid"))
		child, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && child > 0
	})
	if runs, _ := e.List(ctx, nil); len(runs) != 1 || !runs[0].Running {
		t.Fatalf("List before stop = %+v, want one running run", runs)
	}
	start := time.Now()
	if err := e.Stop(ctx, id, 0); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("Stop(grace 0) took %v", el)
	}
	es, err := e.Wait(ctx, id)
	if err != nil || es.Code != 137 {
		t.Errorf("Wait after kill = %+v, %v; want code 137", es, err)
	}
	eventually(t, 5*time.Second, "the background sleep to die", func() bool { return !pidAlive(child, 0) })
	if err := e.Stop(ctx, id, 0); err != nil {
		t.Errorf("Stop(exited) = %v, want nil", err)
	}
}

func TestExecStopGrace(t *testing.T) {
	root := t.TempDir()
	e, _ := newTestExec(t, root)
	stopAll(t, root)
	ctx := waitCtx(t)

	// sleep dies of SIGTERM at once: the wrapper records 143.
	polite, err := e.Start(ctx, execSpec(1, "sleep", "60"))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := e.Stop(ctx, polite, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("Stop of a command that obeys SIGTERM took %v", el)
	}
	if es, _ := e.Wait(ctx, polite); es.Code != 143 {
		t.Errorf("terminated run code = %d, want 143", es.Code)
	}

	// A command that ignores SIGTERM is killed when the grace has passed.
	work := t.TempDir()
	s := execSpec(2, "sh", "-c", `trap "" TERM; touch ready; while :; do sleep 1; done`)
	s.WorkDir = work
	stubborn, err := e.Start(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "ready", func() bool {
		_, err := os.Stat(filepath.Join(work, "ready"))
		return err == nil
	})
	start = time.Now()
	if err := e.Stop(ctx, stubborn, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 300*time.Millisecond {
		t.Errorf("Stop returned after %v, before the grace", el)
	}
	if es, _ := e.Wait(ctx, stubborn); es.Code != 137 {
		t.Errorf("killed run code = %d, want 137", es.Code)
	}
}

func TestExecRemoveAndStats(t *testing.T) {
	root := t.TempDir()
	e, _ := newTestExec(t, root)
	stopAll(t, root)
	ctx := waitCtx(t)

	id, err := e.Start(ctx, execSpec(1, "sleep", "60"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := e.Stats(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if st.MemoryBytes <= 0 || st.CPUPercent < 0 {
		t.Errorf("Stats of a running sleep = %+v", st)
	}
	if err := e.Remove(ctx, id); !errors.Is(err, ErrRunning) {
		t.Errorf("Remove(running) = %v, want ErrRunning", err)
	}
	if err := e.Stop(ctx, id, 0); err != nil {
		t.Fatal(err)
	}
	if st, err := e.Stats(ctx, id); err != nil || st != (Stats{}) {
		t.Errorf("Stats of an exited run = %+v, %v", st, err)
	}
	if err := e.Remove(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "runs", string(id))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("run dir still there: %v", err)
	}
	if _, err := e.Logs(ctx, id); !errors.Is(err, ErrNotFound) {
		t.Errorf("Logs(removed) = %v, want ErrNotFound", err)
	}
	if runs, _ := e.List(ctx, nil); len(runs) != 0 {
		t.Errorf("List after Remove = %+v", runs)
	}
}

// TestExecLimits checks the machine's real cgroup situation: limits are
// written to a cgroup v2 group, or exactly one warning says they are not.
func TestExecLimits(t *testing.T) {
	root := t.TempDir()
	e, h := newTestExec(t, root)
	stopAll(t, root)
	ctx := waitCtx(t)

	s := execSpec(1, "true")
	s.NanoCPUs, s.MemoryBytes, s.MemoryReservationBytes, s.PidsLimit = 5e8, 64<<20, 32<<20, 50
	var ids []RunID
	for i := 0; i < 2; i++ {
		id, err := e.Start(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		if _, err := e.Wait(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	enforced, reason := e.LimitsEnforced()
	t.Logf("limits enforced: %v (%s)", enforced, reason)
	warnings := h.count(slog.LevelWarn, "not enforced")
	if !enforced {
		if warnings != 1 {
			t.Errorf("got %d 'not enforced' warnings for two runs, want exactly 1", warnings)
		}
		return
	}
	if warnings != 0 {
		t.Errorf("limits are enforced but %d warnings were logged", warnings)
	}
	st, err := e.loadState(ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(st.CgroupsV1) > 0 {
		assertCgroupV1Files(t, st.CgroupsV1)
	} else {
		assertCgroupFiles(t, st.Cgroup)
	}
	for _, id := range ids {
		_ = e.Remove(ctx, id)
	}

	// A run that outgrows its memory cap is killed, and says so.
	s = execSpec(2, "sh", "-c", `x=$(head -c 200000000 /dev/zero | tr '\0' a); echo ${#x}`)
	s.MemoryBytes = 16 << 20
	id, err := e.Start(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	es, err := e.Wait(ctx, id)
	if err != nil || es.Code == 0 || !es.OOMKilled {
		t.Errorf("a run of 200 MB under a 16 MiB cap: %+v, %v; want killed, OOMKilled", es, err)
	}
	_ = e.Remove(ctx, id)
}

func assertCgroupV1Files(t *testing.T, dirs map[string]string) {
	t.Helper()
	for ctrl, files := range map[string]map[string]string{
		"memory": {"memory.limit_in_bytes": "67108864", "memory.soft_limit_in_bytes": "33554432"},
		"cpu":    {"cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "50000"},
		"pids":   {"pids.max": "50"},
	} {
		for file, want := range files {
			b, err := os.ReadFile(filepath.Join(dirs[ctrl], file))
			if got := strings.TrimSpace(string(b)); err != nil || got != want {
				t.Errorf("%s %s = %q, %v; want %q", ctrl, file, got, err, want)
			}
		}
	}
}

func assertCgroupFiles(t *testing.T, dir string) {
	t.Helper()
	for file, want := range map[string]string{
		"memory.max": "67108864",
		"memory.low": "33554432",
		"cpu.max":    "50000 100000",
		"pids.max":   "50",
	} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Errorf("read %s: %v", file, err)
			continue
		}
		if got := strings.TrimSpace(string(b)); got != want {
			t.Errorf("%s = %q, want %q", file, got, want)
		}
	}
}

// TestExecCgroupWiring runs the cgroup path against a directory of plain
// files standing in for cgroupfs, so that the limit values and the wrapper
// joining its group are checked on machines without cgroup v2.
func TestExecCgroupWiring(t *testing.T) {
	root := t.TempDir()
	e, h := newTestExec(t, root)
	stopAll(t, root)
	ctx := waitCtx(t)
	base := t.TempDir()
	e.cgOnce.Do(func() { e.cgBase, e.cgReason = base, "test tree" })

	id := runLimited(t, e, ctx)
	st, _ := e.loadState(id)
	dir := st.Cgroup
	if filepath.Dir(dir) != base {
		t.Errorf("the run's group %s is not under %s", dir, base)
	}
	assertCgroupFiles(t, dir)
	procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil || strings.TrimSpace(string(procs)) != strconv.Itoa(st.Pid) {
		t.Errorf("cgroup.procs = %q, %v; want the wrapper's pid %d", procs, err, st.Pid)
	}
	if n := h.count(slog.LevelWarn, "not enforced"); n != 0 {
		t.Errorf("%d warnings with cgroups available", n)
	}
	if err := e.Remove(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cgroup dir survived Remove: %v", err)
	}
}

// runLimited runs "echo $$" with limits on every resource, to its end.
// startWait starts s and waits for its end.
func startWait(t *testing.T, e *Exec, ctx context.Context, s Spec) (RunID, ExitStatus) {
	t.Helper()
	id, err := e.Start(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	es, err := e.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return id, es
}

func runLimited(t *testing.T, e *Exec, ctx context.Context) RunID {
	t.Helper()
	s := execSpec(1, "sh", "-c", "echo $$")
	s.NanoCPUs, s.MemoryBytes, s.MemoryReservationBytes, s.PidsLimit = 5e8, 64<<20, 32<<20, 50
	id, err := e.Start(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if es, err := e.Wait(ctx, id); err != nil || es.Code != 0 {
		t.Fatalf("Wait = %+v, %v", es, err)
	}
	return id
}

func TestParseProcStat(t *testing.T) {
	line := "1234 (we ird) name)) S 1 1234 1234 0 -1 4194304 100 0 0 0 7 3 0 0 20 0 1 0 98765 1000000 250 18446744073709551615"
	ps, err := parseProcStat(line)
	if err != nil {
		t.Fatal(err)
	}
	if ps.state != 'S' || ps.pgrp != 1234 || ps.utime != 7 || ps.stime != 3 || ps.starttime != 98765 || ps.rssPages != 250 {
		t.Errorf("parseProcStat = %+v", ps)
	}
	if _, err := parseProcStat("garbage"); err == nil {
		t.Error("parseProcStat(garbage) = nil error")
	}
}

func TestSafeName(t *testing.T) {
	if got := safeName("inst-1.a_b"); got != "inst-1.a_b" {
		t.Errorf("safeName kept-as-is = %q", got)
	}
	a, b := safeName("a/b"), safeName("a_b")
	if a == b || strings.ContainsAny(a, "/") {
		t.Errorf("safeName(a/b) = %q, safeName(a_b) = %q", a, b)
	}
	if got := safeName(".."); got == ".." || strings.Contains(got, "/") {
		t.Errorf("safeName(..) = %q", got)
	}
}

// TestExecAdoptionAfterNodeKill starts runs from a separate "node" process,
// kills that process with SIGKILL, and checks that a fresh driver over the
// same root still sees the runs, their exit codes, and can wait for and stop
// the ones still running.
func TestExecAdoptionAfterNodeKill(t *testing.T) {
	if os.Getenv("CSHARE_EXEC_NODE_ROOT") != "" {
		t.Skip("running as the helper node")
	}
	root := t.TempDir()
	stopAll(t, root)
	work := t.TempDir()

	node := exec.Command(os.Args[0], "-test.run=^TestExecHelperNode$", "-test.v")
	node.Env = append(os.Environ(), "CSHARE_EXEC_NODE_ROOT="+root, "CSHARE_EXEC_NODE_WORK="+work)
	out, err := node.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	node.Stderr = os.Stderr
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = node.Process.Kill(); _ = node.Wait() })

	ids := map[string]RunID{}
	sc := bufio.NewScanner(out)
	for len(ids) < 3 && sc.Scan() {
		if name, id, ok := strings.Cut(sc.Text(), "="); ok && strings.HasPrefix(name, "RUN_") {
			ids[strings.TrimPrefix(name, "RUN_")] = RunID(id)
		}
	}
	if len(ids) < 3 {
		t.Fatalf("helper node reported %v (scan err %v)", ids, sc.Err())
	}
	// "done" exits 7 on its own; wait for that before the crash so List must
	// report a finished run too.
	e, _ := newTestExec(t, root)
	eventually(t, 10*time.Second, "run done to exit", func() bool {
		b, err := os.ReadFile(filepath.Join(root, "runs", string(ids["done"]), execExitFile))
		_, ok := parseExit(b, ids["done"])
		return err == nil && ok
	})
	if err := node.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = node.Wait()

	ctx := waitCtx(t)
	runs, err := e.List(ctx, map[string]string{LabelJob: "job1"})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[RunID]RunInfo{}
	for _, r := range runs {
		byID[r.ID] = r
	}
	if r := byID[ids["done"]]; r.Running || r.ExitCode != 7 {
		t.Errorf("done after crash: %+v, want exited with 7", r)
	}
	if r := byID[ids["gated"]]; !r.Running {
		t.Errorf("gated after crash: %+v, want running", r)
	}
	if r := byID[ids["sleeper"]]; !r.Running || r.Labels[LabelItem] != "3" {
		t.Errorf("sleeper after crash: %+v, want running item 3", r)
	}

	// The gated run finishes while only the new driver watches.
	if err := os.WriteFile(filepath.Join(work, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	es, err := e.Wait(ctx, ids["gated"])
	if err != nil || es.Code != 9 {
		t.Errorf("Wait(gated) = %+v, %v; want code 9", es, err)
	}
	if logs, _ := e.Logs(ctx, ids["gated"]); !strings.Contains(string(logs), "gated-start") {
		t.Errorf("gated logs = %q", logs)
	}

	// Stop an adopted run: not our child, so the driver records the exit.
	if err := e.Stop(ctx, ids["sleeper"], 0); err != nil {
		t.Fatal(err)
	}
	if es, err := e.Wait(ctx, ids["sleeper"]); err != nil || es.Code != 137 {
		t.Errorf("Wait(sleeper) after Stop = %+v, %v; want 137", es, err)
	}
	runs, _ = e.List(ctx, nil)
	for _, r := range runs {
		if r.Running {
			t.Errorf("run %s still running", r.ID)
		}
	}
}

// TestExecHelperNode is the "node" of TestExecAdoptionAfterNodeKill. It
// starts the runs, prints their IDs and waits to be killed.
func TestExecHelperNode(t *testing.T) {
	root := os.Getenv("CSHARE_EXEC_NODE_ROOT")
	if root == "" {
		t.Skip("helper for TestExecAdoptionAfterNodeKill")
	}
	work := os.Getenv("CSHARE_EXEC_NODE_WORK")
	e := NewExec(root, slog.New(slog.DiscardHandler))
	ctx := context.Background()
	start := func(name string, s Spec) {
		s.WorkDir = work
		id, err := e.Start(ctx, s)
		if err != nil {
			fmt.Printf("ERR=%v\n", err)
			os.Exit(1)
		}
		fmt.Printf("RUN_%s=%s\n", name, id)
	}
	start("done", execSpec(1, "sh", "-c", "exit 7"))
	start("gated", execSpec(2, "sh", "-c", "echo gated-start; while [ ! -e release ]; do sleep 0.05; done; exit 9"))
	start("sleeper", execSpec(3, "sleep", "60"))
	_ = os.Stdout.Sync()
	time.Sleep(time.Minute) // killed by the parent test long before
}

// TestExecRunWithoutItsPidIsFound: a node killed between starting a run's
// wrapper and recording its pid (Start writes the state twice) left a state
// without the pid; a restarted node took the run for lost (exit -1, its item
// failed) while its command ran on. It now finds the wrapper by its exit
// file: the run is running, and its real exit code is recorded. (The pid
// has its own file now, written after the wrapper started: the same gap,
// where the file still holds the pid of the directory's run before.)
func TestExecRunWithoutItsPidIsFound(t *testing.T) {
	root, work := t.TempDir(), t.TempDir()
	stopAll(t, root)
	e1, _ := newTestExec(t, root)
	ctx := waitCtx(t)
	release := filepath.Join(work, "release")
	id, err := e1.Start(ctx, execSpec(1, "sh", "-c", "while [ ! -e "+release+" ]; do sleep 0.05; done; exit 9"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := e1.loadState(id)
	if err != nil || st.Pid == 0 {
		t.Fatalf("state after Start: %+v, %v", st, err)
	}
	st.Pid, st.PidStart = 0, 0 // as a node killed before it wrote the pid left it
	if err := writeJSONAtomic(e1.statePath(id), st); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e1.runDir(id), execPidFile), []byte("1 1 0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e2, _ := newTestExec(t, root) // the restarted node: the run is not its child
	runs, err := e2.List(ctx, nil)
	if err != nil || len(runs) != 1 || !runs[0].Running {
		t.Fatalf("after the restart: %+v, %v; want the run running", runs, err)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if es, err := e2.Wait(ctx, id); err != nil || es.Code != 9 {
		t.Fatalf("Wait = %+v, %v; want exit 9", es, err)
	}
}

// TestExecCgroupV1Wiring runs the cgroup v1 path against a tree of plain
// files standing in for the v1 mounts (memory, cpu and cpuacct together,
// pids), found through mountinfo and nested under the node's own groups:
// each controller's limit files, the wrapper joining every group, and
// Remove taking them away.
func TestExecCgroupV1Wiring(t *testing.T) {
	root := t.TempDir()
	e, h := newTestExec(t, root)
	stopAll(t, root)
	ctx := waitCtx(t)
	mnt := t.TempDir()
	for _, d := range []string{"memory/node", "cpu,cpuacct/node", "pids"} {
		if err := os.MkdirAll(filepath.Join(mnt, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mountinfo := fmt.Sprintf("30 25 0:26 / %[1]s/memory rw - cgroup cgroup rw,memory\n"+
		"31 25 0:27 / %[1]s/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"+
		"32 25 0:28 / %[1]s/pids rw - cgroup cgroup rw,pids\n"+
		"33 25 0:29 / %[1]s/unified rw - cgroup2 cgroup2 rw\n", mnt)
	self := "4:memory:/node\n2:cpu,cpuacct:/node\n8:pids:/\n0::/\n"
	hs, why := setupCgroupsV1(mountinfo, self)
	if len(hs) != 3 {
		t.Fatalf("setupCgroupsV1 = %+v, %q; want three hierarchies", hs, why)
	}
	e.cgOnce.Do(func() { e.cgV1, e.cgReason = hs, "test tree" })

	id := runLimited(t, e, ctx)
	st, _ := e.loadState(id)
	name := filepath.Base(st.CgroupsV1["memory"])
	want := map[string]map[string]string{
		filepath.Join(mnt, "memory/node/cshare", name):      {"memory.limit_in_bytes": "67108864", "memory.soft_limit_in_bytes": "33554432"},
		filepath.Join(mnt, "cpu,cpuacct/node/cshare", name): {"cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "50000"},
		filepath.Join(mnt, "pids/cshare", name):             {"pids.max": "50"},
	}
	for dir, files := range want {
		for file, v := range files {
			b, err := os.ReadFile(filepath.Join(dir, file))
			if got := strings.TrimSpace(string(b)); err != nil || got != v {
				t.Errorf("%s/%s = %q, %v; want %q", dir, file, got, err, v)
			}
		}
		procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil || strings.TrimSpace(string(procs)) != strconv.Itoa(st.Pid) {
			t.Errorf("%s/cgroup.procs = %q, %v; want the wrapper's pid %d", dir, procs, err, st.Pid)
		}
	}
	if st.CgroupsV1["cpuacct"] != st.CgroupsV1["cpu"] || st.CgroupsV1["memory"] == "" {
		t.Errorf("the run's groups by controller: %v", st.CgroupsV1)
	}
	if n := h.count(slog.LevelWarn, "not enforced"); n != 0 {
		t.Errorf("%d warnings with cgroups available", n)
	}
	if err := e.Remove(ctx, id); err != nil {
		t.Fatal(err)
	}
	for dir := range want {
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cgroup dir survived Remove: %v", err)
		}
	}
}
