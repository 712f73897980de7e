package sched

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cshare/cshare/ledger/jobspec"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/p2p"
	"github.com/cshare/cshare/runtime"
)

// What runs now: while a run goes on, its instance samples the driver's
// stats (docker's stats API; exec: its cgroup, or /proc) every statsEvery
// from firstSample on,
// and the last sample is in the read view (job show on this machine) and
// in the heartbeat (job show and machine show everywhere).

// statsEvery is how often a run's use is sampled; the first sample is
// firstSample after the run starts.
const (
	statsEvery  = 5 * time.Second
	firstSample = 500 * time.Millisecond
)

// use is a run's last sampled use.
type use struct {
	CPUMilli    int64 // millicores: 1000 is one core busy
	MemoryBytes int64
	DiskBytes   int64 // what the run has written (writable layer, work dir)
	OOMKilled   bool  // the instance's last run was killed at its memory cap
}

// diskError is the error recorded for a run stopped for writing more than
// its job's --disk.
func diskError(diskMB, wrote int64) string {
	return fmt.Sprintf("disk: stopped after writing %s to its writable layer or work directory, past its disk request of %s (job submit --disk)",
		jobspec.FormatBytes(float64(wrote)), jobspec.FormatMB(diskMB))
}

// startSampler samples run (sample) from firstSample after its start: a
// short run is not sampled (a sample costs the driver a quarter second of
// measuring, exec: reading /proc, more than many items take), and costs
// no goroutine, only a timer. stop, called once the run ended and before
// done is closed, returns once no sampler can start any more.
func startSampler(ctx context.Context, s *Scheduler, in *instance, run runtime.RunID, done <-chan struct{}, diskMB int64, over *atomic.Int64) (stop func()) {
	spawned := make(chan struct{})
	t := time.AfterFunc(firstSample, func() {
		defer close(spawned)
		s.d.Spawn(func() { s.sample(ctx, in, run, done, diskMB, over) })
	})
	return func() {
		if !t.Stop() {
			<-spawned // Spawn is called while this instance's goroutine lives
		}
	}
}

// Use is an instance's run's last sampled use, as the read view shows it.
type Use use

// sample samples run's use into in until done is closed or ctx ends. With
// a disk request (diskMB > 0) it also measures what the run has written
// (its writable layer or work directory) and, past the request, stops the
// run and records the size in over: its item fails naming the disk. It
// starts firstSample after the run (startSampler).
func (s *Scheduler) sample(ctx context.Context, in *instance, run runtime.RunID, done <-chan struct{}, diskMB int64, over *atomic.Int64) {
	select {
	case <-done:
		return
	default:
	}
	t := time.NewTicker(statsEvery)
	defer t.Stop()
	for {
		sctx, cancel := context.WithTimeout(ctx, statsEvery)
		st, err := in.drv.Stats(sctx, run)
		var disk int64
		if du, ok := in.drv.(runtime.DiskUser); ok {
			disk, _ = du.DiskUsage(sctx, run)
		}
		cancel()
		if err == nil {
			in.mu.Lock()
			in.use = use{CPUMilli: int64(st.CPUPercent * 10), MemoryBytes: max(st.MemoryBytes, 0), DiskBytes: max(disk, 0), OOMKilled: in.use.OOMKilled}
			in.mu.Unlock()
			s.mu.Lock()
			s.publish()
			s.mu.Unlock()
		}
		if diskMB > 0 && disk > diskMB<<20 && over.Load() == 0 {
			over.Store(disk)
			s.d.Log.Info("run stopped: it wrote more than its disk request", "job", in.job, "instance", in.id, "bytes", disk, "disk_mb", diskMB)
			sctx, c := context.WithTimeout(context.Background(), timeoutGrace+30*time.Second)
			_ = in.drv.Stop(sctx, run, timeoutGrace)
			c()
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
func MachineUse(hb p2p.Heartbeat) *api.MachineUse {
	u := &api.MachineUse{DiskUsedMB: max(hb.Total.DiskMB-hb.Free.DiskMB, 0)}
	var cpu int64
	for _, ri := range ActiveInstances(hb) {
		u.Instances++
		cpu += ri.CPUMilli
		u.MemoryBytes += ri.MemoryMB << 20
	}
	u.CPUPercent = float64(cpu) / 10
	return u
}

// diskUse is what cshare's runs, outputs and datasets use of the disk:
// the data dir (ledger, dataset blocks and trees, logs, exec runs' work
// dirs), walked at most every diskEvery on a goroutine of its own, plus
// the writable layers of the docker runs going on as last sampled.
type diskUse struct {
	bytes   atomic.Int64 // the data dir, at the last walk
	at      atomic.Int64 // unix ms of the last walk's start
	walking atomic.Bool
}

// diskEvery is how often the data dir is walked for its size.
const diskEvery = 30 * time.Second

// usedMB is what cshare's files in dataDir use of the disk, in MB, as
// last measured (and starts a new measure with spawn when that is older
// than diskEvery), plus extra bytes (the docker runs' writable layers).
func (d *diskUse) usedMB(ctx context.Context, now time.Time, dataDir string, spawn func(func()), extra int64) int64 {
	if now.UnixMilli()-d.at.Load() >= diskEvery.Milliseconds() && d.walking.CompareAndSwap(false, true) {
		d.at.Store(now.UnixMilli())
		spawn(func() {
			defer d.walking.Store(false)
			d.bytes.Store(runtime.DirSize(ctx, dataDir))
		})
	}
	used := d.bytes.Load() + extra
	return (used + 1<<20 - 1) >> 20
}
