package sched

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"

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
	if j == nil || j.State != ledger.JobActive || err1 != nil || err2 != nil {
		s.d.Log.Info("adoption: removing a run of an unknown or ended job", "job", jobID, "run", string(r.ID))
		_ = drv.Stop(ctx, r.ID, 0)
		_ = drv.Remove(ctx, r.ID)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !r.Running && s.hasResult(jobID, item, instID) {
		_ = drv.Remove(ctx, r.ID) // its result was recorded before the kill (see results.go)
		return
	}
	if !r.Running {
		out, _ := drv.Logs(ctx, r.ID)
		_ = s.d.Logs.Save(jobID, item, out)
		res := ledger.ItemResult{Item: item, Code: int64(r.ExitCode), DurationMS: r.FinishedAt.Sub(r.StartedAt).Milliseconds(),
			OutputSize: int64(len(out)), Instance: instID, Started: r.StartedAt.UnixMilli()}
		if err := s.wal.put(jobID, res); err != nil {
			s.d.Log.Warn("adoption: could not record a result durably", "job", jobID, "item", item, "err", err)
		}
		s.results[jobID] = append(s.results[jobID], res)
		_ = drv.Remove(ctx, r.ID)
		s.d.Log.Info("adoption: recorded a run that finished while the node was down", "job", jobID, "item", item, "code", r.ExitCode)
		return
	}
	if s.slots[slot] != nil {
		_ = drv.Stop(ctx, r.ID, 0)
		_ = drv.Remove(ctx, r.ID)
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
