package ledger

import (
	"errors"
	"testing"
)

// archivedJob folds a job of items items of member a, every one done with
// runs runs each, through a checkpoint, and returns the job whole as it
// left and the State's summary.
func archivedJob(t testing.TB, items, runs int64) (left *Job, summary *Job, w *world) {
	w = newWorld(t)
	a := w.member(7, RoleMember)
	id := w.submit(a, items, 0)
	for k := int64(0); k < runs; k++ {
		for lo := int64(1); lo <= items; lo += 500 { // entries of 500 results
			var res []ItemResult
			for i := lo; i <= min(items, lo+499); i++ {
				res = append(res, ItemResult{Item: i, DurationMS: i, Started: 1_700_000_000_000 + k})
			}
			w.ok(w.owner, KindJobResults, JobResults{Job: id, Results: res})
		}
	}
	var got []LeftJob
	w.log.State().SetLeftSink(func(l LeftJob) { got = append(got, l) })
	st := w.log.State()
	w.ok(w.owner, KindCheckpoint, Checkpoint{Entries: st.Applied + st.Ineffective, Hash: st.Hash()})
	if len(got) != 1 || got[0].Job.ID != id || got[0].Dropped {
		t.Fatalf("left: %+v", got)
	}
	return got[0].Job, w.log.State().Jobs[id], w
}

// FuzzDecodeArchive: a finished job's parts read back from disk decode,
// or are ErrMalformed; a page that decodes has 1..ArchivePage items and
// runs ordered by item.
func FuzzDecodeArchive(f *testing.F) {
	j, _, _ := archivedJob(f, 3, 2)
	parts, err := EncodeArchive(j)
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range parts {
		f.Add(p)
	}
	f.Add([]byte{0xa0})
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := DecodeArchiveHeader(b); err != nil && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooLarge) {
			t.Fatalf("header: unexpected error kind: %v", err)
		}
		p, err := DecodeArchivePage(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("page: unexpected error kind: %v", err)
			}
			return
		}
		if len(p.Items) == 0 || len(p.Items) > ArchivePage {
			t.Fatalf("a page of %d items", len(p.Items))
		}
		for i := 1; i < len(p.Runs); i++ {
			if p.Runs[i].Item < p.Runs[i-1].Item {
				t.Fatal("runs out of order")
			}
		}
	})
}

// TestArchiveParts: a job handed to the sink is summarised in the State,
// and its parts on disk give back its header, and page by page its items
// with their runs, by item in fold order; a State with summaries encodes
// and decodes to the same hash (a joiner's snapshot).
func TestArchiveParts(t *testing.T) {
	const items = 2500
	j, sum, w := archivedJob(t, items, 2)
	if sum.Archived == nil || sum.Total() != items || sum.RunCount() != 2*items || sum.Items.Len() != 0 || sum.Archived.Attempts != 2*items {
		t.Fatalf("summary: %+v %+v", sum, sum.Archived)
	}
	parts, err := EncodeArchive(j)
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 1+3 {
		t.Fatalf("%d parts, want a header and 3 pages", len(parts))
	}
	h, err := DecodeArchiveHeader(parts[0])
	if err != nil || h.ID != j.ID || h.Done != items {
		t.Fatalf("header: %+v, %v", h, err)
	}
	for p := 0; p < 3; p++ {
		pg, err := DecodeArchivePage(parts[1+p])
		if err != nil {
			t.Fatal(err)
		}
		want := min(ArchivePage, items-p*ArchivePage)
		if len(pg.Items) != want || len(pg.Runs) != 2*want {
			t.Fatalf("page %d: %d items, %d runs", p, len(pg.Items), len(pg.Runs))
		}
		for i, r := range pg.Runs {
			item := int64(p*ArchivePage + i/2 + 1)
			if r.Item != item || r.Started != 1_700_000_000_000+int64(i%2) || r.Counted != (i%2 == 0) {
				t.Fatalf("page %d run %d: %+v, want item %d", p, i, r, item)
			}
		}
		if pg.Items[0].DurationMS != int64(p*ArchivePage+1) {
			t.Fatalf("page %d item 0: %+v", p, pg.Items[0])
		}
	}
	b, err := EncodeState(w.log.State())
	if err != nil {
		t.Fatal(err)
	}
	st, err := DecodeState(b)
	if err != nil || st.Hash() != w.log.State().Hash() || st.Clone().Hash() != st.Hash() {
		t.Fatalf("a State with summaries does not round-trip: %v", err)
	}
}
