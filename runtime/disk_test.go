package runtime

import (
	"context"
	"testing"
	"time"
)

// TestDiskUsage: a run that writes 20 MiB shows it in DiskUsage: the exec
// driver's work directory, and the docker container's writable layer.
func TestDiskUsage(t *testing.T) {
	const cmd = "dd if=/dev/zero of=big bs=1048576 count=20 2>/dev/null; touch done; sleep 30"
	poll := func(t *testing.T, du DiskUser, id RunID) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			n, err := du.DiskUsage(context.Background(), id)
			if err == nil && n >= 20<<20 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("DiskUsage = %d, %v; want at least 20 MiB", n, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	t.Run("exec", func(t *testing.T) {
		root := t.TempDir()
		e, _ := newTestExec(t, root)
		stopAll(t, root)
		id, err := e.Start(waitCtx(t), execSpec(1, "sh", "-c", cmd))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = e.Stop(context.Background(), id, 0); _ = e.Remove(context.Background(), id) }()
		poll(t, e, id)
	})
	t.Run("docker", func(t *testing.T) {
		d, cli := dockerForTest(t)
		job := testJob(t, cli)
		s := dockerSpec(job, 1, "sh", "-c", "cd /tmp && "+cmd)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		id, err := d.Start(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		poll(t, d, id)
	})
}
