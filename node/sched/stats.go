package sched

import (
	"context"
	"time"

	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/p2p"
	"github.com/cshare/cshare/runtime"
)

// What runs now: while a run goes on, its instance samples the driver's
// stats (docker's stats API; exec: its cgroup, or /proc) every statsEvery,
// and the last sample is in the read view (job show on this machine) and
// in the heartbeat (job show and machine show everywhere).

// statsEvery is how often a run's use is sampled.
const statsEvery = 5 * time.Second

// use is a run's last sampled use.
type use struct {
	CPUMilli    int64 // millicores: 1000 is one core busy
	MemoryBytes int64
	OOMKilled   bool // the instance's last run was killed at its memory cap
}

// Use is an instance's run's last sampled use, as the read view shows it.
type Use use

// sample samples run's use into in until done is closed or ctx ends.
func (s *Scheduler) sample(ctx context.Context, in *instance, run runtime.RunID, done <-chan struct{}) {
	t := time.NewTicker(statsEvery)
	defer t.Stop()
	for {
		sctx, cancel := context.WithTimeout(ctx, statsEvery)
		st, err := in.drv.Stats(sctx, run)
		cancel()
		if err == nil {
			in.mu.Lock()
			in.use = use{CPUMilli: int64(st.CPUPercent * 10), MemoryBytes: max(st.MemoryBytes, 0), OOMKilled: in.use.OOMKilled}
			in.mu.Unlock()
			s.mu.Lock()
			s.publish()
			s.mu.Unlock()
		}
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// endUse clears in's use when its run ends, remembering whether the run
// was killed at its memory cap.
func endUse(in *instance, oom bool) {
	in.mu.Lock()
	in.use = use{OOMKilled: oom}
	in.mu.Unlock()
}

// MachineUse is what a machine's heartbeat says its instances use now.
func MachineUse(hb p2p.Heartbeat) *api.MachineUsage {
	u := &api.MachineUsage{DiskUsedMB: max(hb.Total.DiskMB-hb.Free.DiskMB, 0)}
	var cpu int64
	for _, ri := range ActiveInstances(hb) {
		u.Instances++
		cpu += ri.CPUMilli
		u.MemoryBytes += ri.MemoryBytes
	}
	u.CPUPercent = float64(cpu) / 10
	return u
}
