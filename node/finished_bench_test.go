package node

import (
	"context"
	"errors"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/replica"
	"github.com/cshare/cshare/node/api"
	cshruntime "github.com/cshare/cshare/runtime"
)

// BenchmarkFinishedItemsHeap (issue 29): one node with 8 slots of the fake
// driver runs 1,000,000 items (CSHARE_FINISHED_ITEMS changes it) of short
// jobs of 10,000 items, one after the other, through the node's real path:
// the scheduler and dispatch, results batched into job.results entries,
// the replica, checkpoints (ledger.checkpoint_every=100, written by the
// node as an admin machine), finished jobs leaving the State. After each
// job the benchmark calls Replica.Compact (the Log starts again at its
// newest checkpoint):
// it stands in for the Log keeping entries below a checkpoint on disk only
// (issue 29's "logmem", not built here). It reports the heap in use after
// a GC before the first item and after the last (heap-growth-MiB, at most
// 50 by the issue), B/finished-item over the whole run, and
// slope-B/finished-item over the second half (what each item leaves
// behind, the warm-up left out). One op whatever b.N.
// CSHARE_HEAP_PROFILE=PREFIX writes heap profiles PREFIX.before, .mid and
// .after (go tool pprof -diff_base PREFIX.mid ... PREFIX.after).
func BenchmarkFinishedItemsHeap(b *testing.B) {
	items := 1_000_000
	if v := os.Getenv("CSHARE_FINISHED_ITEMS"); v != "" {
		k, err := strconv.Atoi(v)
		if err != nil || k < 1 {
			b.Fatalf("CSHARE_FINISHED_ITEMS: want a positive integer, got %q", v)
		}
		items = k
	}
	const perJob = 10_000
	f := cshruntime.NewFake()
	f.SetDuration(0)
	n := benchNode(b, f, "resources: {max_concurrent_jobs: 8}\n", "/ip4/127.0.0.1/tcp/0")
	ctx := context.Background()
	if _, err := n.orgs.CreateOrg(ctx, api.OrgCreate{Name: "bench"}); err != nil {
		b.Fatal(err)
	}
	if _, err := n.orgs.SetSettings(ctx, api.SettingsRequest{Set: map[string]string{"ledger.checkpoint_every": "100"}}); err != nil {
		b.Fatal(err)
	}
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	profile := func(name string) { // CSHARE_HEAP_PROFILE=PREFIX: PREFIX.before and .after
		if p := os.Getenv("CSHARE_HEAP_PROFILE"); p != "" {
			fh, err := os.Create(p + "." + name)
			if err != nil {
				b.Fatal(err)
			}
			defer fh.Close()
			if err := pprof.WriteHeapProfile(fh); err != nil {
				b.Fatal(err)
			}
		}
	}
	compact := func() {
		if err := n.rep.Compact(); err != nil && !errors.Is(err, replica.ErrNoCheckpoint) {
			b.Fatalf("compact: %v", err)
		}
	}
	before := heap()
	profile("before")
	var mid uint64
	t0 := time.Now()
	b.ResetTimer()
	done := 0
	for done < items {
		k := min(perJob, items-done)
		ji, err := n.jobs.SubmitJob(ctx, api.JobSubmit{Driver: "exec", Cmd: []string{"true"},
			RangeStart: ptr[int64](1), RangeEnd: ptr[int64](int64(k)), MaxCPUs: ptr[int64](8)})
		if err != nil {
			b.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Minute)
		for {
			j, err := jobOf(n, ji.ID)
			if err == nil && j.State == ledger.JobDone {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("job %s not done in 10 minutes: %+v", ji.ID, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
		done += k
		compact()
		if mid == 0 && done >= items/2 {
			mid = heap()
			profile("mid")
			b.Logf("half way: %d items in %s", done, time.Since(t0).Round(time.Second))
		}
	}
	b.StopTimer()
	elapsed := time.Since(t0)
	// The last jobs leave the State at the next checkpoint, written here
	// rather than after checkpoint_every more entries.
	if _, err := n.rep.WriteCheckpoint(ctx); err != nil && !errors.Is(err, replica.ErrNoCheckpoint) {
		b.Fatalf("checkpoint: %v", err)
	}
	deadline := time.Now().Add(time.Minute)
	for archivedAll(n) != "" && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	compact()
	after := heap()
	profile("after")
	b.Logf("%d items in %s (%.0f items/s); %s", items, elapsed.Round(time.Second), float64(items)/elapsed.Seconds(), archivedAll(n))
	growth := float64(after) - float64(before)
	b.ReportMetric(float64(before)/(1<<20), "heap-before-MiB")
	b.ReportMetric(float64(after)/(1<<20), "heap-after-MiB")
	b.ReportMetric(growth/(1<<20), "heap-growth-MiB")
	b.ReportMetric(growth/float64(items), "B/finished-item")
	if mid > 0 {
		b.ReportMetric((float64(after)-float64(mid))/float64(items-items/2), "slope-B/finished-item")
	}
	b.ReportMetric(float64(items)/elapsed.Seconds(), "items/s")
	b.ReportMetric(0, "ns/op")
}

// archivedAll says which finished job of n has not left its State yet.
func archivedAll(n *Node) string {
	var msg string
	n.rep.View(func(st *ledger.State) {
		for _, j := range st.Jobs {
			if j.Finished() && j.Archived == nil {
				msg = "job " + j.ID + " has not left the State"
			}
		}
	})
	return msg
}
