package node

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/p2p"
	"github.com/cshare/cshare/runtime"
)

// timedDriver records when the node hands a run to the driver.
type timedDriver struct {
	runtime.Driver
	mu     sync.Mutex
	starts map[string]chan time.Time // job -> first Start call time
}

func (d *timedDriver) expect(job string) chan time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.starts == nil {
		d.starts = map[string]chan time.Time{}
	}
	if d.starts[job] == nil {
		d.starts[job] = make(chan time.Time, 1)
	}
	return d.starts[job]
}

func (d *timedDriver) Start(ctx context.Context, s runtime.Spec) (runtime.RunID, error) {
	now := time.Now()
	select {
	case d.expect(s.Job) <- now:
	default:
	}
	return d.Driver.Start(ctx, s)
}

func benchNode(b *testing.B, drv runtime.Driver, yaml string, listen string) *Node {
	return benchNodeInterval(b, drv, yaml, listen, time.Second)
}

func benchNodeInterval(b *testing.B, drv runtime.Driver, yaml string, listen string, interval time.Duration) *Node {
	b.Helper()
	dir := b.TempDir()
	cfg := filepath.Join(dir, "node.yaml")
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		b.Fatal(err)
	}
	n, err := Start(context.Background(), Options{DataDir: filepath.Join(dir, "data"), API: "127.0.0.1:0",
		Listen: []string{listen}, ConfigPath: cfg, HeartbeatInterval: interval, Driver: drv, NVML: noGPU{}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = n.Close() })
	return n
}

// BenchmarkInstanceStart measures, on one node, the time from job submission
// (API call: validation, signed entry, durable write, fold) to the node
// calling the driver's Start for its first item: the overhead cshare adds
// above the driver's own start. Sub-benchmarks: exec and docker drivers.
func BenchmarkInstanceStart(b *testing.B) {
	run := func(b *testing.B, inner runtime.Driver, sub api.JobSubmit) {
		d := &timedDriver{Driver: inner}
		n := benchNode(b, d, "resources: {max_concurrent_jobs: 4}\nruntime: {exec: true}\n", "/ip4/127.0.0.1/tcp/0")
		ctx := context.Background()
		if _, err := n.CreateOrg(ctx, api.OrgCreate{Name: "bench"}); err != nil {
			b.Fatal(err)
		}
		var lat []time.Duration
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			ji, err := n.SubmitJob(ctx, sub)
			if err != nil {
				b.Fatal(err)
			}
			select {
			case t1 := <-d.expect(ji.ID):
				lat = append(lat, t1.Sub(t0))
			case <-time.After(30 * time.Second):
				b.Fatal("instance did not start")
			}
			b.StopTimer()
			if _, err := n.CancelJob(ctx, ji.ID); err != nil {
				b.Fatal(err)
			}
			waitIdle(b, n)
			b.StartTimer()
		}
		b.StopTimer()
		reportLatency(b, lat)
	}
	b.Run("exec", func(b *testing.B) {
		run(b, runtime.NewExec(b.TempDir(), nil), api.JobSubmit{Driver: "exec", Cmd: []string{"sleep", "5"}, Range: "1-1"})
	})
	b.Run("docker", func(b *testing.B) {
		if exec.Command("docker", "image", "inspect", runtime.TestImage).Run() != nil {
			b.Skip("no Docker engine or no test image (make testimage)")
		}
		d, err := runtime.NewDockerFromEnv()
		if err != nil {
			b.Skip(err)
		}
		run(b, d, api.JobSubmit{Driver: "docker", Image: runtime.TestImage, Cmd: []string{"sleep", "5"}, Range: "1-1"})
	})
}

// BenchmarkRemoteStart measures, on a two-node mesh, the time from a job's
// submission on node A (which offers no slots) to node B calling its
// driver's Start: the overhead above the driver's own start for the first
// instance on a remote node (gossip of the entry, fetch, fold, plan, start).
func BenchmarkRemoteStart(b *testing.B) {
	ctx := context.Background()
	fa, fb := runtime.NewFake(), &timedDriver{Driver: runtime.NewFake()}
	a := benchNode(b, fa, "resources: {max_concurrent_jobs: 0}\n", "/ip4/127.0.0.1/tcp/0")
	bn := benchNode(b, fb, "resources: {max_concurrent_jobs: 4}\n", "/ip4/127.0.0.1/tcp/0")
	key, err := a.CreateOrg(ctx, api.OrgCreate{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := bn.Join(ctx, api.JoinRequest{OrgKey: key.Key}); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := a.MachineAction(ctx, bn.ID().String(), "approve"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("could not approve node B")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for {
		if s := a.machineStatus(bn.ID().String(), time.Now()); s == StatusAvailable {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("node B never became available on A")
		}
		time.Sleep(20 * time.Millisecond)
	}
	var lat []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		ji, err := a.SubmitJob(ctx, api.JobSubmit{Driver: "exec", Cmd: []string{"true"}, Range: "1-1"})
		if err != nil {
			b.Fatal(err)
		}
		select {
		case t1 := <-fb.expect(ji.ID):
			lat = append(lat, t1.Sub(t0))
		case <-time.After(30 * time.Second):
			b.Fatal("remote instance did not start")
		}
		b.StopTimer()
		if _, err := a.CancelJob(ctx, ji.ID); err != nil {
			b.Fatal(err)
		}
		waitIdle(b, bn)
		b.StartTimer()
	}
	b.StopTimer()
	reportLatency(b, lat)
}

// waitIdle waits until the node runs no instance (outside the timed part).
func waitIdle(b *testing.B, n *Node) {
	deadline := time.Now().Add(30 * time.Second)
	for n.runningJobs() > 0 {
		if time.Now().After(deadline) {
			b.Fatal("instances did not stop")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func reportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p := func(q float64) float64 {
		return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(p(0.5), "p50-ms")
	b.ReportMetric(p(0.99), "p99-ms")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkPlacement100Nodes measures placement throughput: instances started
// per second across a 100-node in-process mesh with the fake driver. One op
// submits a job as wide as the mesh (every slot; ten agenda items per slot)
// on node 0 and waits until every instance has been started by its machine.
// CSHARE_BENCH_NODES and CSHARE_BENCH_SLOTS change the mesh (100 machines of
// 20 slots by default); CSHARE_BENCH_CPUPROFILE profiles the measured window.
func BenchmarkPlacement100Nodes(b *testing.B) {
	nodes, slots := 100, 20
	if v, err := strconv.Atoi(os.Getenv("CSHARE_BENCH_NODES")); err == nil && v > 1 {
		nodes = v
	}
	if v, err := strconv.Atoi(os.Getenv("CSHARE_BENCH_SLOTS")); err == nil && v > 0 {
		slots = v // e.g. 200: Nomad's C1M density (1M containers on 5,000 nodes)
	}
	listen := "/ip4/127.0.0.1/tcp/0"
	if v := os.Getenv("CSHARE_BENCH_LISTEN"); v != "" {
		listen = v
	}
	ctx := context.Background()
	drivers := make([]*countDriver, nodes)
	ns := make([]*Node, nodes)
	var total countTotal
	for i := range ns {
		drivers[i] = &countDriver{Driver: runtime.NewFake(), total: &total}
		// A long interval: 100 nodes share 2 cores here, and a machine must
		// not flap offline while the mesh forms.
		ns[i] = benchNodeInterval(b, drivers[i], fmt.Sprintf("resources: {max_concurrent_jobs: %d}\n", slots), listen, 10*time.Second)
	}
	key, err := ns[0].CreateOrg(ctx, api.OrgCreate{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := ns[0].SetSettings(ctx, api.SettingsRequest{Set: map[string]string{"smartshare.max_cpus_limit": "100000"}}); err != nil {
		b.Fatal(err)
	}
	for _, n := range ns[1:] {
		if _, err := n.Join(ctx, api.JoinRequest{OrgKey: key.Key}); err != nil {
			b.Fatal(err)
		}
	}
	deadline := time.Now().Add(3 * time.Minute)
	for _, n := range ns[1:] {
		for {
			_, err := ns[0].MachineAction(ctx, n.ID().String(), "approve")
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("approve: %v", err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for idx, n := range ns {
		for {
			online := 0
			for _, m := range ns {
				if s := n.machineStatus(m.ID().String(), time.Now()); s == StatusAvailable || s == StatusBusy {
					online++
				}
			}
			if online == nodes {
				break
			}
			if time.Now().After(deadline) {
				st, _ := n.Status(ctx)
				b.Fatalf("node %d sees %d of %d machines online (peers %d, entries %d, status %s, org %q)", idx, online, nodes, st.Peers, st.Entries, st.Status, st.Org)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	width := nodes * slots
	var started time.Duration
	// Machines dial every machine whose heartbeat they see; on 2 shared
	// cores that takes minutes for 100 of them, so finish the full mesh here
	// (dialling is not what is measured).
	var dials sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i, a := range ns {
		for _, c := range ns[i+1:] {
			if a.host.LibP2P().Network().Connectedness(c.ID()) == network.Connected {
				continue
			}
			dials.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; dials.Done() }()
				cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				_ = a.host.Connect(cctx, c.host.Addrs())
			}()
		}
	}
	dials.Wait()
	var conns []int
	for _, n := range ns {
		conns = append(conns, len(n.host.LibP2P().Network().Conns()))
	}
	sort.Ints(conns)
	b.Logf("connections per node: min %d, median %d, max %d", conns[0], conns[len(conns)/2], conns[len(conns)-1])
	if stop := startProfile(b, os.Getenv("CSHARE_BENCH_IDLEPROFILE")); stop != nil {
		// What the formed mesh does while nothing is submitted.
		time.Sleep(20 * time.Second)
		stop()
	}
	waitQuiet(b)
	waitSameLedger(b, ns)
	// A profile of the measured window only (go test's -cpuprofile would be
	// dominated by forming the mesh).
	profile := os.Getenv("CSHARE_BENCH_CPUPROFILE") // one profile per placement: FILE.1, FILE.2, ...
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		base := total.get()
		accepted := func() (hb, heads float64) {
			for _, n := range ns {
				hb += n.host.Accepted(p2p.KindHeartbeat)
				heads += n.host.Accepted(p2p.KindLedger)
			}
			return hb / float64(nodes), heads / float64(nodes)
		}
		hb0, heads0 := accepted()
		var hookMu sync.Mutex
		got, took := map[*Node]time.Duration{}, map[*Node]time.Duration{}
		var profStop func()
		if profile != "" {
			profStop = startProfile(b, fmt.Sprintf("%s.%d", profile, i+1))
		}
		t0 := time.Now()
		hook := func(n *Node, pushed int, before bool) {
			if pushed == 0 {
				return
			}
			hookMu.Lock()
			defer hookMu.Unlock()
			m := took
			if before {
				m = got
			}
			if _, ok := m[n]; !ok {
				m[n] = time.Since(t0)
			}
		}
		testHookHeads.Store(&hook)
		submitted := make(chan struct{})
		placed := make(chan struct{})
		if f := os.Getenv("CSHARE_BENCH_STACKS"); f != "" {
			// A slow placement: where every goroutine is, 1.5 s in
			// (aggregated: identical stacks are counted once).
			go func() {
				select {
				case <-placed:
				case <-time.After(1500 * time.Millisecond):
					w, _ := os.Create(fmt.Sprintf("%s.%d", f, i+1))
					_ = pprof.Lookup("goroutine").WriteTo(w, 1)
					_ = w.Close()
				}
			}()
		}
		ji, err := ns[0].SubmitJob(ctx, api.JobSubmit{Driver: "exec", Cmd: []string{"true"}, Range: fmt.Sprintf("1-%d", 10*width),
			CPUs: int64(width), MaxCPUs: "0"})
		close(submitted)
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("submit returned after %v", time.Since(t0))
		logf := func(format string, args ...any) { // to stderr too: go test keeps only the last run's log
			b.Logf(format, args...)
			fmt.Fprintf(os.Stderr, "  "+format+"\n", args...)
		}
		marks := map[int]time.Duration{}
		known := make([]time.Duration, len(ns))
		for total.get()-base < width {
			for k, n := range ns {
				// TryRLock: waiting for a busy node's lock would stall
				// this loop, and every mark below with it.
				if known[k] == 0 && n.mu.TryRLock() {
					if n.lg.State().Jobs[ji.ID] != nil {
						known[k] = time.Since(t0)
					}
					n.mu.RUnlock()
				}
			}
			if time.Since(t0) > 2*time.Minute {
				b.Fatalf("only %d of %d instances started", total.get()-base, width)
			}
			got := total.get() - base
			for _, q := range []int{1, 50, 90, 99} {
				if _, ok := marks[q]; !ok && got*100 >= q*width {
					marks[q] = time.Since(t0)
				}
			}
			time.Sleep(time.Millisecond)
		}
		var firsts []time.Duration
		for _, d := range drivers {
			d.first.mu.Lock()
			firsts = append(firsts, d.first.t.Sub(t0))
			d.first.t = time.Time{}
			d.first.mu.Unlock()
		}
		sort.Slice(firsts, func(i, j int) bool { return firsts[i] < firsts[j] })
		sort.Slice(known, func(i, j int) bool { return known[i] < known[j] })
		testHookHeads.Store(nil)
		hookMu.Lock()
		med := func(m map[*Node]time.Duration) (time.Duration, time.Duration, int) {
			var ds []time.Duration
			for _, d := range m {
				ds = append(ds, d)
			}
			if len(ds) == 0 {
				return 0, 0, 0
			}
			sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
			return ds[len(ds)/2], ds[len(ds)-1], len(ds)
		}
		gm, gx, gn := med(got)
		tm, tx, _ := med(took)
		hookMu.Unlock()
		logf("pushed entry delivered to %d nodes: median %v, max %v; taken: median %v, max %v", gn, gm, gx, tm, tx)
		logf("job known per node: min %v, median %v, max %v", known[0], known[len(known)/2], known[len(known)-1])
		logf("first start per node: min %v, median %v, max %v", firsts[0], firsts[len(firsts)/2], firsts[len(firsts)-1])
		logf("instances started: 1%% after %v, 50%% %v, 90%% %v, 99%% %v, all %v", marks[1], marks[50], marks[90], marks[99], time.Since(t0))
		started += time.Since(t0)
		close(placed)
		b.StopTimer()
		hbIn, _ := accepted()
		fmt.Fprintf(os.Stderr, "placement %d: %d instances on %d machines in %v (%.0f/s); job known by all after %v; %.0f heartbeats per machine meanwhile\n",
			i+1, width, nodes, time.Since(t0).Round(time.Millisecond), float64(width)/time.Since(t0).Seconds(), known[len(known)-1].Round(time.Millisecond), hbIn-hb0)
		if profStop != nil {
			profStop()
		}
		drops := map[string]float64{}
		for _, n := range ns {
			for _, r := range []string{p2p.DropValidationQueue, p2p.DropThrottled, p2p.DropOutbound, p2p.DropUndeliverable} {
				drops[r] += n.host.Dropped(r)
			}
		}
		b.Logf("gossip drops so far (all nodes): %v", drops)
		hb1, heads1 := accepted()
		b.Logf("messages accepted per node until every instance started: %.0f heartbeats, %.0f heads announcements", hb1-hb0, heads1-heads0)
		if i == b.N-1 {
			break // the mesh is torn down now: no need to wait for it to settle
		}
		if _, err := ns[0].CancelJob(ctx, ji.ID); err != nil {
			b.Fatal(err)
		}
		for _, n := range ns {
			waitIdle(b, n)
		}
		waitQuiet(b)
		waitSameLedger(b, ns)
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(width*b.N)/started.Seconds(), "instances/s")
}

// startProfile starts a CPU profile into file f and returns what stops it;
// nil when f is "".
func startProfile(b *testing.B, f string) func() {
	if f == "" {
		return nil
	}
	w, err := os.Create(f)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(w); err != nil {
		b.Fatal(err)
	}
	return func() { pprof.StopCPUProfile(); _ = w.Close() }
}

// waitSameLedger waits (up to two minutes) until every node has folded the
// same entries: a placement measured while some node still lacks an earlier
// entry measures the repair of that gap (the next heartbeat's heads).
func waitSameLedger(b *testing.B, ns []*Node) {
	b.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		hashes := map[string]int{}
		for _, n := range ns {
			hashes[stateHash(n)]++
		}
		if len(hashes) == 1 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("nodes disagree on the ledger after 2 minutes: %v", hashes)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitQuiet waits (up to two minutes) until the mesh is idle: the process
// uses under a fifth of a core for three seconds in a row. A mesh that has just formed is
// still busy (syncs, dials, the first heartbeats of every machine), and a
// placement measured then measures that too.
func waitQuiet(b *testing.B) {
	b.Helper()
	cpu := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	deadline := time.Now().Add(2 * time.Minute)
	quiet := 0
	for {
		c0, t0 := cpu(), time.Now()
		time.Sleep(time.Second)
		use := float64(cpu()-c0) / float64(time.Since(t0))
		if quiet++; use >= 0.2 {
			quiet = 0
		}
		// Three quiet seconds in a row: one can be a lull in the churn of
		// a mesh that is still settling.
		if quiet == 3 || time.Now().After(deadline) {
			b.Logf("mesh idle: %.2f cores busy", use)
			return
		}
	}
}

type countTotal struct {
	mu sync.Mutex
	n  int
}

func (c *countTotal) get() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

type countDriver struct {
	runtime.Driver
	total *countTotal
	first atomicTime
}

type atomicTime struct {
	mu sync.Mutex
	t  time.Time
}

func (d *countDriver) Start(ctx context.Context, s runtime.Spec) (runtime.RunID, error) {
	d.total.mu.Lock()
	d.total.n++
	d.total.mu.Unlock()
	d.first.mu.Lock()
	if d.first.t.IsZero() {
		d.first.t = time.Now()
	}
	d.first.mu.Unlock()
	return d.Driver.Start(ctx, s)
}
