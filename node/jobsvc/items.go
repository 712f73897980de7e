package jobsvc

import (
	"context"
	"net/http"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
)

// Listing a job's items without holding them: a job may have a million
// items, and a million runs. ListJobItems reads the items a page at a time
// from the latest snapshot (copying that page only), then renders and
// emits the page, so that a slow client never holds a snapshot of a job
// long gone. The runs of an item are found through a runIndex, which links the
// job's runs (kept in fold order, in chunks that never change once
// written) item by item without copying them.

// itemsPage is how many items ListJobItems copies under the read lock at a
// time.
const itemsPage = 1000

// ListJobItems implements api.JobsAPI: the job's items from the one after
// p.After (an item number) on, at most p.Limit of them.
func (s *Service) ListJobItems(ctx context.Context, ref string, p api.Page, emit func(api.ItemInfo) error) error {
	if err := s.needOrg(); err != nil {
		return err
	}
	after, hasAfter, err := api.ItemCursor(p.After)
	if err != nil {
		return err
	}
	j, err := s.resolveJob(ref)
	if err != nil {
		return err
	}
	lo, hi := j.Spec.RangeStart, j.Spec.RangeEnd
	if hasAfter {
		if after >= hi {
			return nil
		}
		lo = max(lo, after+1)
	}
	if p.Limit > 0 && p.Limit <= hi-lo {
		hi = lo + p.Limit - 1
	}
	return s.streamItems(ctx, j.ID, lo, hi, emit)
}

// JobItems is every item of a job, for callers in this process (tests):
// the API streams them (ListJobItems).
func (s *Service) JobItems(ctx context.Context, id string) ([]api.ItemInfo, error) {
	out := []api.ItemInfo{}
	err := s.ListJobItems(ctx, id, api.Page{}, func(it api.ItemInfo) error {
		out = append(out, keepItem(it))
		return nil
	})
	return out, err
}

// AllItems renders job j's agenda, with every run of each item, whoever
// may see it (tests); a job voided since is empty.
func (s *Service) AllItems(j *ledger.Job) []api.ItemInfo {
	out := []api.ItemInfo{}
	_ = s.streamItems(context.Background(), j.ID, j.Spec.RangeStart, j.Spec.RangeEnd, func(it api.ItemInfo) error {
		out = append(out, keepItem(it))
		return nil
	})
	return out
}

// keepItem is it with a Runs of its own: streamItems reuses its Runs.
func keepItem(it api.ItemInfo) api.ItemInfo {
	it.Runs = append([]api.RunInfo{}, it.Runs...)
	return it
}

// streamItems emits items lo..hi (inclusive, within its range) of job id,
// a page at a time (see above). The ItemInfo's Runs is reused for the next
// item: emit must not keep it.
func (s *Service) streamItems(ctx context.Context, id string, lo, hi int64, emit func(api.ItemInfo) error) error {
	ix := runIndex{lo: lo, hi: hi}
	page := make([]ledger.Item, 0, min(itemsPage, hi-lo+1))
	runs := make([]api.RunInfo, 0, 4)
	for k := lo; k <= hi; {
		if err := ctx.Err(); err != nil {
			return err
		}
		m := min(int64(itemsPage), hi-k+1)
		gone, left, start := false, false, int64(0)
		var late []ledger.Run
		s.snapshot(func(st *ledger.State) {
			j := st.Jobs[id]
			if j == nil {
				gone = true
				return
			}
			if j.Archived != nil {
				left, start, late = true, j.Spec.RangeStart, j.Archived.Late
				return
			}
			off := k - j.Spec.RangeStart
			page = j.Items.AppendRange(page[:0], int(off), int(off+m))
			ix.sync(j)
		})
		if gone {
			return api.Errorf(http.StatusNotFound, "job %s is no longer in the ledger: an entry that came since voided its submission, or it ended longer ago than the org's jobs.retain", id)
		}
		if left { // the job left the State: the rest from this machine's disk
			return s.streamArchived(ctx, id, start, k, hi, late, emit)
		}
		ix.index()
		for i, it := range page {
			item := k + int64(i)
			runs = ix.runsOf(item, runs[:0])
			if err := emit(itemInfo(item, it, runs)); err != nil {
				return err
			}
		}
		k += m
	}
	return nil
}

// itemInfo renders item number item, its runs being runs.
func itemInfo(item int64, it ledger.Item, runs []api.RunInfo) api.ItemInfo {
	status := "pending"
	switch it.Status {
	case ledger.ItemDone:
		status = "done"
	case ledger.ItemFailed:
		status = "failed"
	}
	return api.ItemInfo{Item: item, Status: status, Attempts: it.Attempts, Code: it.Code,
		DurationMS: it.DurationMS, OutputSize: it.OutputSize, Machine: it.Machine, Runs: runs}
}

// runInfo renders a run.
func runInfo(r *ledger.Run) api.RunInfo {
	ri := api.RunInfo{Machine: r.Machine, Instance: r.Instance, ExitCode: r.Code, Counted: r.Counted, Stopped: r.Stopped,
		OOMKilled: r.OOMKilled, TimedOut: r.TimedOut}
	if r.Started != 0 {
		ri.Start = api.FormatTimeMS(time.UnixMilli(r.Started))
		ri.End = api.FormatTimeMS(time.UnixMilli(r.Started + r.DurationMS))
	}
	return ri
}

// runIndex finds the runs of items lo..hi of one job, in fold order. sync
// takes the job's run chunks as they are, copying
// their headers only: a chunk's runs never change once added (the fold
// appends past them); index (without the lock) links the runs not read
// yet to their items. 8 bytes per item of the range and 12 per run in it.
type runIndex struct {
	lo, hi int64
	job    *ledger.Job    // whose runs are indexed: a re-fold makes another Job
	chunks [][]ledger.Run // the job's runs at the last sync (shared, capped)
	rc, ro int            // the next run to index: chunk and offset
	first  []int32        // per item (item-lo): 1 + its first run's index in at, 0 for none
	last   []int32        // per item: 1 + its last run's index in at
	next   []int32        // per indexed run: 1 + the index of its item's next run
	at     []runAt        // per indexed run: where it is in chunks
}

type runAt struct{ chunk, off int32 }

// sync takes j's runs (a snapshot's job).
func (x *runIndex) sync(j *ledger.Job) {
	if j != x.job || len(j.Runs) < len(x.chunks) || (len(x.chunks) > 0 && len(x.chunks[0]) > 0 && &j.Runs[0][0] != &x.chunks[0][0]) {
		// Another fold's job (or its runs): start again.
		x.job, x.chunks, x.rc, x.ro = j, x.chunks[:0], 0, 0
		clear(x.first)
		clear(x.last)
		x.next, x.at = x.next[:0], x.at[:0]
	}
	// Chunks before the last one taken are full; the last may have grown.
	keep := max(len(x.chunks)-1, 0)
	x.chunks = x.chunks[:keep]
	for _, c := range j.Runs[keep:] {
		x.chunks = append(x.chunks, c[:len(c):len(c)])
	}
}

// index links the runs taken since the last index to their items.
func (x *runIndex) index() {
	for ; x.rc < len(x.chunks); x.rc, x.ro = x.rc+1, 0 {
		c := x.chunks[x.rc]
		for ; x.ro < len(c); x.ro++ {
			item := c[x.ro].Item
			if item < x.lo || item > x.hi {
				continue
			}
			if x.first == nil {
				x.first = make([]int32, x.hi-x.lo+1)
				x.last = make([]int32, x.hi-x.lo+1)
			}
			x.at = append(x.at, runAt{int32(x.rc), int32(x.ro)})
			x.next = append(x.next, 0)
			p := int32(len(x.at)) // 1 + its index
			k := item - x.lo
			if x.last[k] == 0 {
				x.first[k] = p
			} else {
				x.next[x.last[k]-1] = p
			}
			x.last[k] = p
		}
		if x.rc == len(x.chunks)-1 {
			return // the last chunk may grow: go on from x.ro next time
		}
	}
}

// runsOf appends the runs of item to buf.
func (x *runIndex) runsOf(item int64, buf []api.RunInfo) []api.RunInfo {
	if x.first == nil {
		return buf
	}
	for p := x.first[item-x.lo]; p != 0; p = x.next[p-1] {
		a := x.at[p-1]
		buf = append(buf, runInfo(&x.chunks[a.chunk][a.off]))
	}
	return buf
}
