package node

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/dispatch"
	"github.com/cshare/cshare/runtime"
	"github.com/cshare/cshare/smartshare"
)

// Driver runs instances; see package runtime.
type Driver = runtime.Driver

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

// scheduler turns the shared plan into this machine's instances.
type scheduler struct {
	owners  smallCache[string, *jobOwners] // by job and plan hash (under mu)
	placed  atomic.Pointer[planPlaces]     // where this plan and the one before put instances (see placementsAt)
	viewMu  sync.Mutex
	views   smallCache[string, *remoteView] // by job
	ringMu  sync.Mutex
	buckets smallCache[int, *dispatch.Buckets] // by item count: they depend on nothing else (under ringMu)
	rings   smallCache[uint64, *ownerRing]     // consistent-hash rings by their seeds (under ringMu)

	n *Node

	mu        sync.Mutex
	slots     map[int]*instance
	results   map[string][]ledger.ItemResult // finished, not yet in the ledger
	plan      smartshare.Result
	planIn    smartshare.Input
	wake      chan struct{} // closed and replaced on every change
	beatDue   bool
	beatDueAt time.Time // when beatDue last became true

	leases leaseBook // other machines' released leases (see leases.go)

	prevInst []smartshare.Instance // the previous plan's instances
	prevHash string                // and its hash

	beating  atomic.Bool            // a change heartbeat is being published
	sweeping atomic.Bool            // a sweep for runs left behind is under way
	strays   map[runtime.RunID]bool // unsupervised at the last sweep (owned by the sweep)
	planAt   time.Time              // when the plan last changed

	view atomic.Pointer[schedView] // the read view for the API (see view.go)
}

func (n *Node) kickScheduler() { signal(n.kick) }

// nudgeScheduler asks for a plan soon: peers' heartbeats arrive in bursts
// (every machine starting a wide job's instances at once), and one plan per
// planPace serves a burst as well as one per heartbeat.
func (n *Node) nudgeScheduler() { signal(n.nudge) }

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// planPace is the least time between two plans prompted by peers'
// heartbeats, per machine of the org (at least 100 ms, at most a second;
// see paced): a wave of heartbeats becomes a few plans. Plans prompted by
// this node's ledger or instances are not delayed, and every node plans at
// least once a second anyway.
const planPace = 5 * time.Millisecond

func (n *Node) startScheduler() {
	n.wg.Add(1)
	go n.sched.loop()
}

func (s *scheduler) broadcast() {
	s.mu.Lock()
	close(s.wake)
	s.wake = make(chan struct{})
	s.mu.Unlock()
}

func (s *scheduler) waitCh() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.wake
}

func (s *scheduler) loop() {
	n := s.n
	defer n.wg.Done()
	defer s.stopAll()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	flushEvery := min(time.Second, n.interval)
	lastFlush := s.n.now()
	var lastBeat, lastPlan time.Time
	lastSweep := s.n.now()
	lastAwake := n.now()
	kicked, nudged := false, false
	for {
		select {
		case <-n.ctx.Done():
			s.flush(context.Background())
			return
		case <-n.kick:
			kicked = true
		case <-n.nudge:
			nudged = true
		case <-n.wakeup:
		case <-tick.C:
		}
		if n.disk.flipped.Swap(false) {
			s.diskFlipped()
		}
		// A loop that ticks every 100 ms and finds much more time gone
		// was not running (SIGSTOP, a suspended laptop): catch up before
		// taking new items.
		awake := n.now()
		if gap := pauseGap(lastAwake, awake); gap > max(n.interval, time.Second) {
			n.log.Warn("this node was not running for a while", "for", gap.Round(time.Millisecond).String())
			n.holdDispatch("pause")
		}
		lastAwake = awake
		// Plan on every change of our own at once, on peers' changes at
		// most every planGap, and once a second for liveness (a machine
		// going offline is the absence of a message).
		since := s.n.now().Sub(lastPlan)
		s.mu.Lock()
		planGap := min(s.paced(100*time.Millisecond, planPace), time.Second)
		s.mu.Unlock()
		if kicked || (nudged && since >= planGap) || since >= time.Second {
			s.reconcile(s.n.now())
			s.broadcast()
			kicked, nudged, lastPlan = false, false, s.n.now()
		}
		// Short items can finish faster than a flush a second: past
		// flushAt finished items, flush at once, or the heartbeat listing
		// them would outgrow a gossip message.
		if s.pendingResults() >= flushAt {
			s.flush(n.ctx)
			lastFlush = s.n.now()
		}
		s.mu.Lock()
		due := false
		// While the previous heartbeat is still being published, a due one
		// waits for it (its changes came after that one's report).
		if s.beatDue && !s.beating.Load() {
			wait := max(s.beatGap()-s.n.now().Sub(lastBeat), s.beatSettle()-s.n.now().Sub(s.beatDueAt))
			if due = wait <= 0; due {
				s.beatDue = false
			} else if wait < 100*time.Millisecond {
				time.AfterFunc(wait, func() { signal(n.wakeup) })
			}
		}
		s.mu.Unlock()
		if due {
			// Published from its own goroutine: Publish waits for the
			// pubsub event loop, which a burst of gossip can keep busy
			// for a while, and this loop must go on starting instances.
			s.beating.Store(true)
			n.spawn(func() {
				defer signal(n.wakeup)
				defer s.beating.Store(false)
				n.beat(n.ctx)
			})
			lastBeat = s.n.now()
		}
		if s.n.now().Sub(lastFlush) >= flushEvery {
			s.flush(n.ctx)
			lastFlush = s.n.now()
		}
		if s.n.now().Sub(lastSweep) >= sweepEvery {
			s.sweep()
			lastSweep = s.n.now()
		}
	}
}

// sweepEvery is how often the scheduler looks for runs left behind.
const sweepEvery = 5 * time.Second

// sweep removes this machine's runs that nothing supervises: runs of jobs
// that are no longer active, and exited runs that belong to no instance (a
// container created by a request whose context was cancelled on the way, or
// one whose removal failed). The listing is done in the background; at most
// one sweep runs at a time.
func (s *scheduler) sweep() {
	n := s.n
	org := n.orgID()
	if org == "" || !s.sweeping.CompareAndSwap(false, true) {
		return
	}
	n.spawn(func() {
		defer s.sweeping.Store(false)
		prev, next := s.strays, map[runtime.RunID]bool{}
		defer func() { s.strays = next }()
		s.forEachRun(org, nil, func(drv Driver, r runtime.RunInfo) {
			if s.supervised(r) {
				return
			}
			// A run can be unsupervised for an instant (created, not yet
			// handed to its instance): only one that was already
			// unsupervised at the previous sweep goes.
			next[r.ID] = true
			if !prev[r.ID] {
				return
			}
			ctx, c := context.WithTimeout(n.ctx, 30*time.Second)
			defer c()
			_ = drv.Stop(ctx, r.ID, 0)
			if err := drv.Remove(ctx, r.ID); err == nil {
				n.log.Info("removed a run left behind", "job", r.Labels[runtime.LabelJob], "item", r.Labels[runtime.LabelItem])
			}
		})
	})
}

// forEachRun calls fn for each of this machine's runs in org, driver by
// driver (a driver serving several names is listed once). A driver whose
// listing fails is skipped, after onErr (if not nil) is told.
func (s *scheduler) forEachRun(org string, onErr func(Driver, error), fn func(Driver, runtime.RunInfo)) {
	n := s.n
	n.drivers.Each(func(drv Driver) {
		ctx, c := context.WithTimeout(n.ctx, 30*time.Second)
		runs, err := drv.List(ctx, map[string]string{runtime.LabelOrg: org, runtime.LabelMachine: n.id.String()})
		c()
		if err != nil {
			if onErr != nil {
				onErr(drv, err)
			}
			return
		}
		for _, r := range runs {
			fn(drv, r)
		}
	})
}

// supervised reports whether run r must be left alone by sweep: its job is
// active and the run is still running (an instance waits for it, or is
// about to) or is the current run of one of this machine's instances.
func (s *scheduler) supervised(r runtime.RunInfo) bool {
	jobID := r.Labels[runtime.LabelJob]
	active := false
	s.n.snapshot(func(st *ledger.State) {
		j := st.Jobs[jobID]
		active = j != nil && j.State == ledger.JobActive
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, in := range s.slots {
		if _, run := in.current(); run == r.ID {
			return true // its instance removes it when it ends
		}
	}
	return active && r.Running
}

// buildInput assembles the balancer's input from the ledger State and the
// heartbeats of online machines. Every node builds the same input from the
// same State and heartbeats; this machine's own instances enter through its
// own published heartbeat, like everyone else's.
