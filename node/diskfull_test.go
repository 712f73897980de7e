package node

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cshare/cshare/internal/diskguard"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/runtime"
	"github.com/cshare/cshare/runtime/hw"
)

// mountTmpfs mounts a tmpfs of size (mount's syntax, "40m") at a new
// directory, unmounted when the test ends, or skips the test saying why.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("skipped: cannot mount a %s tmpfs at %s (%v); this test needs root (CAP_SYS_ADMIN)", size, dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fillUp writes a file at path until the filesystem is full, as another
// program would.
func fillUp(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 256<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v", path, err)
			}
			return
		}
	}
}

// TestDiskFullDegrades: a node whose data dir is on a 40 MiB filesystem
// that another file fills to the last byte goes on (no SIGBUS in Badger's
// memory-mapped files): it refuses a job submit with one line, its
// heartbeat says so (machine ls, on it and on another machine, shows
// "disk full"), it serves reads, takes no new item, and the two items it
// was running keep their results (exit 0, not -1) and their output. Once
// the file is removed it resumes by itself: the results reach the ledger,
// the job's other items run, and it takes writes again.
func TestDiskFullDegrades(t *testing.T) {
	mnt := mountTmpfs(t, "40m")
	m := &mesh{t: t, runs: newRunLog()}
	conf := func(name, yaml string) string {
		p := filepath.Join(t.TempDir(), name+".yaml")
		if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	dirs := []string{t.TempDir(), filepath.Join(mnt, "data")}
	confs := []string{
		conf("n0", "resources:\n  max_concurrent_jobs: 0\n"),
		conf("n1", "resources:\n  max_concurrent_jobs: 2\ndisk:\n  reserve: 8\n"),
	}
	for i := range 2 {
		name := fmt.Sprintf("n%d", i)
		mn := &meshNode{name: name, opts: Options{DataDir: dirs[i], API: "127.0.0.1:0", Listen: []string{"/ip4/127.0.0.1/tcp/0"},
			HeartbeatInterval: 250 * time.Millisecond, Name: name, NVML: hw.NoNVML{}, ConfigPath: confs[i], Logger: testLogger(name), DisableMDNS: true}}
		mn.drv = &recDriver{Fake: runtime.NewFake(), log: m.runs}
		mn.opts.Driver = mn.drv
		m.nodes = append(m.nodes, mn)
	}
	for i, err := range m.startAll() {
		if err != nil {
			t.Fatalf("start n%d: %v", i, err)
		}
	}
	t.Cleanup(m.close)
	for _, mn := range m.nodes {
		mn.drv.machine = mn.ID().String()
	}
	m.formOrg()
	n0, n1 := m.nodes[0], m.nodes[1]
	id1 := n1.ID().String()
	if _, err := os.Stat(filepath.Join(dirs[1], diskguard.BallastName)); err != nil {
		t.Fatalf("no ballast in the data dir: %v", err)
	}

	job := submit(t, n1.Node, api.JobSubmit{Name: "d", CPUs: 1, MaxCPUs: ptr(int64(2)), RangeStart: ptr(int64(1)), RangeEnd: ptr(int64(4))})
	var runs []runtime.RunID
	eventually(t, 30*time.Second, "two items running on n1", func() string {
		runs = n1.drv.Running()
		if len(runs) != 2 {
			return fmt.Sprintf("%d runs", len(runs))
		}
		return ""
	})

	// Another program fills the filesystem.
	fillUp(t, filepath.Join(mnt, "filler"))
	// The next submit (before the guard's poll has seen anything: this
	// was the SIGBUS) is refused, with one line.
	_, err := n1.jobs.SubmitJob(ctxT(t), api.JobSubmit{Name: "e", Cmd: []string{"true"}, CPUs: 1})
	want := regexp.MustCompile(`^disk full: \d+ MiB free in ` + regexp.QuoteMeta(dirs[1]) + `, cshare keeps 8 MiB$`)
	if err == nil || !want.MatchString(err.Error()) || statusCode(err) != http.StatusInsufficientStorage {
		t.Fatalf("submit on a full disk: %v (status %d); want %s, 507", err, statusCode(err), want)
	}
	diskFull := func(n *Node) (bool, error) {
		ms, err := n.orgs.Machines(ctxT(t))
		if err != nil {
			return false, err
		}
		for _, mi := range ms {
			if mi.ID == id1 {
				return mi.DiskFull, nil
			}
		}
		return false, fmt.Errorf("no machine %s", id1)
	}
	eventually(t, 30*time.Second, "n1 disk full in machine ls, on n1 and on n0", func() string {
		for _, mn := range m.nodes {
			if full, err := diskFull(mn.Node); err != nil || !full {
				return fmt.Sprintf("%s: disk full %v, %v", mn.name, full, err)
			}
		}
		return ""
	})

	// Still refused; reads are served.
	if _, err := n1.jobs.SubmitJob(ctxT(t), api.JobSubmit{Name: "e", Cmd: []string{"true"}, CPUs: 1}); err == nil || !want.MatchString(err.Error()) {
		t.Fatalf("second submit on a full disk: %v; want %s", err, want)
	}
	if jobs, err := n1.jobs.Jobs(ctxT(t)); err != nil || len(jobs) != 1 {
		t.Fatalf("jobs on a full disk: %d, %v", len(jobs), err)
	}
	if ji, err := n1.jobs.Job(ctxT(t), job.ID); err != nil || ji.ID != job.ID {
		t.Fatalf("job show on a full disk: %v", err)
	}

	// The running items end: their results are kept, and no new item
	// starts.
	refused := n1.disk.refused.Load()
	items := make([]int, len(runs))
	for i, r := range runs {
		sp, ok := n1.drv.Spec(r)
		if !ok {
			t.Fatalf("no spec of run %s", r)
		}
		items[i] = sp.Item
		if err := n1.drv.AppendLog(r, fmt.Appendf(nil, "out of run %d\n", i)); err != nil {
			t.Fatal(err)
		}
		if err := n1.drv.Complete(r, 0); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 30*time.Second, "both results held and new items refused", func() string {
		if k := n1.sched.Probe().PendingResults(); k != 2 {
			return fmt.Sprintf("%d results held", k)
		}
		if k := n1.disk.refused.Load() - refused; k < 2 {
			return fmt.Sprintf("%d item starts refused", k)
		}
		return ""
	})
	// A flush of the results now (the scheduler tries every 250 ms) is
	// refused and keeps them.
	n1.sched.Probe().Flush(ctxT(t))
	if k := n1.sched.Probe().PendingResults(); k != 2 {
		t.Fatalf("%d results held after a flush on a full disk; want 2", k)
	}
	if k := n1.drv.Started(); k != 2 {
		t.Fatalf("%d runs started on a full disk; want the 2 from before", k)
	}
	for _, it := range itemsOf(t, n0.Node, job.ID) {
		if it.Status != "pending" {
			t.Fatalf("item %d is %s in the ledger while n1's disk is full: %+v", it.Item, it.Status, it)
		}
	}

	// Room again: n1 resumes by itself.
	if err := os.Remove(filepath.Join(mnt, "filler")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "n1 resumed, in machine ls on n1 and on n0", func() string {
		for _, mn := range m.nodes {
			if full, err := diskFull(mn.Node); err != nil || full {
				return fmt.Sprintf("%s: disk full %v, %v", mn.name, full, err)
			}
		}
		return ""
	})
	if _, err := os.Stat(filepath.Join(dirs[1], diskguard.BallastName)); err != nil {
		t.Fatalf("resumed without a ballast: %v", err)
	}
	eventually(t, 30*time.Second, "the held results in the ledger, and the other items running", func() string {
		done := 0
		for _, it := range itemsOf(t, n0.Node, job.ID) {
			if it.Status == "done" {
				done++
			}
		}
		if done != 2 {
			return fmt.Sprintf("%d items done", done)
		}
		if k := len(n1.drv.Running()); k != 2 {
			return fmt.Sprintf("%d runs", k)
		}
		return ""
	})
	for _, r := range n1.drv.Running() {
		if err := n1.drv.Complete(r, 0); err != nil {
			t.Fatal(err)
		}
	}
	m.waitJobDone(30*time.Second, job.ID)
	for _, mn := range m.nodes {
		for _, it := range itemsOf(t, mn.Node, job.ID) {
			if it.Code != 0 || len(it.Runs) != 1 || it.Runs[0].ExitCode != 0 || it.Machine != id1 {
				t.Fatalf("%s: item %d: %+v; want one run on n1 with exit 0", mn.name, it.Item, it)
			}
		}
	}
	// The output held while the disk was full was kept once it had room.
	for i, item := range items {
		out, err := n1.jobs.JobLogs(ctxT(t), job.ID, int64(item))
		if w := fmt.Sprintf("out of run %d\n", i); err != nil || !strings.HasSuffix(string(out), w) {
			t.Fatalf("output of item %d: %q, %v; want it to end in %q", item, out, err, w)
		}
	}
	// Writes are taken again.
	submit(t, n1.Node, api.JobSubmit{Name: "f", CPUs: 1, RangeStart: ptr(int64(1)), RangeEnd: ptr(int64(1))})
	m.waitConverged(30 * time.Second)
	// And the store closes and opens again with everything in it.
	before := stateHash(n1.Node)
	m.stop(1)
	m.restart(1)
	if after := stateHash(m.nodes[1].Node); after != before {
		t.Fatalf("state hash %s after a restart, %s before", after, before)
	}
}

func itemsOf(t *testing.T, n *Node, job string) []api.ItemInfo {
	t.Helper()
	items, err := jobItemsAny(n, job)
	if err != nil {
		t.Fatalf("items of %s: %v", job, err)
	}
	return items
}
