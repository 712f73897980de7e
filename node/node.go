// Package node is the cshare daemon's wiring (docs/design.md §3): it loads
// the machine key, node.yaml and the hardware, opens the disk guard, the
// store and the org's ledger replica, starts the libp2p host, builds the
// services that do the work and hands each the parts it needs (the
// replica, the host, the clock, and small views of one another), runs
// their loops, and serves the local HTTP API from them. Start reads as the
// map of the node: every service, and how they connect.
//
// The services, each in its own package under node/ with its own state,
// locks and loops: peersvc (the org's other machines: addresses,
// heartbeats, liveness, healing, the catch-up gate, merges), orgsvc
// (persons, the org's API, witnessing, leaving, the closed org), datasetsvc
// (datasets, their blocks and exchange, mounts for jobs), sched (the plan,
// instances, adoption, results, leases, the read view), marketsvc (offers,
// contracts as renter and host) and jobsvc (the jobs API). Nothing imports
// node except cmd/cshare.
package node

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cshare/cshare/dataset"
	"github.com/cshare/cshare/internal/regauth"
	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/replica"
	"github.com/cshare/cshare/ledger/store"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/node/config"
	"github.com/cshare/cshare/node/datasetsvc"
	"github.com/cshare/cshare/node/gateway"
	"github.com/cshare/cshare/node/jobsvc"
	"github.com/cshare/cshare/node/jupyter"
	"github.com/cshare/cshare/node/logs"
	"github.com/cshare/cshare/node/marketsvc"
	"github.com/cshare/cshare/node/orgsvc"
	"github.com/cshare/cshare/node/peersvc"
	"github.com/cshare/cshare/node/sched"
	"github.com/cshare/cshare/node/web"
	"github.com/cshare/cshare/p2p"
	"github.com/cshare/cshare/runtime"
	"github.com/cshare/cshare/runtime/hw"
)

// Node is a running cshare node.
type Node struct {
	opts     Options
	log      *slog.Logger
	key      crypto.PrivKey
	signer   *ledger.Signer
	id       peer.ID
	idStr    string // id.String(), computed once
	age      string // this machine's age recipient, in its heartbeats and offers (issue 31)
	cfg      config.File
	hw       hw.Hardware
	limits   config.Limits
	interval time.Duration
	started  time.Time
	reg      *prometheus.Registry
	metrics  *metrics

	// The parts the services share.
	disk    diskState         // the reserve on the data dir's filesystem (disk.go)
	store   *store.Store      // Badger: blocks, metadata, records (ledger/store)
	rep     *replica.Replica  // the org's ledger: log, store, sync (ledger/replica; ledgerops.go)
	host    *p2p.Host         // libp2p, its gossip and its stream protocols
	drivers *runtime.Registry // set once at start, read without a lock
	logs    *logs.Store       // item output: written by supervision, read by the API and the logs protocol
	mu      sync.RWMutex      // guards org
	org     *p2p.Org          // the org's topics, once joined (joinTopics)

	// The services.
	peers  *peersvc.Service    // addresses, heartbeats, liveness, healing, catch-up, merges (peers.go)
	orgs   *orgsvc.Service     // persons, joining, witnessing, leaving, machines and members (orgs.go)
	ds     *datasetsvc.Service // datasets: their API, blocks, exchange, mounts for jobs
	gw     *gateway.Service    // the SSH gateway, SSH keys and file copy (node/gateway.go)
	jup    *jupyter.Service    // the Jupyter proxy (node/jupyter.go)
	sched  *sched.Scheduler    // plan, instances, adoption, results, leases, the read view (sched.go)
	market *marketsvc.Service  // offers, contracts as renter and host
	jobs   *jobsvc.Service     // the jobs API: submit, list, show, modify, cancel, items, logs

	apiSrv  *http.Server
	web     *web.Dashboard // the dashboard (node/web); its SessionOK admits a signed-in browser
	apiAddr string
	token   string
	ev      *eventState // the event bus and what feeds it (eventwire.go)
	tokens  *api.Tokens // API access tokens (cshare node token)

	ctx     context.Context
	cancel  context.CancelFunc
	stopped chan struct{}
	wg      sync.WaitGroup // the loops (loop)
	kick    chan struct{}  // wakes the scheduler to plan now (a ledger change, an instance ended)
	nudge   chan struct{}  // a peer's instances changed: plan soon (coalesced, see sched.planPace)
	wakeup  chan struct{}  // wakes the scheduler to send a due heartbeat, without planning

	bgMu    sync.Mutex
	bg      sync.WaitGroup // goroutines started with spawn
	closing bool
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
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	log := opts.Logger
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
	interval, err := opts.interval(cfg)
	if err != nil {
		return nil, err
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
		interval: interval, started: opts.Now(), ctx: ctx, cancel: cancel,
		stopped: make(chan struct{}), kick: make(chan struct{}, 1),
		nudge: make(chan struct{}, 1), wakeup: make(chan struct{}, 1)}
	n.logs = logs.New(filepath.Join(opts.DataDir, "logs"), runtime.LogCap)
	n.ev = newEventState(n.idStr, interval, n.started, opts.Now)
	n.reg = prometheus.NewRegistry()
	n.metrics = newMetrics(n.reg)
	n.ev.notifyTo(cfg.Notify, n.reg, log)
	registerRunMetrics(n.reg, func() (all, dups int64) { return runCounts(n.rep) })
	registerUsageMetrics(n.reg, n.usageFigures)
	ok := false
	defer func() {
		if !ok {
			_ = n.Close()
		}
	}()

	// The shared parts: the disk guard (before the store, disk.go), the
	// store, the replica (ledgerops.go) and the host (listen.go).
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
	n.ev.baseline(n.rep)
	if n.host, err = startHost(ctx, opts, cfg, key, n.reg); err != nil {
		return nil, err
	}
	n.ev.watchConnections(n.host.LibP2P().Network())
	n.host.Gate().HoldsOrg(func() bool { return n.rep.Org() != "" })
	n.drivers = newDrivers(ctx, opts, cfg)
	// The age identity registry credentials are sealed to (issue 31).
	ageID, err := regauth.LoadOrCreateIdentity(filepath.Join(opts.DataDir, regauth.IdentityFile))
	if err != nil {
		return nil, fmt.Errorf("age identity: %w", err)
	}
	n.age = ageID.Recipient().String()
	auth := registryAuth(cfg, ageID)

	// The services, each handed the parts and the other services it uses.
	// The node's wiring types (peerWiring, orgWiring) are what a service
	// sees of services built after it.
	n.peers = peersvc.New(ctx, peersvc.Deps{Ledger: n.rep, Host: n.host, Meta: n.store, Node: (*peerWiring)(n),
		Kick: n.kickScheduler, Nudge: func() { signal(n.nudge) }, Heartbeats: n.metrics.heartbeats,
		Machine: n.id, Version: Version, Interval: interval, MergeAbove: opts.MergeAbove,
		Spawn: n.spawn, Now: opts.Now, Log: log})
	n.ev.liveness = n.peers.Liveness // before the API serves: MachineStatus reads it (orgs.go)
	ow := (*orgWiring)(n)
	n.orgs = orgsvc.New(ctx, orgsvc.Deps{Ledger: n.rep, Host: n.host, Signer: signer,
		Topics: ow, Peers: n.peers, Machines: ow, Runs: ow, HoldDispatch: n.peers.Hold,
		Machine: n.id, DataDir: opts.DataDir, Bootstrap: opts.Bootstrap, Interval: interval, Now: opts.Now, Log: log})
	n.ds = datasetsvc.New(ctx, datasetsvc.Deps{Ledger: n.rep, Host: n.host, Store: n.store,
		Blocks: dataset.NewBlockstore(n.store), Persons: n.orgs, Peers: n.peers,
		Machine: n.idStr, DataDir: opts.DataDir, Interval: interval,
		Kick: n.kickScheduler, Spawn: n.spawn, Now: opts.Now, Log: log})
	n.sched = sched.New(ctx, sched.Deps{Ledger: n.rep, Records: n.store, Drivers: n.drivers, Peers: n.peers,
		Gate: n.peers, Disk: &n.disk, Logs: n.logs, Datasets: n.ds,
		Metrics: sched.Metrics{Started: n.metrics.started, Preempted: n.metrics.preempted, PlanInstances: n.metrics.planHash},
		Machine: n.idStr, Hardware: hwinfo, Limits: limits, RegistryAuth: auth, DataDir: opts.DataDir,
		Interval: interval, Kick: n.kick, Nudge: n.nudge, Wakeup: n.wakeup, Beat: n.peers.Beat, Spawn: n.spawn,
		Now: opts.Now, Log: log})
	n.market = marketsvc.New(marketsvc.Deps{Ledger: n.rep, Signer: signer, Topics: n.host, Drivers: n.drivers,
		Machine: n.idStr, Person: n.orgs.Person, Hardware: hwinfo, RegistryAuth: auth, AgeRecipient: n.age,
		JupyterToken: n.jupyterToken,
		DataDir:      opts.DataDir, Interval: interval, Now: opts.Now, Log: log})
	n.jobs = jobsvc.New(jobsvc.Deps{Ledger: n.rep, Scheduler: n.sched, Persons: n.orgs, Mounts: n.ds, Fetches: n.ds,
		Peers: n.peers, Host: n.host, Logs: n.logs, Drivers: n.drivers, RegistryAuth: auth, Kick: n.kickScheduler,
		Machine: n.idStr, Now: opts.Now, Log: log})
	if n.gw, err = n.newGateway(); err != nil {
		return nil, err
	}
	if n.jup, err = n.newJupyter(); err != nil {
		return nil, err
	}

	// The stream protocols the host serves, from the replica and the
	// services.
	lp := n.host.LibP2P()
	p2p.ServeSync(lp, orgsvc.SyncSource{Replica: n.rep, Gate: n.host.Gate()})
	p2p.ServeCheckpoints(lp, n.rep)
	n.host.Gate().OnFormer(n.orgs.TellFormer)
	p2p.ServeLogs(lp, jobsvc.LogSource{Ledger: n.rep, Logs: n.logs})
	p2p.ServeWitness(lp, n.orgs.WitnessSource())
	n.host.ServeAdmit(n.orgs.WitnessSource())
	p2p.ServeTombstones(lp, orgsvc.TombstoneDir(filepath.Join(opts.DataDir, orgsvc.TombstonesDir)))
	n.ds.StartExchange()

	n.spawn(n.orgs.Leaving().RemoveForeignRuns)
	if org := n.rep.Org(); org != "" {
		if err := n.joinTopics(org); err != nil {
			return nil, err
		}
	}
	// The API serves every service's routes (apiserve.go: services).
	if err := n.serveAPI(); err != nil {
		return nil, err
	}
	if err := n.gw.Start(n.ctx); err != nil {
		return nil, err
	}
	if err := n.jup.Start(n.ctx); err != nil {
		return nil, err
	}
	n.peers.Hold("start") // no new item before catching up with a peer (node/peersvc/catchup.go)
	n.orgs.ArmStanding()
	// Runs left by a previous process are this machine's before its first
	// heartbeat: a heartbeat without them would release their leases.
	n.sched.LoadResults()
	n.sched.Adopt()
	n.loop(n.headsLoop)
	n.loop(n.peers.Heartbeats)
	n.loop(n.peers.Redial)
	n.loop(n.sched.Run)
	n.loop(func() { n.ev.loop(n.ctx, n.rep) })
	if n.ev.notify != nil {
		n.spawn(func() { n.ev.notify.Run(n.ctx) })
	}
	n.spawn(func() { n.ds.Run(n.ctx) })
	n.spawn(func() { n.market.Run(n.ctx) })
	n.spawn(n.bootstrapLoop)
	n.spawn(n.bootstrapLoop)
	ok = true
	log.Info("node started", "id", n.idStr, "api", n.apiAddr, "org", n.rep.Org(), "data_dir", opts.DataDir)
	n.orgs.Leaving().CheckExit() // removed, or the org deleted, while this node was down
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
	n.ev.bus.Close() // its streams end: the API's server shuts down without waiting on them
	if n.apiSrv != nil {
		sctx, c := context.WithTimeout(context.Background(), 3*time.Second)
		_ = n.apiSrv.Shutdown(sctx)
		c()
		_ = os.Remove(filepath.Join(n.opts.DataDir, api.AddrFile))
	}
	if n.gw != nil {
		n.gw.Close()
	}
	if n.jup != nil {
		n.jup.Close()
	}
	n.wg.Wait()
	n.bgMu.Lock()
	n.closing = true
	n.bgMu.Unlock()
	n.bg.Wait()
	if n.drivers != nil {
		// The exec driver's cgroups kept for reuse (runtime/exec_cgpool.go).
		n.drivers.Each(func(d runtime.Driver) {
			if r, ok := d.(interface{ Release() }); ok {
				r.Release()
			}
		})
	}
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

// loop runs fn, a loop that returns once n.ctx ends, on a goroutine that
// Close waits for before the others.
func (n *Node) loop(fn func()) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		fn()
	}()
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

// topics is the org's topics, nil before the node joined them.
func (n *Node) topics() *p2p.Org {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.org
}

func (n *Node) joinTopics(org string) error {
	o, err := n.host.JoinOrg(org, n.rep)
	if err != nil {
		return err
	}
	o.OnHeads(n.rep.OnHeads)
	o.OnHeartbeat(n.peers.OnHeartbeat)
	o.SetBeat(func() { n.peers.Beat(n.ctx) })
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
