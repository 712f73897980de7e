package sched

import (
	"context"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/runtime"
)

// planPace is the least time between two plans prompted by peers'
// heartbeats, per machine of the org (at least 100 ms, at most a second;
// see paced): a wave of heartbeats becomes a few plans. Plans prompted by
// this node's ledger or instances are not delayed, and every node plans at
// least once a second anyway.
const planPace = 5 * time.Millisecond

// Run is the scheduler loop, until the context given to New is done; then
// it flushes the results and ends the instances' supervision (their runs go
// on, for the next process to adopt).
func (s *Scheduler) Run() {
	defer s.stopAll()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	flushEvery := min(time.Second, s.d.Interval)
	lastFlush := s.now()
	var lastBeat, lastPlan time.Time
	lastSweep := s.now()
	lastAwake := s.now()
	kicked, nudged := false, false
	for {
		select {
		case <-s.ctx.Done():
			s.flush(context.Background())
			return
		case <-s.d.Kick:
			kicked = true
		case <-s.d.Nudge:
			nudged = true
		case <-s.d.Wakeup:
		case <-tick.C:
		}
		if s.d.Disk.Flipped() {
			s.diskFlipped()
		}
		// A loop that ticks every 100 ms and finds much more time gone
		// was not running (SIGSTOP, a suspended laptop): catch up before
		// taking new items.
		awake := s.now()
		if gap := pauseGap(lastAwake, awake); gap > max(s.d.Interval, time.Second) {
			s.d.Log.Warn("this node was not running for a while", "for", gap.Round(time.Millisecond).String())
			s.d.Gate.Hold("pause")
		}
		lastAwake = awake
		s.awake.Store(&awake)
		// Plan on every change of our own at once, on peers' changes at
		// most every planGap, and once a second for liveness (a machine
		// going offline is the absence of a message).
		since := s.now().Sub(lastPlan)
		s.mu.Lock()
		planGap := min(s.paced(100*time.Millisecond, planPace), time.Second)
		s.mu.Unlock()
		if kicked || (nudged && since >= planGap) || since >= time.Second {
			s.reconcile(s.now())
			s.Broadcast()
			kicked, nudged, lastPlan = false, false, s.now()
		}
		// Short items can finish faster than a flush a second: past
		// flushAt finished items, flush at once, or the heartbeat listing
		// them would outgrow a gossip message.
		if s.pendingResults() >= flushAt {
			s.flush(s.ctx)
			lastFlush = s.now()
		}
		s.mu.Lock()
		due := false
		// While the previous heartbeat is still being published, a due one
		// waits for it (its changes came after that one's report).
		if s.beatDue && !s.beating.Load() {
			wait := max(s.beatGap()-s.now().Sub(lastBeat), s.beatSettle()-s.now().Sub(s.beatDueAt))
			if due = wait <= 0; due {
				s.beatDue = false
			} else if wait < 100*time.Millisecond {
				time.AfterFunc(wait, func() { signal(s.d.Wakeup) })
			}
		}
		s.mu.Unlock()
		if due {
			// Published from its own goroutine: Publish waits for the
			// pubsub event loop, which a burst of gossip can keep busy
			// for a while, and this loop must go on starting instances.
			s.beating.Store(true)
			s.d.Spawn(func() {
				defer signal(s.d.Wakeup)
				defer s.beating.Store(false)
				s.d.Beat(s.ctx)
			})
			lastBeat = s.now()
		}
		if s.now().Sub(lastFlush) >= flushEvery {
			s.flush(s.ctx)
			lastFlush = s.now()
		}
		if s.now().Sub(lastSweep) >= sweepEvery {
			s.sweep()
			lastSweep = s.now()
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
func (s *Scheduler) sweep() {
	org := s.d.Ledger.Org()
	if org == "" || !s.sweeping.CompareAndSwap(false, true) {
		return
	}
	s.d.Spawn(func() {
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
			ctx, c := context.WithTimeout(s.ctx, 30*time.Second)
			defer c()
			_ = drv.Stop(ctx, r.ID, 0)
			if err := drv.Remove(ctx, r.ID); err == nil {
				s.d.Log.Info("removed a run left behind", "job", r.Labels[runtime.LabelJob], "item", r.Labels[runtime.LabelItem])
			}
		})
	})
}

// forEachRun calls fn for each of this machine's runs in org, driver by
// driver (a driver serving several names is listed once). A driver whose
// listing fails is skipped, after onErr (if not nil) is told.
func (s *Scheduler) forEachRun(org string, onErr func(Driver, error), fn func(Driver, runtime.RunInfo)) {
	s.d.Drivers.Each(func(drv Driver) {
		ctx, c := context.WithTimeout(s.ctx, 30*time.Second)
		runs, err := drv.List(ctx, map[string]string{runtime.LabelOrg: org, runtime.LabelMachine: s.d.Machine})
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
// about to), it is the current run of one of this machine's instances, or
// the retirer has it.
func (s *Scheduler) supervised(r runtime.RunInfo) bool {
	jobID := r.Labels[runtime.LabelJob]
	active := false
	s.d.Ledger.View(func(st *ledger.State) {
		j := st.Jobs[jobID]
		active = j != nil && j.State == ledger.JobActive
	})
	if s.retire.holds(r.ID) {
		return true // finished, its result on the way to the store (retire.go)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, in := range s.slots {
		if _, run := in.current(); run == r.ID {
			return true // its instance hands it to the retirer when it ends
		}
	}
	return active && r.Running
}

// pauseGap is the time between two readings of the clock by the scheduler
// loop: the larger of the monotonic and the wall-clock differences (a
// process stopped with SIGSTOP sees the monotonic clock advance; a
// suspended machine, on Linux, only the wall clock).
// pausedSinceAwake says whether much more time is gone since the loop last
// ran than its ticks allow: the node was stopped (SIGSTOP, a suspended
// laptop), and a slot taking an item now would take it from a ledger as it
// was before the pause. It holds the gate then, as the loop does when it
// wakes, so that no slot wins that race.
func pausedSinceAwake(s *Scheduler) bool {
	s.pauseMu.Lock()
	defer s.pauseMu.Unlock()
	p, now := s.awake.Load(), s.now()
	if p == nil || pauseGap(*p, now) <= max(s.d.Interval, time.Second) {
		return false
	}
	s.d.Gate.Hold("pause") // before awake moves on: other slots then find the gate closed
	s.awake.Store(&now)
	return true
}

func pauseGap(prev, now time.Time) time.Duration {
	return max(now.Sub(prev), now.Round(0).Sub(prev.Round(0)))
}

// diskFlipped runs on the scheduler's loop after the guard turned full or
// back: a heartbeat tells the org, and output held back is written once
// there is room.
func (s *Scheduler) diskFlipped() {
	s.markBeat()
	s.d.Disk.Resume()
}
