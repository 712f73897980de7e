package node

// The in-process mesh harness: N nodes in one test process on 127.0.0.1,
// each with its own data dir, a short heartbeat interval, no GPUs and (for
// job tests) the fake driver wrapped in a recorder. Tests call the
// services' API methods directly and poll with deadlines; they never sleep to
// synchronise.
//
// CSHARE_TEST_LOG=1 sends every node's log to stderr (debug level).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/cshare/cshare/internal/userkey"
	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/runtime"
	"github.com/cshare/cshare/runtime/hw"
)

func testLogger(name string) *slog.Logger {
	if os.Getenv("CSHARE_TEST_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("node", name)
}

// freePorts reserves n free TCP ports on 127.0.0.1 (closed again at once, so
// a node can be restarted on the same address).
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var lns []net.Listener
	var out []int
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		_ = ln.Close()
	}
	return out
}

// meshNode is one node of a test mesh and how to restart it.
type meshNode struct {
	*Node
	name string
	opts Options
	drv  *recDriver // nil unless the mesh has a driver
}

type mesh struct {
	t         testing.TB
	nodes     []*meshNode
	runs      *runLog // shared by every node's recDriver
	onePerson bool    // formOrg: every machine acts for the owner's person
	ownerToo  []int   // formOrg: these machines act for the owner's person too
}

type meshConfig struct {
	n        int
	interval time.Duration
	fixPorts bool          // listen on ports chosen up front (restart on the same address)
	slots    int           // > 0: node.yaml with resources.max_concurrent_jobs, and fake drivers
	runFor   time.Duration // fake run duration (with slots > 0)
	merge    int           // Options.MergeAbove (0: the default)
	mdns     bool          // mDNS discovery on (off by default in tests)
	// onePerson: formOrg makes every machine act for the owner's person
	// (the owner's user.key on each), who sees every job; without it each
	// machine is a person of its own, a member.
	onePerson bool
	// recordGPUs > 0: node.yaml's runtime.record_gpus (with slots > 0).
	recordGPUs int
	// ssh: node.yaml's ssh.listen and jupyter.listen on 127.0.0.1:0 (an
	// SSH gateway and a Jupyter proxy on free ports); without slots the
	// nodes run the machine's real drivers.
	ssh bool
	// relDirs: the test runs in a directory of its own and each node's
	// data dir is given relative to it ("n0", "n1", ...), as a user's
	// `--data-dir a` is.
	relDirs bool
	// logs: every node logs here too, at debug level (what a test checks
	// the logs for).
	logs io.Writer
	// conf is more of node.yaml (every node's).
	conf string
	// now is every node's clock (Options.Now; nil: time.Now).
	now func() time.Time
}

// newMesh starts cfg.n nodes (not yet in an org).
func newMesh(t testing.TB, cfg meshConfig) *mesh {
	t.Helper()
	m := &mesh{t: t, runs: newRunLog(), onePerson: cfg.onePerson}
	var ports []int
	if cfg.fixPorts {
		ports = freePorts(t, cfg.n)
	}
	if cfg.relDirs {
		t.Chdir(t.TempDir())
	}
	var confPath string
	if cfg.slots > 0 || cfg.ssh || cfg.conf != "" {
		var conf []byte
		if cfg.slots > 0 {
			conf = fmt.Appendf(conf, "resources:\n  max_concurrent_jobs: %d\nruntime:\n  record_gpus: %d\n", cfg.slots, cfg.recordGPUs)
		}
		if cfg.ssh {
			conf = append(conf, "ssh:\n  listen: 127.0.0.1:0\njupyter:\n  listen: 127.0.0.1:0\n"...)
		}
		conf = append(conf, cfg.conf...)
		confPath = filepath.Join(t.TempDir(), "node.yaml")
		if err := os.WriteFile(confPath, conf, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < cfg.n; i++ {
		name := fmt.Sprintf("n%d", i)
		listen := "/ip4/127.0.0.1/tcp/0"
		if cfg.fixPorts {
			listen = fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", ports[i])
		}
		dir := name
		if !cfg.relDirs {
			dir = t.TempDir()
		}
		o := Options{DataDir: dir, API: "127.0.0.1:0", Listen: []string{listen}, HeartbeatInterval: cfg.interval, MergeAbove: cfg.merge,
			Name: name, NVML: hw.NoNVML{}, ConfigPath: confPath, Logger: testLogger(name), DisableMDNS: !cfg.mdns, Now: cfg.now}
		if cfg.logs != nil {
			o.Logger = slog.New(slog.NewTextHandler(cfg.logs, &slog.HandlerOptions{Level: slog.LevelDebug})).With("node", name)
		}
		mn := &meshNode{name: name, opts: o}
		if cfg.slots > 0 {
			f := runtime.NewFake()
			f.SetDuration(cfg.runFor)
			mn.drv = &recDriver{Fake: f, log: m.runs}
			mn.opts.Driver = mn.drv
		}
		m.nodes = append(m.nodes, mn)
	}
	errs := m.startAll()
	t.Cleanup(m.close)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("start %s: %v", m.nodes[i].name, err)
		}
		if m.nodes[i].drv != nil {
			m.nodes[i].drv.machine = m.nodes[i].ID().String()
		}
	}
	return m
}

// startAll starts every node of the mesh at once, with its options (each
// start costs a libp2p host and a Badger store), and returns their errors.
func (m *mesh) startAll() []error {
	var wg sync.WaitGroup
	errs := make([]error, len(m.nodes))
	for i, mn := range m.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mn.Node, errs[i] = Start(context.Background(), mn.opts)
		}()
	}
	wg.Wait()
	return errs
}

func (m *mesh) close() {
	var wg sync.WaitGroup
	for _, mn := range m.nodes {
		if mn.Node == nil {
			continue
		}
		wg.Add(1)
		go func(n *Node) {
			defer wg.Done()
			_ = n.Close()
		}(mn.Node)
	}
	wg.Wait()
}

// stop closes node i; it stays in the mesh, to be restarted.
func (m *mesh) stop(i int) {
	m.t.Helper()
	if err := m.nodes[i].Close(); err != nil {
		m.t.Logf("close %s: %v", m.nodes[i].name, err)
	}
	m.nodes[i].Node = nil
}

// restart starts node i again from its data dir (same key, same options).
func (m *mesh) restart(i int) *Node {
	m.t.Helper()
	n, err := Start(context.Background(), m.nodes[i].opts)
	if err != nil {
		m.t.Fatalf("restart %s: %v", m.nodes[i].name, err)
	}
	m.nodes[i].Node = n
	return n
}

// follow does for node i what node.Run does: when the node asked for a
// reset (it left its org), it restarts it (Restart) and keeps the new node.
// It returns the node's current Node (nil when stopped). Only the test's
// goroutine may call it: it replaces m.nodes[i].Node.
func (m *mesh) follow(i int) *Node {
	m.t.Helper()
	mn := m.nodes[i]
	if mn.Node == nil {
		return nil
	}
	select {
	case <-mn.Reset():
		n, err := mn.Restart(context.Background())
		if err != nil {
			mn.Node = nil
			m.t.Fatalf("restart %s after it left its org: %v", mn.name, err)
		}
		mn.Node = n
	default:
	}
	return mn.Node
}

// live are the running nodes.
func (m *mesh) live() []*meshNode {
	var out []*meshNode
	for _, mn := range m.nodes {
		if mn.Node != nil {
			out = append(out, mn)
		}
	}
	return out
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond (every 20ms) until it returns "" or d passes; then
// it fails with the last thing cond said.
func eventually(t testing.TB, d time.Duration, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		msg := cond()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %s", d, what, msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// eventuallySettled is eventually for a condition that holds only while the
// mesh's liveness is steady (the plans, which follow who is online): its
// clock, d, runs only while every live node sees every other one online. A
// test mesh's heartbeat interval is 250 ms, so a machine is offline to a
// peer after 750 ms without one, which a -race build on a loaded 2-core host
// exceeds now and then; each time, plans change (and leases lapse) on some
// nodes, as they should, and a 20 s wait for plans to agree could pass with
// no steady moment in it. It still fails after 5*d in all.
func (m *mesh) eventuallySettled(d time.Duration, what string, cond func() string) {
	m.t.Helper()
	start := time.Now()
	last, steady := start, time.Duration(0)
	for {
		msg := cond()
		if msg == "" {
			return
		}
		now := time.Now()
		if u := m.unsettled(now); u == "" {
			steady += now.Sub(last)
		} else {
			msg += "; now " + u
		}
		last = now
		if steady >= d || now.Sub(start) >= 5*d {
			m.t.Fatalf("timed out waiting for %s (after %v, %v of them with every node seeing every other online): %s",
				what, now.Sub(start).Round(time.Millisecond), steady.Round(time.Millisecond), msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// unsettled names the live nodes that see another live node offline at now
// ("" when none does).
func (m *mesh) unsettled(now time.Time) string {
	var b strings.Builder
	live := m.live()
	for _, mn := range live {
		for _, o := range live {
			if o == mn {
				continue
			}
			if _, at, ok := mn.peers.Liveness(o.ID().String(), now); !ok {
				fmt.Fprintf(&b, "%s sees %s offline (last heartbeat %v ago); ", mn.name, o.name, now.Sub(at).Round(time.Millisecond))
			}
		}
	}
	return b.String()
}

// eventuallyProgressing is eventually for a condition the mesh reaches step
// by step (a job's items done one by one): it fails only when progress, a
// count that grows as the mesh gets closer, has not grown for stall. On a
// loaded host the mesh is slower, not stuck; a fixed deadline confused the
// two. Progress that is bounded (items done of a job's total) bounds the
// wait.
func eventuallyProgressing(t testing.TB, stall time.Duration, what string, cond func() (msg string, progress int)) {
	t.Helper()
	start := time.Now()
	best, since := -1, start
	for {
		msg, p := cond()
		if msg == "" {
			return
		}
		if now := time.Now(); p > best {
			best, since = p, now
		} else if now.Sub(since) >= stall {
			t.Fatalf("timed out waiting for %s: no progress for %v (%d after %v): %s", what, stall, best, now.Sub(start).Round(time.Millisecond), msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// formOrg makes node 0 create an org and every other node join it with the
// org key; node 0 approves each. It returns the org key.
func (m *mesh) formOrg() string {
	t := m.t
	t.Helper()
	ctx := ctxT(t)
	n0 := m.nodes[0]
	key, err := n0.orgs.CreateOrg(ctx, api.OrgCreate{Name: "acme"})
	if err != nil {
		t.Fatalf("create org: %v", err)
	}
	if m.onePerson {
		for i := range m.nodes[1:] {
			m.sharePerson(0, i+1)
		}
	}
	for _, i := range m.ownerToo {
		m.sharePerson(0, i)
	}
	// Join in parallel, approve as the registrations arrive.
	var wg sync.WaitGroup
	errs := make([]error, len(m.nodes))
	for i, mn := range m.nodes[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := mn.orgs.Join(ctx, api.JoinRequest{OrgKey: key.Key})
			if err == nil && res.Status != ledger.MachinePending {
				err = fmt.Errorf("joined as %q, want pending", res.Status)
			}
			errs[i+1] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("%s join: %v", m.nodes[i].name, err)
		}
	}
	for _, mn := range m.nodes[1:] {
		m.approve(n0.Node, mn.ID().String())
	}
	m.waitConverged(60 * time.Second)
	for _, mn := range m.nodes {
		for _, o := range m.nodes {
			if st := machineStatus(mn.Node, o.ID().String()); st == ledger.MachinePending || st == "" {
				t.Fatalf("%s sees %s as %q after approval", mn.name, o.name, st)
			}
		}
	}
	return key.Key
}

// sharePerson copies node from's person key (user.key) into node to's data
// dir: to, joining after, acts for the same person (as `cshare user export`
// and `import` carry it).
func (m *mesh) sharePerson(from, to int) {
	m.t.Helper()
	b, err := os.ReadFile(userkey.Path(m.nodes[from].opts.DataDir))
	if err != nil {
		m.t.Fatalf("person key of %s: %v", m.nodes[from].name, err)
	}
	if err := os.WriteFile(userkey.Path(m.nodes[to].opts.DataDir), b, 0o600); err != nil {
		m.t.Fatal(err)
	}
}

// approve waits until admin sees id pending, then approves it.
func (m *mesh) approve(admin *Node, id string) {
	t := m.t
	t.Helper()
	eventually(t, 30*time.Second, "registration of "+id, func() string {
		if st := machineStatus(admin, id); st != ledger.MachinePending {
			return fmt.Sprintf("status %q", st)
		}
		return ""
	})
	if _, err := admin.orgs.MachineAction(ctxT(t), id, "approve"); err != nil {
		t.Fatalf("approve %s: %v", id, err)
	}
}

// machineStatus is the ledger status of machine id as n sees it ("" if unknown).
func machineStatus(n *Node, id string) string {
	var s string
	n.rep.View(func(st *ledger.State) {
		if m := st.Machines[id]; m != nil {
			s = m.Status
		}
	})
	return s
}

// liveStatus is machine id's status in n's `machine ls`.
func liveStatus(t testing.TB, n *Node, id string) string {
	ms, err := n.orgs.Machines(context.Background())
	if err != nil {
		t.Fatalf("machines: %v", err)
	}
	for _, mi := range ms {
		if mi.ID == id {
			return mi.Status
		}
	}
	return ""
}

func entryCount(n *Node) int { return n.rep.Len() }

func stateHash(n *Node) string {
	var h string
	n.rep.View(func(st *ledger.State) { h = st.Hash() })
	return h
}

// hashes is every live node's state hash and entry count, for messages.
func (m *mesh) hashes() (map[string]int, string) {
	count := map[string]int{}
	var b strings.Builder
	for _, mn := range m.live() {
		o, err := mn.orgs.Org(context.Background())
		if err != nil {
			fmt.Fprintf(&b, "%s: %v; ", mn.name, err)
			count["err"]++
			continue
		}
		count[o.StateHash]++
		fmt.Fprintf(&b, "%s: %.8s (%d entries)%s; ", mn.name, o.StateHash, o.Entries, gossipTrouble(mn.Node))
	}
	return count, b.String()
}

// gossipTrouble describes n's gossip rejections and negative peer scores.
func gossipTrouble(n *Node) string {
	n.mu.RLock()
	o := n.org
	n.mu.RUnlock()
	var b strings.Builder
	if o != nil {
		rej := o.Rejected()
		keys := make([]string, 0, len(rej))
		for k := range rej {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, " rejected %s=%d", k, rej[k])
		}
		ign := o.Ignored()
		keys = keys[:0]
		for k := range ign {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, " ignored %s=%d", k, ign[k])
		}
	}
	for _, p := range n.host.Peers() {
		if s, ok := n.host.PeerScore(p); ok && s < 0 {
			fmt.Fprintf(&b, " score(%s)=%.0f", p.ShortString(), s)
		}
	}
	return b.String()
}

// waitConverged waits until every live node has the same state hash.
func (m *mesh) waitConverged(d time.Duration) string {
	m.t.Helper()
	var hash string
	eventually(m.t, d, "one state_hash on every node", func() string {
		count, msg := m.hashes()
		if len(count) != 1 {
			return msg
		}
		for h := range count {
			hash = h
		}
		return ""
	})
	return hash
}

// statusCode is the HTTP status an api error carries (0 for none).
func statusCode(err error) int {
	var se *api.StatusError
	if errors.As(err, &se) {
		return se.Code
	}
	return 0
}

// importEntries adds entries to n in bulk, as if fetched from a peer: stored
// durably, then folded (those whose parents are missing wait). It is how the
// tests and BenchmarkCatchUp build large ledgers without the API.
func (n *Node) importEntries(es []*ledger.Entry) error {
	if err := n.rep.Import(es); err != nil {
		return err
	}
	n.rep.Announce(n.ctx)
	return nil
}

// jobAny is job id as n renders it, whoever submitted it: the tests watch
// jobs on every node, whatever person each node acts for (the API shows a
// member only their own; see persons_test.go).
func jobAny(n *Node, id string) (api.JobInfo, error) {
	j, err := jobOf(n, id)
	if err != nil {
		return api.JobInfo{}, err
	}
	return n.jobs.Info(j), nil
}

// jobItemsAny is jobAny for the job's items.
func jobItemsAny(n *Node, id string) ([]api.ItemInfo, error) {
	j, err := jobOf(n, id)
	if err != nil {
		return nil, err
	}
	return n.jobs.AllItems(j), nil
}

func jobOf(n *Node, id string) (*ledger.Job, error) {
	var j *ledger.Job
	n.rep.View(func(st *ledger.State) {
		if x := st.Jobs[id]; x != nil {
			c := *x
			j = &c
		}
	})
	if j == nil {
		return nil, fmt.Errorf("job %s is not in %s's ledger", id, n.idStr)
	}
	return j, nil
}

// heads is n's current heads and their largest clock.
func heads(n *Node) ([]cid.Cid, uint64) { return n.rep.Heads() }

// runLog records every run of the fake drivers of a mesh.
type runLog struct {
	mu   sync.Mutex
	runs map[string]*runRec // by machine + run ID
}

type runRec struct {
	Machine  string
	Job      string
	Item     int
	Instance string
	Run      runtime.RunID
	Started  time.Time
	Ended    time.Time
	Code     int
	Exited   bool
	Stopped  bool // Stop was called while it ran
	Finished bool // exited by itself with code 0 (before or despite a stop order)
	Mounts   []runtime.Mount
	Env      map[string]string
}

func newRunLog() *runLog { return &runLog{runs: map[string]*runRec{}} }

func (l *runLog) all() []runRec {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]runRec, 0, len(l.runs))
	for _, r := range l.runs {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Started.Before(out[j].Started) })
	return out
}

// recDriver is a fake driver that records its runs in a runLog.
type recDriver struct {
	*runtime.Fake
	machine string
	log     *runLog
}

func (d *recDriver) key(id runtime.RunID) string { return d.machine + "/" + string(id) }

func (d *recDriver) Start(ctx context.Context, s runtime.Spec) (runtime.RunID, error) {
	id, err := d.Fake.Start(ctx, s)
	if err != nil {
		return id, err
	}
	d.log.mu.Lock()
	d.log.runs[d.key(id)] = &runRec{Machine: s.Machine, Job: s.Job, Item: s.Item, Instance: s.Instance, Run: id, Started: time.Now(),
		Mounts: s.Mounts, Env: s.Env}
	d.log.mu.Unlock()
	d.observe(id)
	return id, nil
}

// observe records the run's exit once it happens (or Remove does, if the
// run is gone before this goroutine looks).
func (d *recDriver) observe(id runtime.RunID) {
	go func() {
		if st, err := d.Fake.Wait(context.Background(), id); err == nil {
			d.exited(id, st)
		}
	}()
}

func (d *recDriver) exited(id runtime.RunID, st runtime.ExitStatus) {
	d.log.mu.Lock()
	defer d.log.mu.Unlock()
	if r := d.log.runs[d.key(id)]; r != nil && !r.Exited {
		r.Exited, r.Code, r.Ended = true, st.Code, time.Now()
		// The fake's Stop ends a run with 137 or 143: a 0 is a run that
		// completed by itself, though a stop order may have come a moment
		// too late (it counts, as the node counts it).
		r.Finished = st.Code == 0
	}
}

func (d *recDriver) Remove(ctx context.Context, id runtime.RunID) error {
	wctx, cancel := context.WithTimeout(ctx, time.Second)
	st, err := d.Fake.Wait(wctx, id) // at once: only exited runs are removed
	cancel()
	if err == nil {
		d.exited(id, st)
	}
	return d.Fake.Remove(ctx, id)
}

func (d *recDriver) Stop(ctx context.Context, id runtime.RunID, grace time.Duration) error {
	d.log.mu.Lock()
	if r := d.log.runs[d.key(id)]; r != nil && !r.Exited {
		r.Stopped = true
	}
	d.log.mu.Unlock()
	return d.Fake.Stop(ctx, id, grace)
}
