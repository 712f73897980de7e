package node

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/p2p"
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
	// nextItem): below cursor and above tail, every item of the job is done
	// or failed for good.
	cursor, tail int
	// idleSince is when nextItem first found nothing it may take while free
	// items remained (reserved for their running owners); see idleSteal.
	idleSince time.Time

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
	viewMu  sync.Mutex
	views   smallCache[string, *remoteView] // by job
	ringMu  sync.Mutex
	buckets smallCache[int, *itemBuckets]  // by item count: they depend on nothing else (under ringMu)
	rings   smallCache[uint64, *ownerRing] // consistent-hash rings by their seeds (under ringMu)

	n       *Node
	drivers map[string]Driver
	noDrv   map[string]string // driver name -> why it is unavailable

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
}

func (n *Node) initRuntime() error {
	s := &scheduler{n: n, drivers: map[string]Driver{}, noDrv: map[string]string{}, slots: map[int]*instance{},
		results: map[string][]ledger.ItemResult{}, wake: make(chan struct{})}
	n.sched = s
	if n.opts.Driver != nil {
		s.drivers["docker"] = n.opts.Driver
		s.drivers["exec"] = n.opts.Driver
		return nil
	}
	if n.cfg.Runtime.DockerEnabled() {
		d, err := runtime.NewDockerFromEnv()
		if err == nil {
			pctx, c := context.WithTimeout(n.ctx, 5*time.Second)
			err = d.Ping(pctx)
			c()
		}
		if err != nil {
			s.noDrv["docker"] = fmt.Sprintf("no Docker engine reachable on this machine (%v)", err)
			n.log.Warn("docker driver unavailable", "err", err)
		} else {
			s.drivers["docker"] = d
		}
	} else {
		s.noDrv["docker"] = "the docker driver is disabled in node.yaml (runtime: {docker: false})"
	}
	if n.cfg.Runtime.ExecEnabled() {
		s.drivers["exec"] = runtime.NewExec(filepath.Join(n.opts.DataDir, "exec"), n.log)
	} else {
		s.noDrv["exec"] = "the exec driver is not enabled on this machine: it is not sandboxed; enable it with `runtime: {exec: true}` in node.yaml"
	}
	return nil
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
	s.adopt()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	flushEvery := min(time.Second, n.interval)
	lastFlush := time.Now()
	var lastBeat, lastPlan time.Time
	lastSweep := time.Now()
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
		// Plan on every change of our own at once, on peers' changes at
		// most every planGap, and once a second for liveness (a machine
		// going offline is the absence of a message).
		since := time.Since(lastPlan)
		s.mu.Lock()
		planGap := min(s.paced(100*time.Millisecond, planPace), time.Second)
		s.mu.Unlock()
		if kicked || (nudged && since >= planGap) || since >= time.Second {
			s.reconcile(time.Now())
			s.broadcast()
			kicked, nudged, lastPlan = false, false, time.Now()
		}
		// Short items can finish faster than a flush a second: past
		// flushAt finished items, flush at once, or the heartbeat listing
		// them would outgrow a gossip message.
		if s.pendingResults() >= flushAt {
			s.flush(n.ctx)
			lastFlush = time.Now()
		}
		s.mu.Lock()
		due := false
		// While the previous heartbeat is still being published, a due one
		// waits for it (its changes came after that one's report).
		if s.beatDue && !s.beating.Load() {
			wait := max(s.beatGap()-time.Since(lastBeat), s.beatSettle()-time.Since(s.beatDueAt))
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
			lastBeat = time.Now()
		}
		if time.Since(lastFlush) >= flushEvery {
			s.flush(n.ctx)
			lastFlush = time.Now()
		}
		if time.Since(lastSweep) >= sweepEvery {
			s.sweep()
			lastSweep = time.Now()
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
	seen := map[Driver]bool{}
	for _, drv := range s.drivers {
		if seen[drv] {
			continue
		}
		seen[drv] = true
		ctx, c := context.WithTimeout(n.ctx, 30*time.Second)
		runs, err := drv.List(ctx, map[string]string{runtime.LabelOrg: org, runtime.LabelMachine: n.id.String()})
		c()
		if err != nil {
			if onErr != nil {
				onErr(drv, err)
			}
			continue
		}
		for _, r := range runs {
			fn(drv, r)
		}
	}
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
func (s *scheduler) buildInput(now time.Time) smartshare.Input {
	n := s.n
	n.mu.RLock()
	st := n.lg.State()
	in := smartshare.Input{Config: smartshare.Config{Mode: st.Settings.SmartShare.Mode, PreemptPolicy: st.Settings.SmartShare.PreemptPolicy,
		DefaultMaxCPUs: int(st.Settings.SmartShare.DefaultMaxCPUs), MaxCPUsLimit: int(st.Settings.SmartShare.MaxCPUsLimit)}}
	machines := map[string]int{}
	var hbs []p2p.Heartbeat
	for _, m := range st.SortedMachines() {
		if m.Status != ledger.MachineApproved {
			continue
		}
		hb, _, online := n.liveness(m.ID, now)
		if !online || hb.Machine == "" {
			continue
		}
		slots := int(m.Limits.MaxConcurrentJobs)
		if !m.HasLimits {
			slots = int(m.Hardware.CPUs)
		}
		if slots < 0 {
			slots = 0
		}
		mc := smartshare.Machine{ID: m.ID, Slots: slots}
		if m.HasLimits {
			mc.Cores = m.Hardware.CPUs * 1000 * m.Limits.CPULimit / 100
			mc.MemoryMB = m.Limits.MemoryLimit
			mc.GPUs = len(m.Limits.GPUs)
		}
		in.Machines = append(in.Machines, mc)
		machines[m.ID] = slots
		hbs = append(hbs, hb)
	}
	jobs := map[string]bool{}
	for _, j := range st.SortedJobs() {
		if j.State != ledger.JobActive {
			continue
		}
		remaining := len(j.Items) - int(j.Done) - int(j.Failed)
		sj := smartshare.Job{ID: j.ID, Priority: int(j.Priority), CPUs: int(j.Spec.CPUs), Submitted: j.Seq,
			ItemsRemaining: remaining, Cores: j.Spec.Cores, MemoryMB: j.Spec.MemoryMB, GPUs: int(j.Spec.GPUs)}
		if j.MaxCPUs != nil {
			sj.MaxCPUs = smartshare.MaxCPUs{N: int(*j.MaxCPUs), Set: true}
		}
		in.Jobs = append(in.Jobs, sj)
		jobs[j.ID] = true
	}
	n.mu.RUnlock()
	for _, hb := range hbs {
		used := map[int64]bool{}
		for _, ri := range hb.Instances {
			if !jobs[ri.Job] || ri.Slot < 0 || int(ri.Slot) >= machines[hb.Machine] || used[ri.Slot] {
				continue
			}
			used[ri.Slot] = true
			kind := ri.Kind
			if kind != "primary" && kind != "secondary" {
				kind = "secondary"
			}
			in.Instances = append(in.Instances, smartshare.Instance{Job: ri.Job, Machine: hb.Machine, Slot: int(ri.Slot), Kind: kind, Started: ri.Started})
		}
	}
	return in
}

// reconcile plans and makes this machine's instances follow the plan.
func (s *scheduler) reconcile(now time.Time) {
	n := s.n
	if n.orgID() == "" {
		return
	}
	in := s.buildInput(now)
	var plan smartshare.Result
	if err := in.Validate(); err != nil {
		n.log.Warn("balancer input invalid; keeping the previous plan", "err", err)
		return
	}
	plan = smartshare.Plan(in)
	me := n.id.String()
	target := map[int]smartshare.Instance{}
	for _, pi := range plan.Instances {
		if pi.Machine == me {
			target[pi.Slot] = pi
		}
	}
	preempt := map[int]smartshare.Preemption{}
	for _, p := range plan.Preempt {
		if p.Machine == me {
			preempt[p.Slot] = p
		}
	}
	active := map[string]*ledger.Job{}
	n.snapshot(func(st *ledger.State) {
		for id, j := range st.Jobs {
			if j.State == ledger.JobActive {
				c := *j
				active[id] = &c
			}
		}
	})
	s.mu.Lock()
	if plan.Hash != s.plan.Hash {
		s.prevInst, s.prevHash, s.planAt = s.plan.Instances, s.plan.Hash, now
	}
	s.plan, s.planIn = plan, in
	changed := false
	for slot, inst := range s.slots {
		t, ok := target[slot]
		switch {
		case ok && t.Job == inst.job:
			if inst.kind != t.Kind {
				inst.kind = t.Kind
				changed = true
			}
		case active[inst.job] == nil:
			s.stopInstance(inst, true, "") // cancelled or finished: stop now
		case preempt[slot].Mode == "passive":
			s.stopInstance(inst, false, "passive")
		case preempt[slot].Mode == "aggressive":
			s.stopInstance(inst, true, "aggressive")
		case ok:
			// Another job's instance planned here without a preemption: the
			// plan saw the slot free (its input, this machine's last
			// heartbeat, predates this instance). Not a preemption: finish
			// the item; a plan that wants the slot now preempts it.
			s.stopInstance(inst, false, "")
		default:
			s.stopInstance(inst, false, "") // no longer wanted: finish the item
		}
	}
	for slot, t := range target {
		if s.slots[slot] != nil {
			continue
		}
		j := active[t.Job]
		if j == nil {
			continue
		}
		drv := s.drivers[j.Spec.Driver]
		if drv == nil {
			continue
		}
		gpus, ok := s.allocGPUs(int(j.Spec.GPUs))
		if !ok {
			continue
		}
		inst := &instance{id: fmt.Sprintf("%s-s%d-%d", t.Job, slot, now.UnixNano()%1e9), job: t.Job, slot: slot, kind: t.Kind,
			started: now.UnixMilli(), drv: drv, gpus: gpus, item: -1, done: make(chan struct{})}
		s.slots[slot] = inst
		changed = true
		ctx, cancel := context.WithCancel(n.ctx)
		inst.cancel = cancel
		n.spawn(func() { s.work(ctx, inst, j, "") })
	}
	if changed {
		s.wantBeat()
	}
	s.mu.Unlock()
	n.metrics.planHash.Set(float64(len(plan.Instances)))
}

// allocGPUs picks n free GPU devices of this machine. s.mu must be held.
func (s *scheduler) allocGPUs(want int) ([]int, bool) {
	if want == 0 {
		return nil, true
	}
	used := map[int]bool{}
	for _, in := range s.slots {
		for _, g := range in.gpus {
			used[g] = true
		}
	}
	var out []int
	for _, g := range s.n.limits.GPUs {
		if !used[int(g.Device)] {
			out = append(out, int(g.Device))
			if len(out) == want {
				return out, true
			}
		}
	}
	return nil, false
}

// stopInstance stops an instance: now (its item goes back to the agenda) or
// after its current item. preempt is the preemption mode when the plan
// preempts it ("" when its job ended or no longer wants it); each preempted
// instance is counted once, in cshare_preemptions_total. s.mu must be held.
func (s *scheduler) stopInstance(in *instance, now bool, preempt string) {
	in.mu.Lock()
	in.stopAfter = true
	run := in.run
	count := preempt != "" && in.preempted == ""
	if count {
		in.preempted = preempt
	}
	kill := now && !in.killed
	if kill {
		in.killed = true
	}
	in.mu.Unlock()
	if count {
		s.n.metrics.preempted.WithLabelValues(preempt).Inc()
	}
	if kill && run != "" {
		go func() {
			ctx, c := context.WithTimeout(context.Background(), 30*time.Second)
			defer c()
			_ = in.drv.Stop(ctx, run, 0)
		}()
	}
}

// work is an instance's loop: take the next free item, run it, record it.
func (s *scheduler) work(ctx context.Context, in *instance, j *ledger.Job, adoptRun runtime.RunID) {
	n := s.n
	defer func() {
		s.mu.Lock()
		if s.slots[in.slot] == in {
			delete(s.slots, in.slot)
		}
		s.wantBeat()
		s.mu.Unlock()
		close(in.done)
		n.kickScheduler()
	}()
	for ctx.Err() == nil {
		in.mu.Lock()
		stop := in.stopAfter
		in.mu.Unlock()
		if stop {
			return
		}
		var item int64
		var run runtime.RunID
		var began time.Time
		if adoptRun != "" {
			run, adoptRun = adoptRun, ""
			it, _ := in.current()
			item, began = it, time.Now()
		} else {
			var ok bool
			item, ok = s.nextItem(in)
			if !ok {
				// Nothing free now: wait for a change, then look again.
				select {
				case <-ctx.Done():
					return
				case <-s.waitCh():
				}
				continue
			}
			in.mu.Lock()
			in.item = item
			in.mu.Unlock()
			s.markBeat()
			began = time.Now()
			var err error
			run, err = in.drv.Start(ctx, s.spec(in, j, item))
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				s.record(in, item, ledger.ItemResult{Item: item, Code: -1, DurationMS: time.Since(began).Milliseconds(), Instance: in.id, Error: err.Error()})
				continue
			}
		}
		in.mu.Lock()
		in.run = run
		killedEarly := in.killed
		in.mu.Unlock()
		if killedEarly {
			// Stopped while its run was starting: stop the run now.
			sctx, c := context.WithTimeout(context.Background(), 30*time.Second)
			_ = in.drv.Stop(sctx, run, 0)
			c()
		}
		n.metrics.started.Inc()
		st, err := in.drv.Wait(ctx, run)
		if ctx.Err() != nil {
			// The node is stopping: the run goes on (a container outlives
			// its node) and the restarted node adopts it; nothing to record.
			return
		}
		dur := time.Since(began)
		in.mu.Lock()
		killed := in.killed
		in.mu.Unlock()
		out, _ := in.drv.Logs(context.Background(), run)
		size := int64(len(out))
		if len(out) > 0 || err == nil {
			_ = s.saveLog(in.job, item, out)
		}
		_ = in.drv.Remove(context.Background(), run)
		in.mu.Lock()
		in.run = "" // only now: until removed, the run is this instance's (see sweep)
		in.mu.Unlock()
		if killed {
			// Preempted or cancelled: no result; the item goes back to the agenda.
			in.mu.Lock()
			in.item = -1
			in.mu.Unlock()
			return
		}
		res := ledger.ItemResult{Item: item, Code: int64(st.Code), DurationMS: dur.Milliseconds(), OutputSize: size, Instance: in.id, Error: st.Err}
		if err != nil {
			res.Code, res.Error = -1, err.Error()
		}
		s.record(in, item, res)
	}
}

// flushAt is the number of finished items not yet in the ledger that makes
// the scheduler write their results at once; maxFinishedInBeat is the most a
// heartbeat lists (with MaxConcurrentJobsLimit running instances, it stays
// well under the 64 KiB gossip limit).
const (
	flushAt           = 200
	maxFinishedInBeat = 300
)

// pendingResults counts finished items whose results are not in the ledger.
func (s *scheduler) pendingResults() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := 0
	for _, rs := range s.results {
		k += len(rs)
	}
	return k
}

// markBeat asks for a heartbeat: an item was leased.
func (s *scheduler) markBeat() {
	s.mu.Lock()
	s.wantBeat()
	s.mu.Unlock()
	signal(s.n.wakeup)
}

// wantBeat marks a heartbeat due: what this machine runs changed. s.mu must
// be held.
func (s *scheduler) wantBeat() {
	if !s.beatDue {
		s.beatDue, s.beatDueAt = true, time.Now()
	}
}

// Pacing of change heartbeats. A heartbeat that announces changed instances
// costs every machine of the org a signature check (about 50 µs), so an org
// of N machines that each announce every change at once pays N² checks per
// wave: the wave a wide job causes when it starts everywhere at once. Both
// the settle time (how long a due heartbeat waits for the changes that
// follow the first one) and the gap (the least time between two change
// heartbeats of a machine) are beatPace per machine of the org: 100 ms for
// 10 machines, 1 s for 100, which bounds the checks to N/(N×beatPace) = 100
// a second on every machine whatever the org's size. Never more than a
// quarter interval, never less than 20 ms (settle) or 100 ms (gap).
//
// Nothing waits on these announcements to start work: every machine plans
// the same instances from the same ledger, and the items of an instance not
// yet announced are left to it (see nextItem). What they carry (leases, the
// plan hash, this machine's instances as input to everyone's plan) may be
// late by that much; plan agreement within two intervals is unaffected.
const beatPace = 10 * time.Millisecond

// beatSettle: see beatPace. s.mu must be held.
func (s *scheduler) beatSettle() time.Duration {
	return s.paced(20*time.Millisecond, beatPace)
}

// beatGap: see beatPace. s.mu must be held.
func (s *scheduler) beatGap() time.Duration {
	return s.paced(100*time.Millisecond, beatPace)
}

// paced is per (per machine of the org), at least floor, at most a quarter
// interval (unless floor is more). s.mu must be held.
func (s *scheduler) paced(floor, per time.Duration) time.Duration {
	return max(floor, min(time.Duration(len(s.planIn.Machines))*per, s.n.interval/4))
}

func (s *scheduler) record(in *instance, item int64, r ledger.ItemResult) {
	s.mu.Lock()
	s.results[in.job] = append(s.results[in.job], r)
	s.mu.Unlock()
	in.mu.Lock()
	in.item = -1
	in.mu.Unlock()
}

// flush writes one job.results entry per job with everything finished since
// the last flush: the ledger grows by batches, not by items.
func (s *scheduler) flush(ctx context.Context) {
	// Results stay in s.results (and so count as leased for dispatch) until
	// their entry is in the ledger; only then are they dropped here.
	s.mu.Lock()
	pending := make(map[string][]ledger.ItemResult, len(s.results))
	for id, rs := range s.results {
		pending[id] = rs
	}
	s.mu.Unlock()
	ids := make([]string, 0, len(pending))
	for id := range pending {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		rs := pending[id]
		for len(rs) > 0 {
			k := min(len(rs), 500)
			if _, err := s.n.write(ctx, ledger.KindJobResults, ledger.JobResults{Job: id, Results: rs[:k]}); err != nil && !errors.Is(err, ledger.ErrNotAuthority) {
				s.n.log.Debug("recording results", "job", id, "err", err)
			}
			rs = rs[k:]
		}
		s.mu.Lock()
		s.results[id] = s.results[id][len(pending[id]):]
		if len(s.results[id]) == 0 {
			delete(s.results, id)
		}
		s.mu.Unlock()
	}
}

// nextItem picks the instance's next agenda item among the free ones:
// pending in the ledger, not leased by an online machine's heartbeat (nor
// released by one whose result this node may not have yet, see leases.go),
// not running or finished here.
//
// Each item has an owner among the job's planned instances, by rendezvous
// hashing (the instance with the highest hash of item and instance), which
// every node computes alike from the plan: an instance takes its lowest free
// item, so two instances never race for one item while the plans agree,
// whatever each node knows of the others' leases, and when the plan changes
// (a machine dies, a job arrives) only the items of the instances that went
// change owner, so nodes whose plans briefly differ still mostly agree. An
// instance with nothing of its own steals, the highest items first (their
// owners reach them last), never an item its running owner takes next:
// instance k takes the k-th candidate, and none when there are k or fewer,
// so that thieves do not collide either; only items whose owner does not
// run at all are shared out modulo the candidates, so none is left behind.
// An owner runs if its machine announces it, or has not announced this plan
// yet (it may be starting it); one whose machine announces this plan
// without it cannot run it, and one whose machine is offline is gone.
func (s *scheduler) nextItem(in *instance) (int64, bool) {
	n := s.n
	now := time.Now()
	leased := map[int64]bool{} // this machine's leases; remote ones are in rv
	me := n.id.String()
	rank := -1
	var owners []slotKey // the job's planned instances, in plan order
	alive := map[slotKey]bool{}
	s.mu.Lock()
	for _, o := range s.slots {
		if o.job != in.job {
			continue
		}
		alive[slotKey{me, o.slot}] = true
		if it, _ := o.current(); it >= 0 && o != in {
			leased[it] = true
		}
	}
	for _, r := range s.results[in.job] {
		leased[r.Item] = true
	}
	jo := s.ownersOf(in.job, s.plan.Hash, s.plan.Instances)
	owners, ring := jo.owners, jo.ring
	if r, ok := jo.rank[slotKey{me, in.slot}]; ok {
		rank = r
	}
	myPlan := s.plan.Hash
	// Items that changed owner with a plan change less than ownerGrace ago
	// may have been taken by their previous owner an instant ago, before
	// its lease could reach us: wait before taking those.
	var prevRing *ownerRing
	prevRank := -1
	if time.Since(s.planAt) < ownerGrace {
		if pj := s.ownersOf(in.job, s.prevHash, s.prevInst); len(pj.owners) > 0 {
			prevRing = pj.ring
			if r, ok := pj.rank[slotKey{me, in.slot}]; ok {
				prevRank = r
			}
		}
	}
	s.mu.Unlock()
	if rank < 0 {
		// Not in the plan (any more): everything is its own.
		rank, owners = 0, []slotKey{{me, in.slot}}
		ring = s.ringFor([]uint64{ownerSeed(in.job, me, in.slot)})
	}
	rv := s.remoteView(in.job, myPlan, owners, now)
	n.mu.RLock()
	defer n.mu.RUnlock()
	for _, id := range rv.online {
		s.leases.released(id, in.job, n.lg.Has, leased)
	}
	isAlive := func(k slotKey) bool { return alive[k] || rv.alive[k] }
	j := n.lg.State().Jobs[in.job]
	if j == nil || j.State != ledger.JobActive || len(j.Items) == 0 {
		return 0, false
	}
	items := j.Items
	if in.tail <= 0 || in.tail >= len(items) {
		in.tail = len(items) - 1
	}
	in.cursor = min(in.cursor, len(items))
	free := func(i int) bool {
		it := j.Spec.RangeStart + int64(i)
		return items[i].Status == ledger.ItemPending && !leased[it] && !rv.leased[it]
	}
	for in.cursor < len(items) && items[in.cursor].Status != ledger.ItemPending {
		in.cursor++ // done for good: skip it from now on
	}
	// Its own items, lowest first.
	for _, i32 := range s.itemsOf(ring, rank, len(items)) {
		i := int(i32)
		if i < in.cursor || !free(i) {
			continue
		}
		if prevRing != nil && prevRing.ownerOf(i) != prevRank {
			continue // it just changed owner: later (see ownerGrace)
		}
		return j.Spec.RangeStart + int64(i), true
	}
	// Steal: candidates from the top down. A running owner takes its
	// lowest free items next, one after the other, and a thief's lease
	// reaches it only after a heartbeat (a few hundred milliseconds on a
	// busy host): leave each running owner its ownReserve lowest free items.
	type cand struct{ i, owner int }
	var cands []cand
	lowest := map[int][]int{} // owner -> indexes in cands of its lowest free items seen, lowest last
	for i := in.tail; i >= in.cursor && len(cands) < (ownReserve+4)*len(owners)+64; i-- {
		if items[i].Status != ledger.ItemPending {
			if i == in.tail {
				in.tail--
			}
			continue
		}
		if !free(i) {
			continue
		}
		o := ring.ownerOf(i)
		lowest[o] = append(lowest[o], len(cands))
		cands = append(cands, cand{i, o})
	}
	skip := map[int]bool{}
	for o, ks := range lowest {
		if isAlive(owners[o]) {
			for _, k := range ks[max(0, len(ks)-ownReserve):] {
				skip[k] = true
			}
		}
	}
	var top, orphans []int64
	for k, c := range cands {
		if skip[k] {
			continue
		}
		top = append(top, j.Spec.RangeStart+int64(c.i))
		if !isAlive(owners[c.owner]) {
			orphans = append(orphans, j.Spec.RangeStart+int64(c.i))
		}
	}
	switch {
	case rank < len(top):
		in.idleSince = time.Time{}
		return top[rank], true
	case len(orphans) > 0:
		in.idleSince = time.Time{}
		return orphans[rank%len(orphans)], true
	case len(cands) > 0:
		// Only items reserved for running owners are left. An owner that
		// wanted one has had time to announce its lease: no instance sits
		// idle while an item is pending, so take one.
		if in.idleSince.IsZero() {
			in.idleSince = now
		}
		if now.Sub(in.idleSince) >= idleSteal {
			in.idleSince = time.Time{}
			return j.Spec.RangeStart + int64(cands[rank%len(cands)].i), true
		}
	}
	return 0, false
}

type slotKey struct {
	m string
	s int
}

// jobOwners is a job's planned instances in plan order (the owners of its
// items), their ring and each one's rank, for one plan.
type jobOwners struct {
	owners []slotKey
	rank   map[slotKey]int
	ring   *ownerRing
}

// ownersOf returns the job's owners under the plan with this hash and
// instances (the current plan or the previous one), cached per plan. s.mu
// must be held.
func (s *scheduler) ownersOf(job, hash string, insts []smartshare.Instance) *jobOwners {
	return s.owners.getOr(job+"\x00"+hash, 64, func() *jobOwners {
		jo := &jobOwners{rank: map[slotKey]int{}}
		var seeds []uint64
		for _, pi := range insts {
			if pi.Job != job {
				continue
			}
			k := slotKey{pi.Machine, pi.Slot}
			jo.rank[k] = len(jo.owners)
			jo.owners = append(jo.owners, k)
			seeds = append(seeds, ownerSeed(job, pi.Machine, pi.Slot))
		}
		jo.ring = s.ringFor(seeds)
		return jo
	})
}

// remoteView is what other machines' heartbeats say about one job: the
// items they lease, their live instances of it (and their planned ones while
// they have not announced this plan: those may be starting), and which
// machines are online. Every instance of the job asks for it on each item,
// and a wide job starts many at once, so it is cached until a heartbeat
// arrives, the plan changes, or remoteViewTTL passes (liveness is a matter
// of time).
type remoteView struct {
	plan   string
	gen    uint64
	at     time.Time
	leased map[int64]bool
	alive  map[slotKey]bool
	online []string
}

const remoteViewTTL = 100 * time.Millisecond

func (s *scheduler) remoteView(job, plan string, owners []slotKey, now time.Time) *remoteView {
	n := s.n
	gen := n.live.Gen()
	s.viewMu.Lock()
	if v, _ := s.views.get(job); v != nil && v.plan == plan && v.gen == gen && now.Sub(v.at) < remoteViewTTL && now.Sub(v.at) >= 0 {
		s.viewMu.Unlock()
		return v
	}
	s.viewMu.Unlock()
	me := n.id.String()
	v := &remoteView{plan: plan, gen: gen, at: now, leased: map[int64]bool{}, alive: map[slotKey]bool{}}
	planned := map[string][]slotKey{}
	for _, o := range owners {
		planned[o.m] = append(planned[o.m], o)
	}
	for _, m := range n.live.All() {
		id := m.Heartbeat.Machine
		if id == me {
			continue
		}
		if _, _, ok := n.liveness(id, now); !ok {
			s.leases.forget(id) // its leases lapse
			continue
		}
		v.online = append(v.online, id)
		if m.Heartbeat.PlanHash != plan {
			for _, o := range planned[id] {
				v.alive[o] = true
			}
		}
		for _, ri := range m.Heartbeat.Instances {
			if ri.Job != job {
				continue
			}
			if ri.Item >= 0 {
				v.leased[ri.Item] = true
			}
			if ri.Kind != kindFinished {
				v.alive[slotKey{id, int(ri.Slot)}] = true
			}
		}
	}
	s.viewMu.Lock()
	s.views.put(job, v, 64)
	s.viewMu.Unlock()
	return v
}

// idleSteal is how long an idle instance leaves items reserved for their
// running owners before it takes one itself.
const idleSteal = 2 * time.Second

// ownerGrace is how long after a plan change an instance leaves alone the
// items it took over from another instance: about the time a lease takes
// to reach every node in a heartbeat on a busy host.
const ownerGrace = time.Second

// ownerSeed is an instance's seed in rendezvous hashing.
// It is FNV-1a (64) of "job\x00machine\x00slot", computed without
// allocating: nextItem computes one per planned instance of the job.
func ownerSeed(job, machine string, slot int) uint64 {
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	add := func(s string) {
		for i := 0; i < len(s); i++ {
			h = (h ^ uint64(s[i])) * prime
		}
	}
	add(job)
	h *= prime // the 0x00 separator: h ^ 0 == h
	add(machine)
	h *= prime // the 0x00 separator: h ^ 0 == h
	var buf [20]byte
	for _, c := range strconv.AppendInt(buf[:0], int64(slot), 10) {
		h = (h ^ uint64(c)) * prime
	}
	return h
}

// ownReserve is how many of its lowest free items a running owner keeps
// from thieves (see nextItem).
const ownReserve = 3

// ownerRing maps agenda items to owners by consistent hashing: each owner
// (a planned instance, by its seed) holds ringVNodes points on a ring, and an
// item belongs to the owner of the first point at or after the item's hash.
// Adding or removing an instance moves only about 1/n of the items, and a
// lookup is a binary search, so dispatch stays cheap for wide jobs.
type ownerRing struct {
	points []uint64
	owners []int32

	mu   sync.Mutex
	mine map[int][]int32 // rank -> its item indexes, ascending (see itemsOf)
	n    int             // the item count mine was computed for
}

// itemHash places item index i on the ring.
func itemHash(i int) uint64 { return mix64(uint64(i)*0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) }

// itemBuckets groups the item indexes 0..n-1 by the top bits of their ring
// hash, so the items on an arc of the ring are found without hashing every
// item: an owner's items are those on its arcs. Built once per item count.
type itemBuckets struct {
	shift uint
	start []int32 // bucket b holds order[start[b]:start[b+1]]
	order []int32
}

func newItemBuckets(n int) *itemBuckets {
	idx := make([]int32, n)
	for i := range idx {
		idx[i] = int32(i)
	}
	ib := &itemBuckets{}
	ib.order, ib.shift, ib.start = bucketByTopBits(idx, 2, func(i int32) uint64 { return itemHash(int(i)) })
	return ib
}

// bucketByTopBits orders xs by the top bits of their keys, a counting sort:
// the keys are hashes, spread evenly, so about perBucket share a bucket.
// Bucket b is out[start[b]:start[b+1]]; a key k is in bucket k>>shift.
func bucketByTopBits[T any](xs []T, perBucket int, key func(T) uint64) (out []T, shift uint, start []int32) {
	bits := uint(1)
	for 1<<bits < len(xs)/perBucket && bits < 24 {
		bits++
	}
	shift = 64 - bits
	start = make([]int32, 1<<bits+1)
	for _, x := range xs {
		start[key(x)>>shift+1]++
	}
	for b := 1; b < len(start); b++ {
		start[b] += start[b-1]
	}
	fill := append([]int32(nil), start[:len(start)-1]...)
	out = make([]T, len(xs))
	for _, x := range xs {
		b := key(x) >> shift
		out[fill[b]] = x
		fill[b]++
	}
	return out, shift, start
}

// inRange appends the items whose hash h satisfies lo < h <= hi (lo <= h
// when loIncl).
func (ib *itemBuckets) inRange(lo, hi uint64, loIncl bool, out []int32) []int32 {
	if hi < lo {
		return out
	}
	for b := lo >> ib.shift; ; b++ {
		for _, i := range ib.order[ib.start[b]:ib.start[b+1]] {
			if h := itemHash(int(i)); (h > lo || loIncl && h == lo) && h <= hi {
				out = append(out, i)
			}
		}
		if b == hi>>ib.shift {
			return out
		}
	}
}

// itemsOf returns the indexes (below n) of the items that rank owns on
// ring, ascending: exactly the i with ring.ownerOf(i) == rank.
func (s *scheduler) itemsOf(r *ownerRing, rank, n int) []int32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == n && r.mine != nil {
		if m, ok := r.mine[rank]; ok {
			return m
		}
	} else {
		r.n, r.mine = n, map[int][]int32{}
	}
	var out []int32
	if len(r.points) == 0 {
		out = make([]int32, n) // a ring without owners gives everything to rank 0
		for i := range out {
			out[i] = int32(i)
		}
		if rank != 0 {
			out = nil
		}
	} else {
		ib := s.bucketsFor(n)
		last := r.points[len(r.points)-1]
		for k, o := range r.owners {
			if int(o) != rank {
				continue
			}
			// ownerOf gives h to the first point >= h (wrapping to point
			// 0 past the last): point k owns (points[k-1], points[k]].
			if k > 0 {
				out = ib.inRange(r.points[k-1], r.points[k], false, out)
				continue
			}
			if last < math.MaxUint64 {
				out = ib.inRange(last, math.MaxUint64, false, out)
			}
			out = ib.inRange(0, r.points[0], true, out)
		}
		slices.Sort(out)
	}
	r.mine[rank] = out
	return out
}

// bucketsFor returns the item buckets of n items (cached: item hashes do
// not depend on the job, so jobs of one size share them).
func (s *scheduler) bucketsFor(n int) *itemBuckets {
	s.ringMu.Lock()
	defer s.ringMu.Unlock()
	return s.buckets.getOr(n, 16, func() *itemBuckets { return newItemBuckets(n) })
}

const ringVNodes = 16

func mix64(z uint64) uint64 {
	// splitmix64: cheap, and equal on every node.
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// newOwnerRing places ringVNodes points per seed and sorts them by (place,
// owner), in place in the ring's own two arrays: a counting pass by the top
// bits of the place into about one bucket per point, then an insertion sort
// within each bucket (places are uniform, so buckets hold one or two). Every
// node builds the ring of a wide job when it starts (32,000 points for 2,000
// instances), so it allocates just the ring and the bucket starts.
func newOwnerRing(seeds []uint64) *ownerRing {
	n := len(seeds) * ringVNodes
	r := &ownerRing{points: make([]uint64, n), owners: make([]int32, n)}
	if n == 0 {
		return r
	}
	bits := uint(1)
	for 1<<bits < n && bits < 24 {
		bits++
	}
	shift := 64 - bits
	// next[b] is where bucket b's next point goes: first the bucket's start
	// (counts, then sums), and once every point is placed, its end.
	next := make([]int32, 1<<bits)
	for _, sd := range seeds {
		for v := uint64(0); v < ringVNodes; v++ {
			if b := ringPlace(sd, v) >> shift; b+1 < uint64(len(next)) {
				next[b+1]++
			}
		}
	}
	for b := 1; b < len(next); b++ {
		next[b] += next[b-1]
	}
	for k, sd := range seeds {
		for v := uint64(0); v < ringVNodes; v++ {
			h := ringPlace(sd, v)
			b := h >> shift
			x := next[b]
			next[b]++
			r.points[x], r.owners[x] = h, int32(k)
		}
	}
	lo := int32(0)
	for _, hi := range next {
		sortRingBucket(r.points[lo:hi], r.owners[lo:hi])
		lo = hi
	}
	return r
}

// ringPlace is the place on the ring of a seed's v-th point.
func ringPlace(seed, v uint64) uint64 { return mix64(seed ^ (v+1)*0x9E3779B97F4A7C15) }

// sortRingBucket sorts one bucket's points by (place, owner), moving the
// owners along: an insertion sort, for the few points of a bucket.
func sortRingBucket(points []uint64, owners []int32) {
	for x := 1; x < len(points); x++ {
		for y := x; y > 0 && (points[y] < points[y-1] || points[y] == points[y-1] && owners[y] < owners[y-1]); y-- {
			points[y], points[y-1] = points[y-1], points[y]
			owners[y], owners[y-1] = owners[y-1], owners[y]
		}
	}
}

// ownerOf is the owner of item index i (an index into the seeds).
func (r *ownerRing) ownerOf(i int) int {
	if len(r.points) == 0 {
		return 0
	}
	h := itemHash(i)
	k := sort.Search(len(r.points), func(x int) bool { return r.points[x] >= h })
	if k == len(r.points) {
		k = 0
	}
	return int(r.owners[k])
}

// smallCache is a map that is emptied when it is full: the scheduler's
// caches hold a few entries for the current plan and jobs, and an entry is
// cheap to rebuild. The zero value is ready; callers lock.
type smallCache[K comparable, V any] struct{ m map[K]V }

func (c *smallCache[K, V]) get(k K) (V, bool) {
	v, ok := c.m[k]
	return v, ok
}

// getOr returns the value under k, building and storing it if missing.
func (c *smallCache[K, V]) getOr(k K, max int, build func() V) V {
	if v, ok := c.m[k]; ok {
		return v
	}
	v := build()
	c.put(k, v, max)
	return v
}

// put stores v under k, first emptying the cache if it holds max entries.
func (c *smallCache[K, V]) put(k K, v V, max int) {
	if c.m == nil || len(c.m) >= max {
		c.m = make(map[K]V)
	}
	c.m[k] = v
}

// ringFor returns the (cached) ring of a set of seeds.
func (s *scheduler) ringFor(seeds []uint64) *ownerRing {
	key := uint64(len(seeds))
	for _, sd := range seeds {
		key = mix64(key ^ sd)
	}
	s.ringMu.Lock()
	defer s.ringMu.Unlock()
	return s.rings.getOr(key, 64, func() *ownerRing { return newOwnerRing(seeds) })
}

func (s *scheduler) spec(in *instance, j *ledger.Job, item int64) runtime.Spec {
	n := s.n
	sp := runtime.Spec{Org: n.orgID(), Job: j.ID, Instance: in.id, Machine: n.id.String(), Item: int(item),
		Image: j.Spec.Image, Cmd: j.Spec.Cmd, Env: j.Spec.Env, PidsLimit: 4096,
		WorkDir: filepath.Join(n.opts.DataDir, "work", in.id)}
	sp.Auth = n.registryAuth(j.Spec.Image)
	if j.Spec.Cores > 0 {
		sp.NanoCPUs = j.Spec.Cores * 1_000_000
	}
	if j.Spec.MemoryMB > 0 {
		sp.MemoryBytes = j.Spec.MemoryMB << 20
		sp.MemoryReservationBytes = sp.MemoryBytes
		sp.ShmBytes = sp.MemoryBytes / 4
	}
	for _, g := range in.gpus {
		for _, hg := range n.hw.GPUs {
			if hg.Index == g {
				sp.GPUUUIDs = append(sp.GPUUUIDs, hg.UUID)
			}
		}
	}
	return sp
}

// runningOn returns the machine running item of job: this one if one of
// its instances has it, else the one whose heartbeat holds its lease; ""
// if none is known to.
func (s *scheduler) runningOn(job string, item int64) string {
	s.mu.Lock()
	for _, o := range s.slots {
		if it, _ := o.current(); o.job == job && it == item {
			s.mu.Unlock()
			return s.n.idStr
		}
	}
	s.mu.Unlock()
	return s.leases.holder(job, item)
}

func (s *scheduler) logPath(job string, item int64) string {
	return filepath.Join(s.n.opts.DataDir, "logs", job, strconv.FormatInt(item, 10)+".log")
}

func (s *scheduler) saveLog(job string, item int64, out []byte) error {
	p := s.logPath(job, item)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	return os.WriteFile(p, out, 0o600)
}

// adopt finds this machine's runs left by a previous process (after a crash)
// and adopts them: running ones are waited for, finished ones recorded, and
// runs of cancelled or unknown jobs removed. It runs before the first plan,
// so no item is started twice.
func (s *scheduler) adopt() {
	n := s.n
	org := n.orgID()
	if org == "" {
		return
	}
	s.forEachRun(org, func(drv Driver, err error) {
		n.log.Warn("adoption: listing runs failed", "driver", drv.Name(), "err", err)
	}, s.adoptOne)
}

func (s *scheduler) adoptOne(drv Driver, r runtime.RunInfo) {
	n := s.n
	jobID, instID := r.Labels[runtime.LabelJob], r.Labels[runtime.LabelInstance]
	item, err1 := strconv.ParseInt(r.Labels[runtime.LabelItem], 10, 64)
	slot, err2 := slotOf(instID)
	var j *ledger.Job
	n.snapshot(func(st *ledger.State) {
		if x := st.Jobs[jobID]; x != nil {
			c := *x
			j = &c
		}
	})
	ctx := context.Background()
	if j == nil || j.State != ledger.JobActive || err1 != nil || err2 != nil {
		n.log.Info("adoption: removing a run of an unknown or ended job", "job", jobID, "run", string(r.ID))
		_ = drv.Stop(ctx, r.ID, 0)
		_ = drv.Remove(ctx, r.ID)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !r.Running {
		out, _ := drv.Logs(ctx, r.ID)
		_ = s.saveLog(jobID, item, out)
		s.results[jobID] = append(s.results[jobID], ledger.ItemResult{Item: item, Code: int64(r.ExitCode),
			DurationMS: r.FinishedAt.Sub(r.StartedAt).Milliseconds(), OutputSize: int64(len(out)), Instance: instID})
		_ = drv.Remove(ctx, r.ID)
		n.log.Info("adoption: recorded a run that finished while the node was down", "job", jobID, "item", item, "code", r.ExitCode)
		return
	}
	if s.slots[slot] != nil {
		_ = drv.Stop(ctx, r.ID, 0)
		_ = drv.Remove(ctx, r.ID)
		return
	}
	inst := &instance{id: instID, job: jobID, slot: slot, kind: "primary", started: r.StartedAt.UnixMilli(), drv: drv,
		item: item, run: r.ID, done: make(chan struct{})}
	s.slots[slot] = inst
	wctx, cancel := context.WithCancel(n.ctx)
	inst.cancel = cancel
	n.spawn(func() { s.work(wctx, inst, j, r.ID) })
	n.log.Info("adoption: adopted a running instance", "job", jobID, "item", item, "slot", slot)
}

func slotOf(instID string) (int, error) {
	i := strings.LastIndex(instID, "-s")
	if i < 0 {
		return 0, fmt.Errorf("instance %q has no slot", instID)
	}
	rest := instID[i+2:]
	if k := strings.IndexByte(rest, '-'); k >= 0 {
		rest = rest[:k]
	}
	return strconv.Atoi(rest)
}

// stopAll ends supervision at shutdown. Instances keep running in Docker (or
// as processes) so a restarted node adopts them; only their goroutines stop.
func (s *scheduler) stopAll() {
	s.mu.Lock()
	insts := make([]*instance, 0, len(s.slots))
	for _, in := range s.slots {
		insts = append(insts, in)
	}
	s.mu.Unlock()
	for _, in := range insts {
		in.cancel()
	}
}

// resourceReport is what the heartbeat says about this machine.
func (n *Node) resourceReport() (total, free p2p.Resources, running []p2p.RunningInstance, planHash string) {
	total = p2p.Resources{Cores: int64(n.hw.CPUs) * 10 * int64(n.limits.CPULimit), MemoryMB: n.limits.MemoryLimit,
		DiskMB: n.limits.DiskLimit, GPUs: int64(len(n.limits.GPUs)), Slots: int64(n.limits.MaxConcurrentJobs)}
	free = total
	s := n.sched
	jobs := map[string]*ledger.Job{}
	n.snapshot(func(st *ledger.State) {
		for id, j := range st.Jobs {
			jobs[id] = j
		}
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	slots := make([]int, 0, len(s.slots))
	for k := range s.slots {
		slots = append(slots, k)
	}
	sort.Ints(slots)
	for _, k := range slots {
		in := s.slots[k]
		it, _ := in.current()
		running = append(running, p2p.RunningInstance{Job: in.job, Slot: int64(in.slot), Kind: in.kind, Item: it, Instance: in.id, Started: in.started})
		free.Slots--
		if j := jobs[in.job]; j != nil {
			free.Cores -= j.Spec.Cores
			free.MemoryMB -= j.Spec.MemoryMB
		}
		free.GPUs -= int64(len(in.gpus))
	}
	// Finished items not yet in the ledger stay leased (slot -1), so no other
	// machine picks them up in the meantime.
	jobIDs := make([]string, 0, len(s.results))
	for id := range s.results {
		jobIDs = append(jobIDs, id)
	}
	sort.Strings(jobIDs)
	listed := 0
	for _, id := range jobIDs {
		for _, r := range s.results[id] {
			if listed == maxFinishedInBeat {
				// Only if flushing fails: the rest lose their lease (an
				// item may then run twice; the first result counts).
				break
			}
			listed++
			running = append(running, p2p.RunningInstance{Job: id, Slot: -1, Kind: kindFinished, Item: r.Item, Instance: r.Instance})
		}
	}
	return total, free, running, s.plan.Hash
}

// kindFinished marks a heartbeat lease on an item that finished here and
// whose result is on its way into the ledger.
const kindFinished = "finished"

// activeInstances drops finished-item leases from a heartbeat's list.
func activeInstances(hb p2p.Heartbeat) []p2p.RunningInstance {
	var out []p2p.RunningInstance
	for _, ri := range hb.Instances {
		if ri.Kind != kindFinished {
			out = append(out, ri)
		}
	}
	return out
}

func (n *Node) runningJobs() int {
	s := n.sched
	s.mu.Lock()
	defer s.mu.Unlock()
	jobs := map[string]bool{}
	for _, in := range s.slots {
		jobs[in.job] = true
	}
	return len(jobs)
}

// planAgreement is this node's plan hash and how many online peers announce
// the same one.
func (n *Node) planAgreement() (string, int, int) {
	s := n.sched
	s.mu.Lock()
	h := s.plan.Hash
	s.mu.Unlock()
	agree, peers := 0, 0
	now := time.Now()
	me := n.id.String()
	for _, m := range n.live.All() {
		if m.Heartbeat.Machine == me {
			continue
		}
		if _, _, online := n.liveness(m.Heartbeat.Machine, now); !online {
			continue
		}
		peers++
		if m.Heartbeat.PlanHash == h {
			agree++
		}
	}
	return h, agree, peers
}

// registryAuth is this machine's node.yaml credentials for an image's
// registry, or nil.
func (n *Node) registryAuth(image string) *runtime.RegistryAuth {
	r := n.cfg.RegistryFor(image)
	if r == nil {
		return nil
	}
	return &runtime.RegistryAuth{Server: r.Server, Username: r.Username, Password: r.Password, Token: r.Token}
}
