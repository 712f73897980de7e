package node

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/runtime"
)

// gapDriver records, per instance, when each run's Wait returned (the
// node learns that the item ended) and when the next Start of that
// instance returned (the next item's process runs): the per-item overhead
// of one slot, node and driver together. It also counts finished runs.
type gapDriver struct {
	runtime.Driver
	mu       sync.Mutex
	ended    map[string]time.Time // instance -> its last run's Wait return
	runInst  map[runtime.RunID]string
	gaps     []time.Duration // Wait return -> next Start return, same instance
	nodeGaps []time.Duration // Wait return -> next Start call, same instance
	starts   []time.Duration // Start call -> Start return
	logs     []time.Duration // Logs call -> Logs return (the node reads them after Wait, before the next Start)
	finished int
	spec     runtime.Spec // the last Start's
}

func newGapDriver(d runtime.Driver) *gapDriver {
	return &gapDriver{Driver: d, ended: map[string]time.Time{}, runInst: map[runtime.RunID]string{}}
}

func (d *gapDriver) Start(ctx context.Context, s runtime.Spec) (runtime.RunID, error) {
	t0 := time.Now()
	id, err := d.Driver.Start(ctx, s)
	t1 := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.starts = append(d.starts, t1.Sub(t0))
	d.spec = s
	if end, ok := d.ended[s.Instance]; ok {
		d.gaps = append(d.gaps, t1.Sub(end))
		d.nodeGaps = append(d.nodeGaps, t0.Sub(end))
		delete(d.ended, s.Instance)
	}
	if err == nil {
		d.runInst[id] = s.Instance
	}
	return id, err
}

func (d *gapDriver) Wait(ctx context.Context, id runtime.RunID) (runtime.ExitStatus, error) {
	st, err := d.Driver.Wait(ctx, id)
	t := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if inst, ok := d.runInst[id]; ok && err == nil {
		d.ended[inst] = t
		d.finished++
		delete(d.runInst, id)
	}
	return st, err
}

func (d *gapDriver) Logs(ctx context.Context, id runtime.RunID) ([]byte, error) {
	t0 := time.Now()
	out, err := d.Driver.Logs(ctx, id)
	t := time.Since(t0)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.logs = append(d.logs, t)
	return out, err
}

func (d *gapDriver) done() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.finished
}

// reset forgets what was recorded (between the benchmark's jobs).
func (d *gapDriver) reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	clear(d.ended)
	d.gaps, d.nodeGaps, d.starts, d.logs, d.finished = nil, nil, nil, nil, 0
}

// cpuUsed is the CPU time (user and system) this process and its reaped
// children have used so far.
func cpuUsed() time.Duration {
	var self, kids syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(self.Utime) + tv(self.Stime) + tv(kids.Utime) + tv(kids.Stime)
}

func p50ms(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[len(s)/2].Microseconds()) / 1000
}

// benchItems is CSHARE_BENCH_ITEMS, or def when it is unset.
func benchItems(b *testing.B, def int) int {
	v := os.Getenv("CSHARE_BENCH_ITEMS")
	if v == "" {
		return def
	}
	k, err := strconv.Atoi(v)
	if err != nil || k < 1 {
		b.Fatalf("CSHARE_BENCH_ITEMS: want a positive integer, got %q", v)
	}
	return k
}

// agendaNode is one node over drv with slots slots and an org of its own.
func agendaNode(b *testing.B, drv *gapDriver, slots int) *Node {
	n := benchNode(b, drv, "resources: {max_concurrent_jobs: "+strconv.Itoa(slots)+"}\nruntime: {exec: true}\n", "/ip4/127.0.0.1/tcp/0")
	if _, err := n.orgs.CreateOrg(context.Background(), api.OrgCreate{Name: "bench"}); err != nil {
		b.Fatal(err)
	}
	return n
}

// agendaRun is what runAgenda recorded over one or more jobs.
type agendaRun struct {
	items                        int           // items run, all jobs
	ran, done, cpu               time.Duration // submission to the last item's end; to the job done; CPU used to the job done
	gaps, nodeGaps, starts, logs []time.Duration
}

// runAgenda submits sub, a job of items items, on n, waits until drv saw
// them all end and the job is done in the ledger, and adds what it took to r.
func runAgenda(b *testing.B, n *Node, drv *gapDriver, sub api.JobSubmit, items int, r *agendaRun) {
	drv.reset()
	ctx := context.Background()
	c0 := cpuUsed()
	t0 := time.Now()
	sub.RangeStart, sub.RangeEnd = ptr[int64](1), ptr(int64(items))
	ji, err := n.jobs.SubmitJob(ctx, sub)
	if err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for drv.done() < items {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d items ran in 5 minutes", drv.done(), items)
		}
		time.Sleep(time.Millisecond)
	}
	r.ran += time.Since(t0)
	for {
		j, err := jobOf(n, ji.ID)
		if err == nil && j.State == ledger.JobDone {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("job not done in 5 minutes")
		}
		time.Sleep(time.Millisecond)
	}
	r.done += time.Since(t0)
	r.cpu += cpuUsed() - c0
	r.items += items
	drv.mu.Lock()
	r.gaps, r.nodeGaps, r.starts = append(r.gaps, drv.gaps...), append(r.nodeGaps, drv.nodeGaps...), append(r.starts, drv.starts...)
	r.logs = append(r.logs, drv.logs...)
	drv.mu.Unlock()
}

// report reports items/s, done-items/s, gap-p50-ms, node-gap-p50-ms,
// start-p50-ms, logs-p50-ms and cpu-ms/item (see
// BenchmarkAgendaThroughput).
func (r *agendaRun) report(b *testing.B) {
	total := float64(r.items)
	b.ReportMetric(total/r.ran.Seconds(), "items/s")
	b.ReportMetric(total/r.done.Seconds(), "done-items/s")
	b.ReportMetric(p50ms(r.gaps), "gap-p50-ms")
	b.ReportMetric(p50ms(r.nodeGaps), "node-gap-p50-ms")
	b.ReportMetric(p50ms(r.starts), "start-p50-ms")
	b.ReportMetric(p50ms(r.logs), "logs-p50-ms")
	b.ReportMetric(float64(r.cpu.Microseconds())/1000/total, "cpu-ms/item")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkAgendaThroughput runs, per op, one job of 1,000 items of `true`
// on one node with 8 exec slots and reports items/s (submission to the
// last item's end on this node), done-items/s (submission to the job done
// in the ledger: every result written), and xargs-items/s for
// `seq 1000 | xargs -P8 -I{} sh -c true` timed in the same op: the
// machine's own rate. gap-p50-ms is the per-item overhead on one slot,
// from the driver's Wait returning to the next item's process started
// (Start returned); node-gap-p50-ms the same up to the Start call (what
// the node adds); start-p50-ms the exec driver's Start itself;
// logs-p50-ms its Logs, which the node reads in that gap.
// cpu-ms/item is the CPU time per item of this process and its children
// (the runs) from submission to the job done; xargs-cpu-ms/item the same
// for xargs and its children: on a busy machine the rate follows these.
// CSHARE_BENCH_ITEMS changes the item count.
func BenchmarkAgendaThroughput(b *testing.B) {
	if _, err := exec.LookPath("xargs"); err != nil {
		b.Skip("no xargs")
	}
	items := benchItems(b, 1000)
	ex := runtime.NewExec(b.TempDir(), nil)
	b.Cleanup(ex.Release) // after the node's Close: gapDriver hides Release from it
	drv := newGapDriver(ex)
	n := agendaNode(b, drv, 8)
	var r agendaRun
	var xargs, xargsCPU time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		runAgenda(b, n, drv, api.JobSubmit{Driver: "exec", Cmd: []string{"true"}, MaxCPUs: ptr[int64](8)}, items, &r)
		c1 := cpuUsed()
		x0 := time.Now()
		cmd := exec.Command("sh", "-c", "seq "+strconv.Itoa(items)+" | xargs -P8 -I{} sh -c true")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("xargs: %v: %s", err, out)
		}
		xargs += time.Since(x0)
		xargsCPU += cpuUsed() - c1
	}
	b.StopTimer()
	r.report(b)
	b.ReportMetric(float64(r.items)/xargs.Seconds(), "xargs-items/s")
	b.ReportMetric(float64(xargsCPU.Microseconds())/1000/float64(r.items), "xargs-cpu-ms/item")
}
