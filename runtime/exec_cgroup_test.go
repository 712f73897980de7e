package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

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
