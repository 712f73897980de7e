package runtime

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

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
