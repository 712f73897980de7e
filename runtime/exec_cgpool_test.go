package runtime

import (
	"testing"
)

// TestExecCgroupReuse runs, on this machine's real cgroups, three runs one
// after another that share one pooled group: a run killed at its memory
// cap, then a run without limits that uses more memory than that cap (the
// cap was lifted, and the earlier OOM kill is not counted against it),
// then a run with limits (written again).
func TestExecCgroupReuse(t *testing.T) {
	root := t.TempDir()
	e, _ := newTestExec(t, root)
	stopAll(t, root)
	if ok, why := e.LimitsEnforced(); !ok {
		t.Skip("no cgroups here: " + why)
	}
	ctx := waitCtx(t)
	group := func(id RunID) string {
		st, err := e.loadState(id)
		if err != nil {
			t.Fatal(err)
		}
		if st.Cgroup != "" {
			return st.Cgroup
		}
		return st.CgroupsV1["memory"]
	}
	run := func(s Spec) (ExitStatus, string) {
		t.Helper()
		id, es := startWait(t, e, ctx, s)
		g := group(id)
		if err := e.Remove(ctx, id); err != nil {
			t.Fatal(err)
		}
		return es, g
	}
	eat := `x=$(head -c 40000000 /dev/zero | tr '\0' a); echo ${#x}`

	s := execSpec(1, "sh", "-c", eat)
	s.MemoryBytes = 16 << 20
	es, g1 := run(s)
	if es.Code == 0 || !es.OOMKilled {
		t.Fatalf("40 MB under a 16 MiB cap: %+v; want killed, OOMKilled", es)
	}
	es, g2 := run(execSpec(2, "sh", "-c", eat))
	if g2 != g1 {
		t.Errorf("the second run's group %s, want the first's %s (reused)", g2, g1)
	}
	if es.Code != 0 || es.OOMKilled {
		t.Errorf("40 MB without a cap, in the group a run was OOM-killed in: %+v; want exit 0", es)
	}
	s = execSpec(3, "true")
	s.NanoCPUs, s.MemoryBytes, s.MemoryReservationBytes, s.PidsLimit = 5e8, 64<<20, 32<<20, 50
	id, _ := startWait(t, e, ctx, s)
	st, _ := e.loadState(id)
	if group(id) != g1 {
		t.Errorf("the third run's group %s, want %s (reused)", group(id), g1)
	}
	if len(st.CgroupsV1) > 0 {
		assertCgroupV1Files(t, st.CgroupsV1)
	} else {
		assertCgroupFiles(t, st.Cgroup)
	}
	if err := e.Remove(ctx, id); err != nil {
		t.Fatal(err)
	}
}
