// Package sched is the node's scheduler (docs/design.md §3.2-§3.7): it
// turns the org's shared plan into this machine's instances. It owns
//
//   - the plan: the balancer's input built from the ledger and the
//     heartbeats of online machines, smartshare.Plan, and the plan diff
//     (node/plandiff) that this machine's instances follow (reconcile.go);
//   - the scheduler loop: planning, flushing results, pacing change
//     heartbeats, sweeping runs left behind (loop.go);
//   - instances and their supervision: one worker per slot that takes
//     agenda items one at a time and runs them through a runtime driver
//     (instance.go), and the next-item dispatch (nextitem.go, over
//     node/dispatch);
//   - adoption of the runs a previous process left (adopt.go);
//   - finished items' results: write-ahead records in the store and their
//     flush to the ledger as job.results entries (results.go);
//   - the lease book: other machines' leases, vetted against the plan
//     (leases.go), and this machine's own, in its heartbeat (report.go);
//   - the read view the API reads without a lock (view.go: the plan and
//     its input), the admission rule for what no machine fits
//     (admission.go), and why a job waits, machine by machine (explain.go:
//     Explain, a pure function of the state, the plan and its input);
//   - the org's policies on this machine's side: queued jobs left out of
//     the plan, and job.start and job.expire under max_job_runtime
//     (policies.go).
//
// It has its own lock and loop and reaches the node only through Deps;
// package node builds it (New), adopts with it (LoadResults, Adopt), runs
// its loop (Run) and reads it through the exported methods. The jobs API
// (node/jobsvc) reads the scheduler only through View and RunningOn.
package sched

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/replica"
	"github.com/cshare/cshare/ledger/store"
	"github.com/cshare/cshare/node/config"
	"github.com/cshare/cshare/node/dispatch"
	"github.com/cshare/cshare/p2p"
	"github.com/cshare/cshare/runtime"
	"github.com/cshare/cshare/runtime/hw"
	"github.com/cshare/cshare/smartshare"
)

// Driver runs instances; see package runtime.
type Driver = runtime.Driver

// Ledger is the org's replica as the scheduler uses it (*replica.Replica).
type Ledger interface {
	// View runs fn with the state as of the last fold, without a lock.
	View(fn func(st *ledger.State))
	// Snapshot is the ledger as of the last fold, read without a lock.
	Snapshot() *replica.Snapshot
	// ReadLog read-locks the log (the DAG) and returns it with its
	// unlock; every fold waits meanwhile.
	ReadLog() (replica.Reader, func())
	// Write signs, stores and folds an entry.
	Write(ctx context.Context, kind string, payload any) (*ledger.Entry, error)
	// Org is the org's ID, "" in no org.
	Org() string
}

// Records are the store's write-ahead records (*store.Store).
type Records interface {
	PutRecord(key string, val []byte) error
	PutRecords(recs []store.Record) error
	DeleteRecords(keys []string) error
	ForEachRecord(prefix string, fn func(key string, val []byte) error) error
}

// Drivers is the runtime's driver registry (*runtime.Registry).
type Drivers interface {
	Get(name string) (Driver, bool)
	Each(fn func(Driver))
}

// Peers is what the node knows of the org's machines from their heartbeats.
type Peers interface {
	// Liveness is a machine's last heartbeat, when it came, and whether
	// it is online at now (this machine always is).
	Liveness(id string, now time.Time) (p2p.Heartbeat, time.Time, bool)
	// Gen and All are p2p.Liveness's.
	Gen() uint64
	All() []p2p.Seen
}

// Gate is the catch-up gate (node/peersvc/catchup.go): closed, no new item
// starts.
type Gate interface {
	Closed() bool
	// Hold closes the gate until the node has caught up again.
	Hold(why string)
}

// Disk is the node's disk guard (node/disk.go).
type Disk interface {
	// Flipped reports, once, that the guard turned full or back.
	Flipped() bool
	// Resume writes what was held back while the disk was full, if there
	// is room now (in the background).
	Resume()
	// MayStartItem reports whether a new item may start (not while the
	// disk is full).
	MayStartItem() bool
	// SaveLog keeps an item's output, in memory while the disk is full.
	SaveLog(job string, item int64, out []byte)
}

// Logs is the item output store (*logs.Store).
type Logs interface {
	Save(job string, item int64, out []byte) error
}

// Datasets is the node's side of the datasets jobs mount (node/datasetsvc).
type Datasets interface {
	// Wait is nil when this machine holds every dataset j mounts; else a
	// channel closed when it is worth looking again. A dataset that can
	// never be mounted is an error instead: the item fails with it.
	Wait(j *ledger.Job) (<-chan struct{}, error)
	// Mounts are j's dataset mounts and their environment.
	Mounts(j *ledger.Job, workDir string) ([]runtime.Mount, map[string]string)
}

// Metrics are the scheduler's series in the node's registry.
type Metrics struct {
	Started       prometheus.Counter     // cshare_runs_started_total
	Preempted     *prometheus.CounterVec // cshare_preemptions_total, by mode
	PlanInstances prometheus.Gauge       // cshare_plan_instances
}

// Deps is what the scheduler needs from the node. Every field is required.
type Deps struct {
	Ledger   Ledger
	Records  Records
	Drivers  Drivers
	Peers    Peers
	Gate     Gate
	Disk     Disk
	Logs     Logs
	Datasets Datasets
	Metrics  Metrics
	// Machine is this machine's ID; Hardware its inventory and Limits
	// what node.yaml lets the org use of it.
	Machine  string
	Hardware hw.Hardware
	Limits   config.Limits
	// RegistryAuth is the credentials to pull an image with (a contract's
	// or job's sealed ones, else node.yaml's).
	RegistryAuth runtime.AuthSource
	// DataDir holds the instances' work dirs.
	DataDir string
	// Interval is the heartbeat interval.
	Interval time.Duration
	// Kick (plan now), Nudge (plan soon, see planPace) and Wakeup (send a
	// due heartbeat) wake the loop; the node signals the first two, the
	// scheduler all three. Buffered, of 1.
	Kick, Nudge, Wakeup chan struct{}
	// Beat publishes this machine's heartbeat now.
	Beat func(ctx context.Context)
	// Spawn runs fn on a goroutine the node's Close waits for.
	Spawn func(fn func())
	Now   func() time.Time
	Log   *slog.Logger
}

// instance is one of this machine's running instances: a worker on one slot
// that takes the job's agenda items one at a time.
type instance struct {
	id      string
	job     string
	slot    int
	kind    string
	started int64 // unix ms
	drv     Driver
	gpus    []int

	mu        sync.Mutex
	item      int64 // current item, or -1
	run       runtime.RunID
	stopAfter bool   // passive: finish the current item, then stop
	killed    bool   // aggressive: the current item goes back to the agenda
	preempted string // the preemption mode that stopped it, once counted
	use       use    // its run's last sampled use (stats.go)

	// Agenda position, used only by the instance's own work goroutine (see
	// nextItem and dispatch.Cursor).
	cursor dispatch.Cursor

	cancel context.CancelFunc
	done   chan struct{}
}

func (in *instance) current() (int64, runtime.RunID) {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.item, in.run
}

// Scheduler turns the shared plan into this machine's instances.
type Scheduler struct {
	d   Deps
	ctx context.Context // the node's: instances, sweeps and flushes run under it

	cache  dispatchCache // nextItem's caches (nextitem.go)
	placed places        // where the plans put instances (leases.go)
	wal    resultLog     // the results' write-ahead records (results.go)
	retire *retirer      // finished runs: their records, then their removal (retire.go)
	// awake is when the loop last ran (loop.go): a slot that finds much
	// more time gone was paused with the node and holds the gate, as the
	// loop would on its next tick (pausedSinceAwake).
	awake   atomic.Pointer[time.Time]
	pauseMu sync.Mutex // one slot holds the gate for a pause (pausedSinceAwake)

	mu        sync.Mutex
	slots     map[int]*instance
	results   map[string][]ledger.ItemResult // finished, not yet in the ledger
	plan      smartshare.Result
	planIn    smartshare.Input
	wake      chan struct{}      // closed and replaced on every change
	inUse     map[*instance]caps // what each run going on may use (caps.go)
	disk      diskUse            // what cshare's files use of the data dir's disk (stats.go)
	beatDue   bool
	beatDueAt time.Time // when beatDue last became true

	leases leaseBook // other machines' released leases (see leases.go)

	moves ownerMoves // per job, its owners before the plan last changed them (nextitem.go)

	beating  atomic.Bool            // a change heartbeat is being published
	sweeping atomic.Bool            // a sweep for runs left behind is under way
	strays   map[runtime.RunID]bool // unsupervised at the last sweep (owned by the sweep)

	view atomic.Pointer[View] // the read view for the API (see view.go)

	policies policyWrites // runtime policy entries written (policies.go)
}

// New builds the scheduler; it starts nothing. ctx is the node's: it ends
// the loop (Run) and every instance's supervision.
func New(ctx context.Context, d Deps) *Scheduler {
	s := &Scheduler{d: d, ctx: ctx, slots: map[int]*instance{}, results: map[string][]ledger.ItemResult{}, wake: make(chan struct{}),
		inUse: map[*instance]caps{}}
	s.cache = dispatchCache{peers: d.Peers, leases: &s.leases, me: d.Machine}
	s.placed = places{interval: d.Interval}
	s.wal = resultLog{rec: d.Records, log: d.Log}
	s.retire = newRetirer(ctx, s.wal, d.Spawn, d.Log, func() { signal(d.Wakeup) })
	return s
}

func (s *Scheduler) now() time.Time { return s.d.Now() }

func (s *Scheduler) kick() { signal(s.d.Kick) }

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Broadcast wakes the instances waiting for a change (the catch-up gate
// opened).
func (s *Scheduler) Broadcast() {
	s.mu.Lock()
	close(s.wake)
	s.wake = make(chan struct{})
	s.mu.Unlock()
}

func (s *Scheduler) waitCh() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.wake
}

// ObserveLeases records the leases in an accepted heartbeat of another
// machine, vetted against the plan as it is at now.
func (s *Scheduler) ObserveLeases(hb p2p.Heartbeat, now time.Time) {
	s.leases.observe(hb, s.placed.at(now), now)
}
