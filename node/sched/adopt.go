package sched

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/runtime"
	"github.com/cshare/cshare/runtime/hw"
)

// Adopt finds this machine's runs left by a previous process (after a crash)
// and adopts them: running ones are waited for, finished ones recorded, and
// runs of cancelled or unknown jobs removed. It runs before the first plan,
// so no item is started twice.
func (s *Scheduler) Adopt() {
	org := s.d.Ledger.Org()
	if org == "" {
		return
	}
	s.forEachRun(org, func(drv Driver, err error) {
		s.d.Log.Warn("adoption: listing runs failed", "driver", drv.Name(), "err", err)
	}, s.adoptOne)
}

func (s *Scheduler) adoptOne(drv Driver, r runtime.RunInfo) {
	jobID, instID := r.Labels[runtime.LabelJob], r.Labels[runtime.LabelInstance]
	item, err1 := strconv.ParseInt(r.Labels[runtime.LabelItem], 10, 64)
	slot, err2 := slotOf(instID)
	var j *ledger.Job
	s.d.Ledger.View(func(st *ledger.State) {
		if x := st.Jobs[jobID]; x != nil {
			c := *x
			j = &c
		}
	})
	ctx := context.Background()
	if j == nil || err1 != nil || err2 != nil {
		s.d.Log.Info("adoption: removing a run of an unknown job", "job", jobID, "run", string(r.ID))
		_ = drv.Stop(ctx, r.ID, 0)
		_ = drv.Remove(ctx, r.ID)
		return
	}
	// The job ended while this node was down (other machines ran its
	// last items, or it was cancelled): a run still going is stopped. Its
	// run was real all the same, and the ledger keeps every real run (a
	// late one counts for nothing).
	ended := j.State != ledger.JobActive
	stopped := ended && r.Running
	if stopped {
		r = stopAdopted(ctx, drv, r, s.now)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !r.Running && s.hasResult(jobID, item, instID) {
		_ = drv.Remove(ctx, r.ID) // its result was recorded before the kill (see results.go)
		return
	}
	if ended {
		s.d.Log.Info("adoption: recording a run of a job that ended while the node was down", "job", jobID, "item", item, "state", j.State, "stopped", stopped)
		recordAdopted(ctx, s, drv, r, j, item, instID, stopped)
		return
	}
	if !r.Running {
		recordAdopted(ctx, s, drv, r, j, item, instID, false)
		s.d.Log.Info("adoption: recorded a run that finished while the node was down", "job", jobID, "item", item, "code", r.ExitCode)
		return
	}
	if s.slots[slot] != nil {
		// Another run already holds the slot: this one is stopped, and
		// recorded (a real run).
		s.mu.Unlock()
		r = stopAdopted(ctx, drv, r, s.now)
		s.mu.Lock()
		recordAdopted(ctx, s, drv, r, j, item, instID, true)
		return
	}
	// The run holds its GPUs until it ends, and the instance's later items
	// get them too: without them the plan would give them to another
	// instance at once.
	gpus := gpuIndices(s.d.Hardware, s.d.Log, runtime.GPUsOf(r.Labels))
	inst := &instance{id: instID, job: jobID, slot: slot, kind: "primary", started: r.StartedAt.UnixMilli(), drv: drv,
		gpus: gpus, item: item, run: r.ID, done: make(chan struct{})}
	s.slots[slot] = inst
	wctx, cancel := context.WithCancel(s.ctx)
	inst.cancel = cancel
	s.d.Spawn(func() { s.work(wctx, inst, j, r.ID) })
	s.d.Log.Info("adoption: adopted a running instance", "job", jobID, "item", item, "slot", slot, "gpus", gpus)
}

// stopAdopted kills running run r and returns it ended, with its exit
// as the driver tells it (-1 if it does not within 10 s).
func stopAdopted(ctx context.Context, drv Driver, r runtime.RunInfo, now func() time.Time) runtime.RunInfo {
	_ = drv.Stop(ctx, r.ID, 0)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := drv.Wait(wctx, r.ID)
	r.Running, r.ExitCode, r.FinishedAt = false, st.Code, now()
	if err != nil {
		r.ExitCode = -1
	}
	return r
}

// recordAdopted records for s ended run r of job j's item (by instance instID;
// stopped: by this node) as a result, durably, and removes the run; a
// run whose result the ledger already holds is only removed. s.mu is held.
func recordAdopted(ctx context.Context, s *Scheduler, drv Driver, r runtime.RunInfo, j *ledger.Job, item int64, instID string, stopped bool) {
	res := ledger.ItemResult{Item: item, Code: int64(r.ExitCode), DurationMS: max(0, r.FinishedAt.Sub(r.StartedAt).Milliseconds()),
		Instance: instID, Started: r.StartedAt.UnixMilli(), Stopped: stopped}
	if inLedger(j, s.d.Machine, res) {
		_ = drv.Remove(ctx, r.ID)
		return
	}
	out, _ := drv.Logs(ctx, r.ID)
	_ = s.d.Logs.Save(j.ID, item, out)
	res.OutputSize = int64(len(out))
	if err := s.wal.put(j.ID, res); err != nil {
		s.d.Log.Warn("adoption: could not record a result durably", "job", j.ID, "item", item, "err", err)
	}
	s.results[j.ID] = append(s.results[j.ID], res)
	_ = drv.Remove(ctx, r.ID)
}

// gpuIndices are machine h's GPU indices for the device IDs a run
// records (the inverse of marketsvc's deviceIDs: UUIDs, or indices where
// the UUID is unknown). An ID this machine does not know is left out and
// logged: no plan can give that GPU to anyone here.
func gpuIndices(h hw.Hardware, log *slog.Logger, ids []string) []int {
	var out []int
	for _, id := range ids {
		k := slices.IndexFunc(h.GPUs, func(g hw.GPU) bool { return g.UUID == id || strconv.Itoa(g.Index) == id })
		if k < 0 {
			log.Warn("adoption: a run holds a GPU this machine does not have", "gpu", id)
			continue
		}
		out = append(out, h.GPUs[k].Index)
	}
	return out
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
func (s *Scheduler) stopAll() {
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
