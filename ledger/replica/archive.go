package replica

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/store"
)

// Finished jobs on this machine's disk (docs/design.md §5.7). The fold
// hands every job that leaves the State at a checkpoint to the State's
// sink (ledger.State.SetLeftSink); the replica's sink encodes it at once
// (ledger.EncodeArchive: a header and pages of items with their runs, so
// the job's items are not kept in memory) and the encodings are
// written to the store (store.PutJobs) before the next snapshot is
// published, so a snapshot that shows a job archived finds its items on
// disk. A re-fold writes a job again (the same bytes); a job dropped by
// jobs.retain is deleted.

// archiver holds the encodings not yet written.
type archiver struct {
	st    *store.Store
	mu    sync.Mutex
	ops   []store.JobOp
	bytes int
	err   error // the first failed encoding or write since the last flush
}

// archiveFlushAt is how many bytes of encodings the sink keeps before it
// writes them itself (a re-fold of a long history between two publishes).
const archiveFlushAt = 16 << 20

// take is the State's sink: it encodes l and queues it.
func (r *Replica) take(l ledger.LeftJob) {
	a := &r.arch
	a.mu.Lock()
	defer a.mu.Unlock()
	op := store.JobOp{ID: l.Job.ID}
	if !l.Dropped {
		parts, err := ledger.EncodeArchive(l.Job)
		if err != nil {
			a.err = errors.Join(a.err, err)
			return
		}
		op.Parts = parts
	}
	a.ops = append(a.ops, op)
	for _, p := range op.Parts {
		a.bytes += len(p)
	}
	if a.bytes >= archiveFlushAt && a.st != nil {
		a.flushLocked()
	}
}

func (a *archiver) flushLocked() {
	if len(a.ops) > 0 {
		a.err = errors.Join(a.err, a.st.PutJobs(a.ops))
	}
	a.ops, a.bytes = nil, 0
}

// archiveLocked makes the Log's State hand leaving jobs to take (a re-fold
// from genesis starts a State of its own), and writes what it took. r.mu
// must be held.
func (r *Replica) archiveLocked() {
	if st := r.lg.State(); !st.HasLeftSink() {
		st.SetLeftSink(r.take)
	}
	a := &r.arch
	a.mu.Lock()
	defer a.mu.Unlock()
	a.st = r.st
	a.flushLocked()
	if a.err != nil {
		r.log.Warn("ledger: finished jobs not kept on disk: job items will not list them", "err", a.err)
		a.err = nil
	}
}

// ErrNotArchived says a finished job's items are not on this machine's
// disk: it joined the org from a checkpoint after the job left the State.
var ErrNotArchived = errors.New("replica: the job's items are not on this machine")

// ArchivedJob is finished job id as it left the State, without its items
// and runs (ArchivedPage has them), from this machine's disk;
// ErrNotArchived when it has none.
func (r *Replica) ArchivedJob(id string) (*ledger.Job, error) {
	b, err := r.st.JobPart(id, 0)
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrNotArchived
	}
	if err != nil {
		return nil, err
	}
	j, err := ledger.DecodeArchiveHeader(b)
	if err != nil {
		return nil, fmt.Errorf("replica: job %s on disk: %w", id, err)
	}
	return j, nil
}

// ArchivedPage is page p of finished job id's items, with their runs
// (ledger.ArchivePage items a page), from this machine's disk;
// ErrNotArchived when it has none.
func (r *Replica) ArchivedPage(id string, p int) (ledger.ArchivedPage, error) {
	b, err := r.st.JobPart(id, 1+p)
	if errors.Is(err, store.ErrNotFound) {
		return ledger.ArchivedPage{}, ErrNotArchived
	}
	if err != nil {
		return ledger.ArchivedPage{}, err
	}
	pg, err := ledger.DecodeArchivePage(b)
	if err != nil {
		return ledger.ArchivedPage{}, fmt.Errorf("replica: job %s on disk: %w", id, err)
	}
	return pg, nil
}
