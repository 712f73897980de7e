package sched

import (
	"context"

	"github.com/cshare/cshare/runtime"
	"github.com/cshare/cshare/smartshare"
)

// Probe reaches into the scheduler's state, under its lock, for tests of
// the node that watch or provoke what it does (package node's mesh tests).
type Probe struct{ s *Scheduler }

// Probe returns the scheduler's probe.
func (s *Scheduler) Probe() Probe { return Probe{s} }

// Plan is the current plan.
func (p Probe) Plan() smartshare.Result {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	return p.s.plan
}

// Instances is how many instances this machine runs now, by job.
func (p Probe) Instances() map[string]int {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	out := map[string]int{}
	for _, in := range p.s.slots {
		out[in.job]++
	}
	return out
}

// CurrentRun is the run of an instance of job, "" while none has one.
func (p Probe) CurrentRun(job string) runtime.RunID {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	for _, x := range p.s.slots {
		if x.job == job {
			if _, r := x.current(); r != "" {
				return r
			}
		}
	}
	return ""
}

// StopWhile runs fn under the lock of the instance whose current run is
// run, then marks the instance told to stop at once, without stopping the
// run: a stop that lands just as the run ends. It reports whether it found
// the instance (fn's error, if any, is returned and nothing is marked).
func (p Probe) StopWhile(run runtime.RunID, fn func() error) (bool, error) {
	p.s.mu.Lock()
	var in *instance
	for _, x := range p.s.slots {
		if _, r := x.current(); r == run {
			in = x
		}
	}
	p.s.mu.Unlock()
	if in == nil {
		return false, nil
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if err := fn(); err != nil {
		return true, err
	}
	in.killed, in.stopAfter = true, true
	return true, nil
}

// LeaseHolder is the machine whose latest heartbeat holds item of job, or
// "" (see leaseBook.holder).
func (p Probe) LeaseHolder(job string, item int64) string { return p.s.leases.holder(job, item) }

// PendingResults counts finished items whose results are not in the
// ledger.
func (p Probe) PendingResults() int { return p.s.pendingResults() }

// Flush writes the pending results to the ledger now.
func (p Probe) Flush(ctx context.Context) { p.s.flush(ctx) }
