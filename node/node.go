// Package node is the cshare daemon: it wires the libp2p host, the ledger
// (Badger store + fold), gossip, the runtime and the SmartShare balancer, owns
// every goroutine and clock, and serves the local HTTP API. Nothing imports
// node except cmd/cshare.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/replica"
	"github.com/cshare/cshare/ledger/store"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/node/config"
	"github.com/cshare/cshare/node/datasetsvc"
	"github.com/cshare/cshare/node/jobsvc"
	"github.com/cshare/cshare/node/logs"
	"github.com/cshare/cshare/node/marketsvc"
	"github.com/cshare/cshare/node/orgsvc"
	"github.com/cshare/cshare/node/sched"
	"github.com/cshare/cshare/p2p"
	"github.com/cshare/cshare/runtime"
	"github.com/cshare/cshare/runtime/hw"
)

// Version is the agent version, shown by node status and machine show.
var Version = "0.1.0-dev"

// DefaultAPI is the default API listen address.
const DefaultAPI = "127.0.0.1:7480"

// Options configure a node. Zero values take the documented defaults.
type Options struct {
	DataDir           string        // required
	API               string        // default 127.0.0.1:7480; port 0 picks a free port
	Listen            []string      // default TCP and QUIC on port 4001, all interfaces
	ConfigPath        string        // node.yaml; "" = defaults
	HeartbeatInterval time.Duration // default 30s (or node.yaml's heartbeat_interval)
	Name              string        // machine name; default node.yaml's name, else the host name
	Logger            *slog.Logger  // default: discard
	// The API on a non-loopback address needs TLS (both files, PEM) or
	// APIInsecureRemote; see apiserve.go.
	APITLSCert, APITLSKey string
	APIInsecureRemote     bool

	// For tests: the GPU library (default the system NVML).
	NVML hw.NVML
	// For tests: run instances with this driver instead of docker/exec.
	Driver Driver
	// Now is the node's clock (default time.Now): what it reads for
	// liveness, leases, plan ages and dispatch. Tests may run nodes under
	// testing/synctest, whose clock time.Now already is.
	Now func() time.Time
	// MergeAbove is the number of ledger heads above which a ledger.merge
	// is written (default 8; see merge.go).
	MergeAbove int
	// TraceHook, if set, sees this node's GossipSub events (benchmarks).
	TraceHook p2p.TraceHook
	// HeadsHook, if set, sees each heads announcement from a peer before
	// (before=true) and after its pushed entries are taken (benchmarks).
	HeadsHook func(pushed int, before bool)
	// For tests: no mDNS discovery whatever node.yaml says.
	DisableMDNS bool
	// Bootstrap are addresses (/ip4, /ip6, /dns4, /dns6 ending in
	// /p2p/<id>) of machines to join through and to dial when this node
	// has no peer (nat.go): `--bootstrap`, repeatable.
	Bootstrap []string

	// token is the API token to serve with instead of a new one: a node
	// that Restart starts again keeps its token, so clients that wait on it
	// (member leave, org delete) go on working.
	token string
	// heartbeatLie, for tests, rewrites each heartbeat before it is
	// signed: a machine that lies (see attack_test.go).
	heartbeatLie func(*p2p.Heartbeat)
}

// Node is a running cshare node.
type Node struct {
	opts     Options
	log      *slog.Logger
	key      crypto.PrivKey
	signer   *ledger.Signer
	id       peer.ID
	idStr    string // id.String(), computed once
	store    *store.Store
	host     *p2p.Host
	cfg      config.File
	hw       hw.Hardware
	limits   config.Limits
	interval time.Duration
	started  time.Time
	reg      *prometheus.Registry
	metrics  *metrics

	// rep is the org's ledger: log, store, sync (package ledger/replica).
	rep  *replica.Replica
	mu   sync.RWMutex // guards org
	org  *p2p.Org
	live *p2p.Liveness

	peersMu sync.Mutex
	known   map[string][]string // machine ID -> last known addresses

	apiSrv  *http.Server
	apiAddr string
	token   string

	ctx     context.Context
	cancel  context.CancelFunc
	stopped chan struct{}
	wg      sync.WaitGroup
	kick    chan struct{} // wakes the scheduler to plan now (a ledger change, an instance ended)
	nudge   chan struct{} // a peer's instances changed: plan soon (coalesced, see sched.planPace)
	wakeup  chan struct{} // wakes the scheduler to send a due heartbeat, without planning

	bgMu    sync.Mutex
	bg      sync.WaitGroup // goroutines started with spawn
	closing bool

	sched   *sched.Scheduler
	gate    gate              // closed while catching up (catchup.go)
	drivers *runtime.Registry // set once at start, read without a lock
	logs    *logs.Store       // item output: written by supervision, read by the API and the logs protocol

	orgs   *orgsvc.Service     // persons, joining, witnessing, leaving, machines and members (orgs.go)
	market *marketsvc.Service  // offers, contracts as renter and host (market.go)
	jobs   *jobsvc.Service     // the jobs API: submit, list, show, modify, cancel, items, logs (jobs.go)
	ds     *datasetsvc.Service // datasets: their API, blocks, exchange, mounts for jobs (datasets.go)

	disk diskState // the reserve on the data dir's filesystem (disk.go)
}

// Run starts a node and blocks until ctx is cancelled or the node is asked to
// stop through its API; then it shuts down cleanly. A node that leaves its
// org (Reset) is started again, in no org, on the same API address (see
// Restart).
func Run(ctx context.Context, opts Options) error {
	n, err := Start(ctx, opts)
	if err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
		case <-n.stopped:
		case <-n.Reset():
			if n, err = n.Restart(ctx); err != nil {
				return err
			}
			continue
		}
		n.log.Info("stopping node")
		return n.Close()
	}
}

// Start starts a node and returns once its API is serving.
func Start(ctx context.Context, opts Options) (*Node, error) {
	if opts.DataDir == "" {
		return nil, errors.New("node: data dir is required")
	}
	// The node names paths under its data dir to others that do not share
	// its working directory (Docker's mounts of datasets, exec workdirs):
	// a data dir given relative (`--data-dir a`) is made absolute.
	abs, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return nil, fmt.Errorf("node: data dir: %w", err)
	}
	opts.DataDir = abs
	if opts.API == "" {
		opts.API = DefaultAPI
	}
	if err := checkAPIOptions(opts); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MergeAbove == 0 {
		opts.MergeAbove = defaultMergeAbove
	}
	if opts.Name != "" {
		if err := text.CheckName("--name", opts.Name); err != nil {
			return nil, fmt.Errorf("node: %w", err)
		}
	}
	if err := api.CheckBootstrap("--bootstrap", opts.Bootstrap); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	if opts.MergeAbove < 0 {
		return nil, fmt.Errorf("node: merge threshold %d is negative", opts.MergeAbove)
	}
	if len(opts.Listen) == 0 {
		opts.Listen = []string{"/ip4/0.0.0.0/tcp/4001", "/ip4/0.0.0.0/udp/4001/quic-v1"}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(opts.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("node: data dir: %w", err)
	}
	cfg, err := config.Load(opts.ConfigPath)
	if err != nil {
		return nil, err
	}
	nv := opts.NVML
	if nv == nil {
		nv = hw.SystemNVML()
	}
	hwinfo, err := hw.Detect(opts.DataDir, nv, log)
	if err != nil {
		return nil, fmt.Errorf("node: hardware inventory: %w", err)
	}
	hwinfo = recordedGPUs(hwinfo, cfg.Runtime.RecordGPUs)
	limits, err := cfg.Limits(hwinfo)
	if err != nil {
		return nil, err
	}
	interval := opts.HeartbeatInterval
	if interval == 0 {
		interval = cfg.HeartbeatInterval
	}
	if interval == 0 {
		interval = 30 * time.Second
	}
	if interval < 50*time.Millisecond || interval > time.Hour {
		return nil, fmt.Errorf("node: --heartbeat-interval: %s outside 50ms..1h", interval)
	}
	key, err := p2p.LoadOrCreateKey(filepath.Join(opts.DataDir, "node.key"))
	if err != nil {
		return nil, err
	}
	signer, err := ledger.NewSigner(key)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	n := &Node{opts: opts, log: log, key: key, signer: signer, id: signer.ID(), idStr: signer.ID().String(), cfg: cfg, hw: hwinfo, limits: limits,
		interval: interval, started: opts.Now(),
		live: &p2p.Liveness{}, ctx: ctx, cancel: cancel,
		stopped: make(chan struct{}), kick: make(chan struct{}, 1),
		nudge: make(chan struct{}, 1), wakeup: make(chan struct{}, 1)}
	n.logs = logs.New(filepath.Join(opts.DataDir, "logs"), runtime.LogCap)
	n.reg = prometheus.NewRegistry()
	n.metrics = newMetrics(n.reg)
	registerRunMetrics(n.reg, n.runCounts)
	ok := false
	defer func() {
		if !ok {
			_ = n.Close()
		}
	}()
	if err := n.openDisk(); err != nil {
		return nil, err
	}
	if n.store, err = store.Open(filepath.Join(opts.DataDir, "ledger"), log); err != nil {
		return nil, err
	}
	n.store.SetWriteCheck(n.disk.g.Check)
	if err := n.openReplica(); err != nil {
		return nil, err
	}
	// Port 0 listen addresses take last run's port when it is free (see
	// listenFile); should the port be taken in between, the configured ones.
	listen := preferListen(opts.Listen, loadListen(opts.DataDir))
	pcfg := p2p.Config{Key: key, ListenAddrs: listen, Logger: log, Metrics: n.reg, Trace: opts.TraceHook,
		Relay: relayMode(cfg.Relay), PortMap: cfg.NAT.PortMapEnabled()}
	n.host, err = p2p.New(ctx, pcfg)
	if !slices.Equal(listen, opts.Listen) && (err != nil || !reusedAll(listen, opts.Listen, n.host.ListenAddrs())) {
		if err == nil {
			_ = n.host.Close()
		}
		pcfg.ListenAddrs = opts.Listen
		n.host, err = p2p.New(ctx, pcfg)
	}
	if err != nil {
		return nil, fmt.Errorf("node: libp2p: %w", err)
	}
	if err := saveListen(opts.DataDir, opts.Listen, n.host.ListenAddrs()); err != nil {
		log.Warn("could not remember the listen ports", "err", err)
	}
	n.host.Gate().HoldsOrg(func() bool { return n.orgID() != "" })
	n.orgs = n.newOrgs()
	p2p.ServeSync(n.host.LibP2P(), orgsvc.SyncSource{Replica: n.rep, Gate: n.host.Gate()})
	n.host.Gate().OnFormer(n.orgs.TellFormer)
	p2p.ServeLogs(n.host.LibP2P(), jobsvc.LogSource{Ledger: n.rep, Logs: n.logs})
	p2p.ServeWitness(n.host.LibP2P(), n.orgs.WitnessSource())
	n.host.ServeAdmit(n.orgs.WitnessSource())
	p2p.ServeTombstones(n.host.LibP2P(), orgsvc.TombstoneDir(filepath.Join(opts.DataDir, orgsvc.TombstonesDir)))
	n.ds = n.newDatasets()
	n.ds.StartExchange()
	if err := n.initRuntime(); err != nil {
		return nil, err
	}
	n.sched = n.newScheduler()
	n.market = n.newMarket()
	n.jobs = n.newJobs()
	n.spawn(n.orgs.Leaving().RemoveForeignRuns)
	if org := n.orgID(); org != "" {
		if err := n.joinTopics(org); err != nil {
			return nil, err
		}
	}
	n.loadKnownPeers()
	if err := n.serveAPI(); err != nil {
		return nil, err
	}
	n.holdDispatch("start") // no new item before catching up with a peer (catchup.go)
	n.orgs.ArmStanding()
	// Runs left by a previous process are this machine's before its first
	// heartbeat: a heartbeat without them would release their leases.
	n.sched.LoadResults()
	n.sched.Adopt()
	n.wg.Add(3)
	go n.headsLoop()
	go n.heartbeatLoop()
	go n.redialLoop()
	n.startScheduler()
	n.spawn(func() { n.ds.Run(n.ctx) })
	n.spawn(func() { n.market.Run(n.ctx) })
	n.spawn(n.bootstrapLoop)
	ok = true
	log.Info("node started", "id", n.id.String(), "api", n.apiAddr, "org", n.orgID(), "data_dir", opts.DataDir)
	n.checkExit() // removed, or the org deleted, while this node was down
	return n, nil
}

// ID is the node's peer ID (its machine ID).
func (n *Node) ID() peer.ID { return n.id }

// APIAddr is the address the API listens on.
func (n *Node) APIAddr() string { return n.apiAddr }

// Token is the API bearer token.
func (n *Node) Token() string { return n.token }

// Addrs are the node's libp2p addresses.
func (n *Node) Addrs() []string { return n.host.Addrs() }

// Stopped is closed when the node was asked to stop through its API.
func (n *Node) Stopped() <-chan struct{} { return n.stopped }

// Close stops the node: API, loops, instances' supervision, host, store.
func (n *Node) Close() error {
	n.cancel()
	if n.rep != nil {
		n.rep.Close() // its syncs run on n.spawn: waited for below
	}
	if n.apiSrv != nil {
		sctx, c := context.WithTimeout(context.Background(), 3*time.Second)
		_ = n.apiSrv.Shutdown(sctx)
		c()
		_ = os.Remove(filepath.Join(n.opts.DataDir, api.AddrFile))
	}
	n.wg.Wait()
	n.bgMu.Lock()
	n.closing = true
	n.bgMu.Unlock()
	n.bg.Wait()
	if n.orgs != nil {
		n.orgs.Close()
	}
	// Leave the org's topics without holding n.mu: Org.Close waits for its
	// delivery loops, whose callbacks take n.mu.
	n.mu.Lock()
	o := n.org
	n.org = nil
	n.mu.Unlock()
	if n.host != nil {
		n.host.StopGossip() // no PRUNE to the org's peers (see p2p.Host.StopGossip)
	}
	if n.market != nil {
		n.market.Close()
	}
	if o != nil {
		o.Close()
	}
	var err error
	if n.ds != nil {
		n.ds.Close()
	}
	if n.host != nil {
		err = n.host.Close()
	}
	if n.store != nil {
		if e := n.store.Close(); e != nil && err == nil {
			err = e
		}
		n.store = nil
	}
	return err
}

// spawn runs fn on a goroutine that Close waits for (after cancelling
// n.ctx, which fn must heed). After Close has begun it does nothing.
func (n *Node) spawn(fn func()) {
	n.bgMu.Lock()
	defer n.bgMu.Unlock()
	if n.closing {
		return
	}
	n.bg.Add(1)
	go func() {
		defer n.bg.Done()
		fn()
	}()
}

func (n *Node) joinTopics(org string) error {
	o, err := n.host.JoinOrg(org, n.rep)
	if err != nil {
		return err
	}
	o.OnHeads(n.rep.OnHeads)
	o.OnHeartbeat(n.onHeartbeat)
	o.SetBeat(func() { n.beat(n.ctx) })
	n.mu.Lock()
	n.org = o
	n.mu.Unlock()
	if err := n.market.Join(n.ctx, org, o); err != nil {
		return err
	}
	if n.cfg.Discovery.MDNSEnabled() && !n.opts.DisableMDNS {
		if err := n.host.StartMDNS(p2p.MDNSService(org)); err != nil {
			n.log.Warn("no mDNS discovery on the local network", "err", err)
		}
	}
	return nil
}
