package sched

import (
	"context"
	"log/slog"
	"sync"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/runtime"
)

// A finished run is retired off its instance's path: the instance records
// the result in memory (where it counts as this machine's lease at once)
// and goes on to its next item, while the retirer writes the result's
// write-ahead record, then removes the run. The order that makes a kill -9
// lose nothing holds as before: the result is durable (its record) before
// its run is removed, and until then the run is the record (adoption finds
// it finished and records it). flush writes to the ledger only retired
// results, so a result is never in the ledger while its run is still
// there without a record: adoption would record it a second time.
//
// The retirer writes the records of every run finished since its last
// batch in one synchronous write, so a node of many short items pays one
// disk sync per batch, not one per item on each slot's path; and removing
// a run (a directory and a cgroup for exec, a container for Docker) no
// longer delays the next item.
type retirer struct {
	wal   resultLog
	ctx   context.Context
	spawn func(func())
	log   *slog.Logger
	after func() // called after each batch (wakes the scheduler: results may be flushed)

	mu      sync.Mutex
	queue   []retiree
	pending map[string]bool        // resultKey of results not yet retired
	runs    map[runtime.RunID]bool // runs not yet removed
	busy    bool                   // a goroutine drains the queue
}

// retiree is one finished run: its result and the run to remove ("" for a
// run that never started).
type retiree struct {
	job string
	res ledger.ItemResult
	drv Driver
	run runtime.RunID
}

func newRetirer(ctx context.Context, wal resultLog, spawn func(func()), log *slog.Logger, after func()) *retirer {
	return &retirer{wal: wal, ctx: ctx, spawn: spawn, log: log, after: after,
		pending: map[string]bool{}, runs: map[runtime.RunID]bool{}}
}

// add queues x and makes sure a goroutine retires it.
func (r *retirer) add(x retiree) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.queue = append(r.queue, x)
	r.pending[resultKey(x.job, x.res)] = true
	if x.run != "" {
		r.runs[x.run] = true
	}
	if !r.busy {
		r.busy = true
		r.spawn(r.drain)
	}
}

// drain retires batches until the queue is empty or the node stops (the
// runs left are adopted by the next process).
func (r *retirer) drain() {
	for {
		r.mu.Lock()
		batch := r.queue
		r.queue = nil
		if len(batch) == 0 || r.ctx.Err() != nil {
			r.queue = append(batch, r.queue...)
			r.busy = false
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		if err := r.wal.putAll(batch); err != nil {
			r.log.Warn("could not record results durably; they are kept in memory until written to the ledger", "results", len(batch), "err", err)
		}
		for _, x := range batch {
			if x.run != "" {
				_ = x.drv.Remove(context.Background(), x.run)
			}
		}
		r.mu.Lock()
		for _, x := range batch {
			delete(r.pending, resultKey(x.job, x.res))
			delete(r.runs, x.run)
		}
		r.mu.Unlock()
		r.after()
	}
}

// retired reports whether job's result res may go to the ledger: it is
// not waiting for its record or its run's removal.
func (r *retirer) retired(job string, res ledger.ItemResult) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.pending[resultKey(job, res)]
}

// holds reports whether run is a finished run waiting for its removal
// (sweep leaves it alone).
func (r *retirer) holds(run runtime.RunID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runs[run]
}
