package jobsvc

import (
	"context"
	"errors"
	"net/http"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/replica"
	"github.com/cshare/cshare/node/api"
)

// A finished job's items once it has left the ledger's State at a
// checkpoint (docs/design.md §5.7): this machine keeps them on its disk,
// in pages of ledger.ArchivePage items with their runs, and lists them a
// page at a time, as streamItems does from the State.

// streamArchived emits items lo..hi of finished job id, whose range
// starts at start, from this machine's disk; late are the runs reported
// after it left the State (its summary's), listed after the others.
func (s *Service) streamArchived(ctx context.Context, id string, start, lo, hi int64, late []ledger.Run, emit func(api.ItemInfo) error) error {
	runs := make([]api.RunInfo, 0, 4)
	lateOf := map[int64][]int{} // item -> its late runs, in fold order
	for i, r := range late {
		lateOf[r.Item] = append(lateOf[r.Item], i)
	}
	for k := lo; k <= hi; {
		if err := ctx.Err(); err != nil {
			return err
		}
		p := (k - start) / ledger.ArchivePage
		pg, err := s.archivedPage(id, int(p))
		if err != nil {
			return err
		}
		first := start + p*ledger.ArchivePage // the page's first item
		r := 0
		for ; k <= hi && k-first < int64(len(pg.Items)); k++ {
			for r < len(pg.Runs) && pg.Runs[r].Item < k {
				r++
			}
			runs = runs[:0]
			for ; r < len(pg.Runs) && pg.Runs[r].Item == k; r++ {
				runs = append(runs, runInfo(&pg.Runs[r]))
			}
			it := pg.Items[k-first]
			for _, i := range lateOf[k] {
				runs = append(runs, runInfo(&late[i]))
				it.Attempts++ // as the fold counts a late run of a job still in the State
			}
			if err := emit(itemInfo(k, it, runs)); err != nil {
				return err
			}
		}
		if k <= hi && k-first < ledger.ArchivePage {
			return api.Errorf(http.StatusInternalServerError, "job %s on disk: page %d has %d items", id, p, len(pg.Items))
		}
	}
	return nil
}

// archivedItem is item (its index in the job's agenda) of finished job id
// from this machine's disk.
func (s *Service) archivedItem(id string, i int64) (ledger.Item, error) {
	pg, err := s.archivedPage(id, int(i/ledger.ArchivePage))
	if err != nil {
		return ledger.Item{}, err
	}
	if o := i % ledger.ArchivePage; o < int64(len(pg.Items)) {
		return pg.Items[o], nil
	}
	return ledger.Item{}, api.Errorf(http.StatusInternalServerError, "job %s on disk: no item %d", id, i)
}

// archivedPage is page p of finished job id from this machine's disk, or
// an error that says where its items are.
func (s *Service) archivedPage(id string, p int) (ledger.ArchivedPage, error) {
	pg, err := s.d.Ledger.ArchivedPage(id, p)
	if errors.Is(err, replica.ErrNotArchived) {
		return pg, api.Errorf(http.StatusNotFound, "job %s finished before this machine joined the org: its items and runs are kept only on the machines that were members when it left the ledger's state; cshare job show has its counts", id)
	}
	if err != nil {
		return pg, api.Errorf(http.StatusInternalServerError, "job %s: %v", id, err)
	}
	return pg, nil
}
