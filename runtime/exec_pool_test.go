package runtime

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestExecRunDirReused: a removed run's directory is the next run's, and
// nothing of the first run shows through: not its output, not its exit
// code (even written back over the blank, as a power loss could leave it:
// the code names its run), not its state.
func TestExecRunDirReused(t *testing.T) {
	root, work := t.TempDir(), t.TempDir()
	e, _ := newTestExec(t, root)
	stopAll(t, root)
	ctx := waitCtx(t)
	first, es := startWait(t, e, ctx, execSpec(1, "sh", "-c", "echo first; exit 3"))
	if es.Code != 3 {
		t.Fatalf("first run: %+v, want exit 3", es)
	}
	old, err := os.ReadFile(e.exitPath(first))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Remove(ctx, first); err != nil {
		t.Fatal(err)
	}
	release := filepath.Join(work, "release")
	second, err := e.Start(ctx, execSpec(2, "sh", "-c", "while [ ! -e "+release+" ]; do sleep 0.02; done; echo second"))
	if err != nil {
		t.Fatal(err)
	}
	if len(e.pool) != 0 {
		t.Errorf("%d directories left in the pool, want the first run's taken", len(e.pool))
	}
	if err := os.WriteFile(e.exitPath(second), old, 0o600); err != nil {
		t.Fatal(err)
	}
	e2, _ := newTestExec(t, root) // a restarted node reads only the disk
	runs, err := e2.List(ctx, nil)
	if err != nil || len(runs) != 1 || runs[0].ID != second || !runs[0].Running {
		t.Fatalf("List = %+v, %v; want only the second run, running", runs, err)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if es, err := e.Wait(ctx, second); err != nil || es.Code != 0 {
		t.Fatalf("second run: %+v, %v; want exit 0", es, err)
	}
	if out, err := e.Logs(ctx, second); err != nil || string(out) != "second\n" {
		t.Errorf("second run's output %q, %v; want only its own", out, err)
	}
	if _, err := os.Stat(e.runDir(first)); !os.IsNotExist(err) {
		t.Errorf("the first run's directory is still there: %v", err)
	}
	if _, err := e.Wait(ctx, first); err == nil {
		t.Error("the removed first run is still known")
	}
}

// TestExecStaleStateIsRefused: a directory whose state.json names another
// run (a reused directory after a power loss) is no run.
func TestExecStaleStateIsRefused(t *testing.T) {
	root := t.TempDir()
	e, _ := newTestExec(t, root)
	stopAll(t, root)
	dir := filepath.Join(root, "runs", "00112233aabbccdd")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	st := execState{ID: "99887766ffeeddcc", Cmd: []string{"true"}, StartedAt: time.Now()}
	if err := writeJSONAtomic(filepath.Join(dir, execStateFile), st); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, execExitFile), []byte("0 99887766ffeeddcc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := e.loadState("00112233aabbccdd"); err == nil {
		t.Error("a state naming another run was taken")
	}
	if runs, err := e.List(waitCtx(t), nil); err != nil || len(runs) != 0 {
		t.Errorf("List = %+v, %v; want nothing", runs, err)
	}
}
