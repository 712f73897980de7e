package sched

import (
	"context"
	"errors"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/cshare/cshare/internal/diskguard"
	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/runtime"
)

// work is an instance's loop: take the next free item, run it, record it.
func (s *Scheduler) work(ctx context.Context, in *instance, j *ledger.Job, adoptRun runtime.RunID) {
	defer func() {
		s.mu.Lock()
		delete(s.inUse, in)
		if s.slots[in.slot] == in {
			delete(s.slots, in.slot)
		}
		s.wantBeat()
		s.mu.Unlock()
		close(in.done)
		s.kick()
	}()
	for ctx.Err() == nil {
		in.mu.Lock()
		stop := in.stopAfter
		in.mu.Unlock()
		// An adopted run is this instance's current item: told to stop
		// after it (the first plan after a restart lacks this machine
		// until its first heartbeat), the instance still waits for it and
		// records it. Returning at once freed the slot while the run went
		// on, unsupervised and unleased, and the next plan started another
		// instance there that could take the same item again.
		if stop && adoptRun == "" {
			return
		}
		var item int64
		var run runtime.RunID
		var began, ranFrom time.Time // ranFrom: when the run was running (its item timeout counts from then)
		if adoptRun != "" {
			run, adoptRun = adoptRun, ""
			it, _ := in.current()
			item, began = it, time.UnixMilli(in.started) // adopted: the run's own start
			ranFrom = began
			s.admit(in, s.capsFor(j), true)
		} else {
			// Items wait until this machine holds every dataset the job
			// mounts (the fetch starts with the job's first instance here);
			// with one that can never be mounted, they fail with the reason.
			wait, unmountable := s.d.Datasets.Wait(j)
			if wait != nil {
				select {
				case <-ctx.Done():
					return
				case <-wait:
				}
				continue
			}
			var ok bool
			c := s.capsFor(j)
			// catching up, or the disk full (node/disk.go): no new item;
			// nor while its caps do not fit beside the runs going on.
			if !pausedSinceAwake(s) && !s.d.Gate.Closed() && s.d.Disk.MayStartItem() && s.admit(in, c, false) {
				if item, ok = s.nextItem(in); !ok {
					s.release(in)
				}
			}
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
			began = s.now()
			err := unmountable
			if err == nil {
				var sp runtime.Spec
				if sp, err = s.spec(in, j, item, c); err == nil {
					run, err = in.drv.Start(ctx, sp)
				}
			}
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				s.record(in, item, ledger.ItemResult{Item: item, Code: -1, DurationMS: s.now().Sub(began).Milliseconds(), Instance: in.id, Error: err.Error(), Started: began.UnixMilli()}, "")
				s.release(in)
				continue
			}
			ranFrom = s.now()
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
		s.d.Metrics.Started.Inc()
		limit := s.itemTimeout(in.job)
		var timedOut atomic.Bool
		var timer *time.Timer
		if limit > 0 {
			// Stopped, not killed: the run fails (and is retried per
			// --retries) with an error naming the timeout.
			timer = time.AfterFunc(max(0, limit-s.now().Sub(ranFrom)), func() {
				timedOut.Store(true)
				sctx, c := context.WithTimeout(context.Background(), timeoutGrace+30*time.Second)
				defer c()
				_ = in.drv.Stop(sctx, run, timeoutGrace)
			})
		}
		sampled := make(chan struct{})
		var diskOver atomic.Int64
		stopSampler := startSampler(ctx, s, in, run, sampled, j.Spec.DiskMB, &diskOver)
		st, err := in.drv.Wait(ctx, run)
		stopSampler()
		close(sampled)
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			// The node is stopping: the run goes on (a container outlives
			// its node) and the restarted node adopts it; nothing to record.
			return
		}
		dur := s.now().Sub(began)
		in.mu.Lock()
		// A run that exited 0 ended on its own: a stop that came after
		// (told while it was exiting) did not end it, and its item is done.
		killed := in.killed && (err != nil || st.Code != 0)
		in.mu.Unlock()
		out, _ := in.drv.Logs(context.Background(), run)
		size := int64(len(out))
		if len(out) > 0 || err == nil {
			s.d.Disk.SaveLog(in.job, item, out)
		}
		res := ledger.ItemResult{Item: item, Code: int64(st.Code), DurationMS: dur.Milliseconds(), OutputSize: size, Instance: in.id,
			Error: st.Err, Started: began.UnixMilli(), Stopped: killed}
		if err != nil {
			res.Code, res.Error = -1, err.Error()
		}
		if st.OOMKilled && !killed {
			res.OOMKilled = true
			res.Error = oomError(res.Error)
		}
		endUse(in, res.OOMKilled)
		if wrote := diskOver.Load(); wrote > 0 && !killed && (err != nil || st.Code != 0) {
			res.Error = diskError(j.Spec.DiskMB, wrote)
		}
		if timedOut.Load() && !killed && (err != nil || st.Code != 0) {
			res.TimedOut, res.Error = true, timeoutError(limit)
			s.d.Log.Info("item stopped at its timeout", "job", in.job, "item", item, "timeout", limit)
		}
		// The retirer makes the result durable, then removes the run: a
		// kill in between leaves the run for adoption, which finds the
		// record or, before it, the finished run. A stopped run's "result"
		// only tells the ledger it ran (the item goes back to the agenda).
		s.record(in, item, res, run)
		s.release(in)
		in.mu.Lock()
		in.run = "" // only now: the retirer holds the run (see sweep)
		if killed {
			// Preempted or cancelled: no result; the item goes back to the agenda.
			in.item = -1
		}
		in.mu.Unlock()
		if killed {
			return
		}
	}
}

// flushAt is the number of finished items not yet in the ledger that makes
// the scheduler write their results at once; MaxFinishedInBeat is the most a
// heartbeat lists (with MaxConcurrentJobsLimit running instances, it stays
// well under the 64 KiB gossip limit).
const (
	flushAt           = 200
	MaxFinishedInBeat = 300
)

// pendingResults counts finished items whose results are not in the ledger.
func (s *Scheduler) pendingResults() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := 0
	for _, rs := range s.results {
		k += len(rs)
	}
	return k
}

// markBeat asks for a heartbeat: an item was leased.
func (s *Scheduler) markBeat() {
	s.mu.Lock()
	s.wantBeat()
	s.mu.Unlock()
	signal(s.d.Wakeup)
}

// wantBeat marks a heartbeat due: what this machine runs changed, so the
// read view is published again too. s.mu must be held.
func (s *Scheduler) wantBeat() {
	s.publish()
	if !s.beatDue {
		s.beatDue, s.beatDueAt = true, s.now()
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
func (s *Scheduler) beatSettle() time.Duration {
	return s.paced(20*time.Millisecond, beatPace)
}

// beatGap: see beatPace. s.mu must be held.
func (s *Scheduler) beatGap() time.Duration {
	return s.paced(100*time.Millisecond, beatPace)
}

// paced is per (per machine of the org), at least floor, at most a quarter
// interval (unless floor is more). s.mu must be held.
func (s *Scheduler) paced(floor, per time.Duration) time.Duration {
	return max(floor, min(time.Duration(len(s.planIn.Machines))*per, s.d.Interval/4))
}

// record keeps a finished item's result until flush writes it to the
// ledger: in s.results, where it counts as this machine's lease at once,
// and with the retirer, which makes it durable in the store (results.go)
// and then removes its run ("" for none).
func (s *Scheduler) record(in *instance, item int64, r ledger.ItemResult, run runtime.RunID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.results[in.job] = append(s.results[in.job], r)
	s.retire.add(retiree{job: in.job, res: r, drv: in.drv, run: run})
	in.mu.Lock()
	in.item = -1
	in.mu.Unlock()
	s.publish()
}

// flush writes one job.results entry per job with everything finished since
// the last flush: the ledger grows by batches, not by items.
func (s *Scheduler) flush(ctx context.Context) {
	// Results stay in s.results (and so count as leased for dispatch) until
	// their entry is in the ledger; only then are they dropped here. Only
	// retired ones are written (see retire.go).
	s.mu.Lock()
	pending := make(map[string][]ledger.ItemResult, len(s.results))
	for id, rs := range s.results {
		for _, r := range rs {
			if s.retire.retired(id, r) {
				pending[id] = append(pending[id], r)
			}
		}
	}
	s.mu.Unlock()
	ids := make([]string, 0, len(pending))
	for id := range pending {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		rs := pending[id]
		// The runs a cancel stopped tell nobody anything: the job is over,
		// and every machine of the org writing an entry at each cancel
		// would only fork the ledger. Runs stopped because the job ended
		// (a second run of its last item, taken at once by two slots) are
		// written: they were real work, and there are few of them.
		cancelled := false
		s.d.Ledger.View(func(st *ledger.State) { cancelled = st.Jobs[id] != nil && st.Jobs[id].State == ledger.JobCancelled })
		if cancelled {
			kept := make([]ledger.ItemResult, 0, len(rs))
			var dropped []ledger.ItemResult
			for _, r := range rs {
				if r.Stopped {
					dropped = append(dropped, r)
				} else {
					kept = append(kept, r)
				}
			}
			if len(dropped) > 0 {
				s.wal.forget(id, dropped)
			}
			rs = kept
		}
		full := false
		gone := map[string]bool{} // resultKey of what left s.results (in the ledger, or refused for good)
		for len(rs) > 0 {
			k := min(len(rs), 500)
			if _, err := s.d.Ledger.Write(ctx, ledger.KindJobResults, ledger.JobResults{Job: id, Results: rs[:k]}); err != nil && !errors.Is(err, ledger.ErrNotAuthority) {
				s.d.Log.Debug("recording results", "job", id, "err", err)
				if full = errors.Is(err, diskguard.ErrFull); full {
					break // kept, in memory, until there is room (node/disk.go)
				}
			}
			s.wal.forget(id, rs[:k]) // in the ledger now (or refused for good)
			for _, r := range rs[:k] {
				gone[resultKey(id, r)] = true
			}
			rs = rs[k:]
		}
		s.mu.Lock()
		// The cancelled job's stopped runs dropped above go too; kept are
		// those not written (the disk full: in memory until there is room,
		// node/disk.go), those not retired yet and those finished since.
		for _, r := range pending[id] {
			if r.Stopped && cancelled {
				gone[resultKey(id, r)] = true
			}
		}
		s.results[id] = slices.DeleteFunc(slices.Clone(s.results[id]), func(r ledger.ItemResult) bool { return gone[resultKey(id, r)] })
		if len(s.results[id]) == 0 {
			delete(s.results, id)
		}
		s.mu.Unlock()
		if full {
			return
		}
	}
}

// spec is the run of item by in, with caps c (capsFor); an error when the
// job's registry credentials cannot be opened here (the item fails with
// it, naming registry_auth, rather than pulling without them).
func (s *Scheduler) spec(in *instance, j *ledger.Job, item int64, c caps) (runtime.Spec, error) {
	sp := runtime.Spec{Org: s.d.Ledger.Org(), Job: j.ID, Instance: in.id, Machine: s.d.Machine, Item: int(item),
		Image: j.Spec.Image, Cmd: j.Spec.Cmd, Entrypoint: j.Spec.Entrypoint, Env: j.Spec.Env, PidsLimit: 4096,
		WorkDir: filepath.Join(s.d.DataDir, "work", in.id)}
	var err error
	if sp.Auth, err = s.d.RegistryAuth(j.Spec.Image, j.Spec.RegistryAuth, j.Submitter); err != nil {
		return sp, err
	}
	if len(j.Spec.Datasets) > 0 {
		mounts, env := s.d.Datasets.Mounts(j, sp.WorkDir)
		sp.Mounts = append(sp.Mounts, mounts...)
		sp.Env = maps.Clone(sp.Env) // the job's map is the ledger's: never written
		if sp.Env == nil {
			sp.Env = map[string]string{}
		}
		maps.Copy(sp.Env, env)
	}
	applyCaps(&sp, c)
	if j.Spec.MemoryMB > 0 {
		sp.MemoryReservationBytes = sp.MemoryBytes
		sp.ShmBytes = sp.MemoryBytes / 4
	}
	for _, g := range in.gpus {
		for _, hg := range s.d.Hardware.GPUs {
			if hg.Index == g {
				sp.GPUUUIDs = append(sp.GPUUUIDs, hg.UUID)
			}
		}
	}
	return sp, nil
}

// RunningOn returns the machine running item of job: this one if one of
// its instances has it, else the one whose heartbeat holds its lease; ""
// if none is known to. It reads the read view, not the scheduler.
func (s *Scheduler) RunningOn(job string, item int64) string {
	if s.View().runsItem(job, item) {
		return s.d.Machine
	}
	return s.leases.holder(job, item)
}
