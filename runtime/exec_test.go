package runtime

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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
