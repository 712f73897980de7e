package node

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/p2p"
	"github.com/cshare/cshare/runtime"
	"github.com/cshare/cshare/runtime/hw"
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

// TestMain closes the placement benchmark's mesh (kept across its runs).
func TestMain(m *testing.M) {
	code := m.Run()
	benchMeshes.close()
	os.Exit(code)
}

func benchNode(b *testing.B, drv runtime.Driver, yaml string, listen string) *Node {
	return benchNodeInterval(b, drv, yaml, listen, time.Second)
}

func benchNodeInterval(b *testing.B, drv runtime.Driver, yaml string, listen string, interval time.Duration) *Node {
	b.Helper()
	n, err := startBenchNode(b.TempDir(), drv, yaml, listen, interval)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = n.Close() })
	return n
}

// startBenchNode starts a node in dir with node.yaml yaml; the caller closes
// it.
func startBenchNode(dir string, drv runtime.Driver, yaml string, listen string, interval time.Duration) (*Node, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "node.yaml")
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		return nil, err
	}
	var self atomic.Pointer[Node]
	heads := func(pushed int, before bool) {
		if h := benchHeadsHook.Load(); h != nil {
			if n := self.Load(); n != nil {
				(*h)(n, pushed, before)
			}
		}
	}
	n, err := Start(context.Background(), Options{DataDir: filepath.Join(dir, "data"), API: "127.0.0.1:0",
		Listen: []string{listen}, ConfigPath: cfg, HeartbeatInterval: interval, Driver: drv, NVML: hw.NoNVML{}, TraceHook: benchTrace,
		HeadsHook: heads, DisableMDNS: true})
	if err == nil {
		self.Store(n)
	}
	return n, err
}

// benchHeadsHook, set by a benchmark, sees each node's heads announcements
// (see Options.HeadsHook).
var benchHeadsHook atomic.Pointer[func(n *Node, pushed int, before bool)]

// benchTraceHook is what benchTrace, every benchmark node's trace hook,
// passes events to (nil: none).
var benchTraceHook atomic.Pointer[p2p.TraceHook]

func benchTrace(self peer.ID, ev, topic string, data []byte) {
	if h := benchTraceHook.Load(); h != nil {
		(*h)(self, ev, topic, data)
	}
}

func setBenchTrace(fn p2p.TraceHook) {
	if fn == nil {
		benchTraceHook.Store(nil)
		return
	}
	benchTraceHook.Store(&fn)
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
		if _, err := n.orgs.CreateOrg(ctx, api.OrgCreate{Name: "bench"}); err != nil {
			b.Fatal(err)
		}
		var lat []time.Duration
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			ji, err := n.jobs.SubmitJob(ctx, sub)
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
			if _, err := n.jobs.CancelJob(ctx, ji.ID); err != nil {
				b.Fatal(err)
			}
			waitIdle(b, n)
			b.StartTimer()
		}
		b.StopTimer()
		reportLatency(b, lat)
	}
	b.Run("exec", func(b *testing.B) {
		run(b, runtime.NewExec(b.TempDir(), nil), api.JobSubmit{Driver: "exec", Cmd: []string{"sleep", "5"}, RangeStart: ptr[int64](1), RangeEnd: ptr[int64](1)})
	})
	b.Run("docker", func(b *testing.B) {
		if exec.Command("docker", "image", "inspect", runtime.TestImage).Run() != nil {
			b.Skip("no Docker engine or no test image (make testimage)")
		}
		d, err := runtime.NewDockerFromEnv()
		if err != nil {
			b.Skip(err)
		}
		run(b, d, api.JobSubmit{Driver: "docker", Image: runtime.TestImage, Cmd: []string{"sleep", "5"}, RangeStart: ptr[int64](1), RangeEnd: ptr[int64](1)})
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
	key, err := a.orgs.CreateOrg(ctx, api.OrgCreate{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := bn.orgs.Join(ctx, api.JoinRequest{OrgKey: key.Key}); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := a.orgs.MachineAction(ctx, bn.ID().String(), "approve"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("could not approve node B")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for {
		if s := a.peers.MachineStatus(bn.ID().String(), time.Now()); s == StatusAvailable {
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
		ji, err := a.jobs.SubmitJob(ctx, api.JobSubmit{Driver: "exec", Cmd: []string{"true"}, RangeStart: ptr[int64](1), RangeEnd: ptr[int64](1)})
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
		if _, err := a.jobs.CancelJob(ctx, ji.ID); err != nil {
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
	for len(n.sched.View().Instances) > 0 {
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
// 20 slots by default); CSHARE_BENCH_CPUPROFILE=FILE profiles each placement
// into FILE.1, FILE.2, ...; CSHARE_BENCH_STACKS=FILE dumps the goroutines of a
// placement still running after 1.5 s. The mesh is formed once per process
// (go test runs a benchmark with b.N=1 before b.N=N) and closed by TestMain.
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
	pm := benchMeshes.get(b, nodes, slots, listen)
	ns, drivers, total := pm.nodes, pm.drivers, &pm.total
	width := nodes * slots
	var started time.Duration
	profile := os.Getenv("CSHARE_BENCH_CPUPROFILE")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		// The previous placement's job (of this run or the one before)
		// ends first, and the mesh settles: what is measured is one
		// placement into an idle mesh.
		if pm.lastJob != "" {
			if _, err := ns[0].jobs.CancelJob(ctx, pm.lastJob); err != nil {
				b.Fatal(err)
			}
			for _, n := range ns {
				waitIdle(b, n)
			}
			pm.lastJob = ""
		}
		floor := waitQuiet(b, pm.idleFloor)
		if pm.idleFloor == 0 {
			pm.idleFloor = floor
		}
		waitSameLedger(b, ns)
		if pm.placements == 0 {
			idleMesh(b, ns)
		}
		pm.placements++
		// The 100 nodes share one heap (about 2 GB live), and collecting
		// it takes both cores for 1.5-2 s about every 10 s: a
		// process-wide stall that no machine of a real org sees, each
		// collecting its own ~20 MB heap in milliseconds. A placement
		// that overlapped one took 1.5-5 s instead of 0.3 s. So each
		// placement starts on a collected heap, as testing's own runs do
		// (what it allocates is logged).
		goruntime.GC()
		headsBefore, _ := heads(ns[0])
		var mem0 goruntime.MemStats
		goruntime.ReadMemStats(&mem0)
		allocProfile := os.Getenv("CSHARE_BENCH_ALLOCPROFILE") // FILE.N.before, FILE.N.after: pprof -base
		writeAllocs(b, allocProfile, pm.placements, "before")
		b.StartTimer()
		base := total.get()
		accepted := func() (hb, heads float64) {
			for _, n := range ns {
				hb += n.host.Accepted(p2p.KindHeartbeat)
				heads += n.host.Accepted(p2p.KindLedger)
			}
			return hb / float64(nodes), heads / float64(nodes)
		}
		hb0, heads0 := accepted()
		drops0 := gossipDrops(ns)
		var hookMu sync.Mutex
		got, took := map[*Node]time.Duration{}, map[*Node]time.Duration{}
		var profStop func()
		if profile != "" {
			profStop = startProfile(b, fmt.Sprintf("%s.%d", profile, pm.placements))
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
		benchHeadsHook.Store(&hook)
		// Where a late pushed entry waited: GossipSub's validation and
		// delivery of the job's announcement on each node, and lost or
		// reopened pubsub streams.
		ledgerTopic := p2p.TopicLedger(ns[0].rep.Org())
		byID := map[peer.ID]*Node{}
		for _, n := range ns {
			byID[n.host.ID()] = n
		}
		validated, delivered := map[*Node]time.Duration{}, map[*Node]time.Duration{}
		var peerAdds, peerRemoves atomic.Int64
		setBenchTrace(func(self peer.ID, ev, topic string, data []byte) {
			switch ev {
			case p2p.TracePeerAdd:
				peerAdds.Add(1)
				return
			case p2p.TracePeerRemove:
				peerRemoves.Add(1)
				return
			}
			if topic != ledgerTopic {
				return
			}
			var env struct {
				Payload []byte `cbor:"payload"`
			}
			var msg struct {
				Entries [][]byte `cbor:"entries"`
			}
			if cbor.Unmarshal(data, &env) != nil || cbor.Unmarshal(env.Payload, &msg) != nil || len(msg.Entries) == 0 {
				return
			}
			m := delivered
			if ev == p2p.TraceValidate {
				m = validated
			}
			hookMu.Lock()
			if _, ok := m[byID[self]]; !ok {
				m[byID[self]] = time.Since(t0)
			}
			hookMu.Unlock()
		})
		placed := make(chan struct{})
		if f := os.Getenv("CSHARE_BENCH_STACKS"); f != "" {
			// A slow placement: where every goroutine is, 1.5 s in
			// (aggregated: identical stacks are counted once).
			k := pm.placements
			go func() {
				select {
				case <-placed:
				case <-time.After(1500 * time.Millisecond):
					w, _ := os.Create(fmt.Sprintf("%s.%d", f, k))
					_ = pprof.Lookup("goroutine").WriteTo(w, 1)
					_ = w.Close()
				}
			}()
		}
		ji, err := ns[0].jobs.SubmitJob(ctx, api.JobSubmit{Driver: "exec", Cmd: []string{"true"}, RangeStart: ptr[int64](1), RangeEnd: ptr[int64](int64(10 * width)),
			CPUs: int64(width), MaxCPUs: ptr(int64(0))})
		if err != nil {
			b.Fatal(err)
		}
		pm.lastJob = ji.ID
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
				if known[k] == 0 {
					n.rep.TryView(func(st *ledger.State) {
						if st.Jobs[ji.ID] != nil {
							known[k] = time.Since(t0)
						}
					})
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
		took0 := time.Since(t0)
		started += took0
		b.StopTimer()
		close(placed)
		var firsts []time.Duration
		for _, d := range drivers {
			d.first.mu.Lock()
			firsts = append(firsts, d.first.t.Sub(t0))
			d.first.t = time.Time{}
			d.first.mu.Unlock()
		}
		sort.Slice(firsts, func(i, j int) bool { return firsts[i] < firsts[j] })
		sort.Slice(known, func(i, j int) bool { return known[i] < known[j] })
		benchHeadsHook.Store(nil)
		setBenchTrace(nil)
		hookMu.Lock()
		slow := make([]*Node, 0, len(got))
		for n := range got {
			slow = append(slow, n)
		}
		sort.Slice(slow, func(i, j int) bool { return got[slow[i]] > got[slow[j]] })
		for _, n := range slow[:min(3, len(slow))] {
			fmt.Fprintf(os.Stderr, "  slow node %s: validated %v, delivered %v, handled %v, taken %v\n",
				n.id.ShortString(), validated[n].Round(time.Millisecond), delivered[n].Round(time.Millisecond),
				got[n].Round(time.Millisecond), took[n].Round(time.Millisecond))
		}
		fmt.Fprintf(os.Stderr, "  pubsub streams meanwhile: %d opened, %d lost\n", peerAdds.Load(), peerRemoves.Load())
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
		logf("instances started: 1%% after %v, 50%% %v, 90%% %v, 99%% %v, all %v", marks[1], marks[50], marks[90], marks[99], took0)
		hbIn, heads1 := accepted()
		fmt.Fprintf(os.Stderr, "placement %d: %d instances on %d machines in %v (%.0f/s); job known by all after %v; %.0f heartbeats per machine meanwhile\n",
			pm.placements, width, nodes, took0.Round(time.Millisecond), float64(width)/took0.Seconds(), known[len(known)-1].Round(time.Millisecond), hbIn-hb0)
		if profStop != nil {
			profStop()
		}
		var mem1 goruntime.MemStats
		goruntime.ReadMemStats(&mem1)
		writeAllocs(b, allocProfile, pm.placements, "after")
		fmt.Fprintf(os.Stderr, "  allocated meanwhile: %d MB in all, %d KB per machine; %d collections; %d ledger heads before\n",
			(mem1.TotalAlloc-mem0.TotalAlloc)>>20, (mem1.TotalAlloc-mem0.TotalAlloc)>>10/uint64(nodes), mem1.NumGC-mem0.NumGC, len(headsBefore))
		drops1 := gossipDrops(ns)
		for r, v := range drops1 {
			drops1[r] = v - drops0[r]
		}
		fmt.Fprintf(os.Stderr, "  gossip drops during the placement (all nodes): %v\n", drops1)
		b.Logf("messages accepted per node until every instance started: %.0f heartbeats, %.0f heads announcements", hbIn-hb0, heads1-heads0)
	}
	b.ReportMetric(float64(width*b.N)/started.Seconds(), "instances/s")
}

// placementMesh is a formed mesh of BenchmarkPlacement100Nodes, kept for
// every run of the benchmark in this process.
type placementMesh struct {
	key        string
	dir        string
	nodes      []*Node
	drivers    []*countDriver
	total      countTotal
	lastJob    string  // the job of the last placement, still running
	idleFloor  float64 // cores the formed mesh uses while idle
	placements int
}

// meshCache holds the formed placement mesh (see TestMain).
type meshCache struct {
	mu sync.Mutex
	pm *placementMesh
}

var benchMeshes meshCache

func (c *meshCache) get(b *testing.B, nodes, slots int, listen string) *placementMesh {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := fmt.Sprintf("%d/%d/%s", nodes, slots, listen)
	if c.pm != nil && c.pm.key == key {
		return c.pm
	}
	c.closeLocked()
	pm, err := formPlacementMesh(nodes, slots, listen)
	if pm != nil {
		c.pm = pm
	}
	if err != nil {
		b.Fatal(err)
	}
	return pm
}

func (c *meshCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closeLocked()
}

func (c *meshCache) closeLocked() {
	if c.pm == nil {
		return
	}
	for _, n := range c.pm.nodes {
		_ = n.Close()
	}
	_ = os.RemoveAll(c.pm.dir)
	c.pm = nil
}

// formPlacementMesh starts nodes machines of slots slots each, forms an org
// of them (created by the first, joined and approved), dials the full mesh
// and waits until every node sees every machine online. The mesh is returned
// (to be closed) even when forming it fails.
func formPlacementMesh(nodes, slots int, listen string) (*placementMesh, error) {
	ctx := context.Background()
	formStart := time.Now()
	phase := func(what string) {
		fmt.Fprintf(os.Stderr, "  %s after %v\n", what, time.Since(formStart).Round(time.Second))
	}
	dir, err := os.MkdirTemp("", "cshare-placement-")
	if err != nil {
		return nil, err
	}
	pm := &placementMesh{key: fmt.Sprintf("%d/%d/%s", nodes, slots, listen), dir: dir}
	for i := 0; i < nodes; i++ {
		d := &countDriver{Driver: runtime.NewFake(), total: &pm.total}
		// A long interval: 100 nodes share 2 cores here, and a machine must
		// not flap offline while the mesh forms.
		n, err := startBenchNode(filepath.Join(dir, strconv.Itoa(i)), d, fmt.Sprintf("resources: {max_concurrent_jobs: %d}\n", slots), listen, 10*time.Second)
		if err != nil {
			return pm, err
		}
		pm.drivers, pm.nodes = append(pm.drivers, d), append(pm.nodes, n)
	}
	ns := pm.nodes
	key, err := ns[0].orgs.CreateOrg(ctx, api.OrgCreate{Name: "bench"})
	if err != nil {
		return pm, err
	}
	if _, err := ns[0].orgs.SetSettings(ctx, api.SettingsRequest{Set: map[string]string{"smartshare.max_cpus_limit": "100000"}}); err != nil {
		return pm, err
	}
	for _, n := range ns[1:] {
		if _, err := n.orgs.Join(ctx, api.JoinRequest{OrgKey: key.Key}); err != nil {
			return pm, err
		}
	}
	phase("nodes joined")
	deadline := time.Now().Add(3 * time.Minute)
	for _, n := range ns[1:] {
		for {
			_, err := ns[0].orgs.MachineAction(ctx, n.ID().String(), "approve")
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				return pm, fmt.Errorf("approve: %v", err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for idx, n := range ns {
		for {
			online := 0
			for _, m := range ns {
				if s := n.peers.MachineStatus(m.ID().String(), time.Now()); s == StatusAvailable || s == StatusBusy {
					online++
				}
			}
			if online == nodes {
				break
			}
			if time.Now().After(deadline) {
				st, _ := n.Status(ctx)
				return pm, fmt.Errorf("node %d sees %d of %d machines online (peers %d, entries %d, status %s, org %q)", idx, online, nodes, st.Peers, st.Entries, st.Status, st.Org)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	phase("machines approved and online")
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
	phase(fmt.Sprintf("mesh dialled (connections per node: min %d, median %d, max %d)", conns[0], conns[len(conns)/2], conns[len(conns)-1]))
	return pm, nil
}

// gossipDrops sums the gossip messages every node dropped, by reason.
func gossipDrops(ns []*Node) map[string]float64 {
	drops := map[string]float64{}
	for _, n := range ns {
		for _, r := range []string{p2p.DropValidationQueue, p2p.DropThrottled, p2p.DropOutbound, p2p.DropUndeliverable} {
			drops[r] += n.host.Dropped(r)
		}
	}
	return drops
}

// idleMesh profiles the formed, quiet mesh (CSHARE_BENCH_IDLEPROFILE=FILE)
// and logs its traffic.
func idleMesh(b *testing.B, ns []*Node) {
	if stop := startProfile(b, os.Getenv("CSHARE_BENCH_IDLEPROFILE")); stop != nil {
		time.Sleep(20 * time.Second)
		stop()
	}
	idleTraffic(ns, 10*time.Second)
}

// idleTraffic logs what the formed, idle mesh does per machine and second
// over d: heartbeats accepted, gossip RPCs in and out, duplicate messages,
// IHAVE RPCs sent, and the CPU the whole process used.
func idleTraffic(ns []*Node, d time.Duration) {
	sum := func() (v [5]float64) {
		for _, n := range ns {
			in, out, dups, ihaves := n.host.Traffic()
			v[0] += n.host.Accepted(p2p.KindHeartbeat)
			v[1], v[2], v[3], v[4] = v[1]+in, v[2]+out, v[3]+dups, v[4]+ihaves
		}
		return v
	}
	v0, c0, t0 := sum(), processCPU(), time.Now()
	time.Sleep(d)
	v1, c1 := sum(), processCPU()
	per := float64(len(ns)) * time.Since(t0).Seconds()
	fmt.Fprintf(os.Stderr, "  idle, per machine and second: %.1f heartbeats accepted, %.0f RPCs in, %.0f out, %.0f duplicates, %.1f IHAVE RPCs out; process %.2f cores\n",
		(v1[0]-v0[0])/per, (v1[1]-v0[1])/per, (v1[2]-v0[2])/per, (v1[3]-v0[3])/per, (v1[4]-v0[4])/per, float64(c1-c0)/float64(time.Since(t0)))
}

// processCPU is the CPU time this process has used (user and system).
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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

// writeAllocs writes the process's allocation profile to f.k.when (nothing
// when f is ""): the difference of two is what a placement allocated. The
// profile counts what the last collection saw, so it collects first.
func writeAllocs(b *testing.B, f string, k int, when string) {
	if f == "" {
		return
	}
	goruntime.GC()
	w, err := os.Create(fmt.Sprintf("%s.%d.%s", f, k, when))
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	if err := pprof.Lookup("allocs").WriteTo(w, 0); err != nil {
		b.Fatal(err)
	}
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
// uses under a fifth of a core, or under a little more than floor (the
// formed mesh's own idle use: 100 machines heartbeating are never quite
// still), for three seconds in a row. A mesh that has just formed, or has
// just stopped a job, is still busy (syncs, dials, change heartbeats), and a
// placement measured then measures that too. It returns the least use seen
// in the last ten seconds, the idle floor for later calls.
func waitQuiet(b *testing.B, floor float64) float64 {
	b.Helper()
	limit := max(0.2, 1.2*floor+0.05)
	deadline := time.Now().Add(2 * time.Minute)
	quiet := 0
	var recent []float64
	for {
		c0, t0 := processCPU(), time.Now()
		time.Sleep(time.Second)
		use := float64(processCPU()-c0) / float64(time.Since(t0))
		if recent = append(recent, use); len(recent) > 10 {
			recent = recent[1:]
		}
		if quiet++; use >= limit {
			quiet = 0
		}
		// Three quiet seconds in a row: one can be a lull in the churn of
		// a mesh that is still settling.
		if quiet == 3 || time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "  mesh idle: %.2f cores busy (limit %.2f)\n", use, limit)
			return slices.Min(recent)
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
