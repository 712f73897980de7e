package ledger

import (
	"errors"
	"testing"
)

// FuzzDecodeJob: a finished job read back from disk decodes, or is
// ErrMalformed; one that decodes has as many items as its range.
func FuzzDecodeJob(f *testing.F) {
	w := newWorld(f)
	a := w.member(7, RoleMember)
	id := w.submit(a, 3, 0)
	w.ok(w.owner, KindJobResults, JobResults{Job: id, Results: []ItemResult{{Item: 1}, {Item: 2, Code: 1}, {Item: 3}}})
	b, err := EncodeJob(w.log.State().Jobs[id])
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte{0xa0})
	f.Fuzz(func(t *testing.T, b []byte) {
		j, err := DecodeJob(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if int64(j.Items.Len()) != j.Spec.RangeEnd-j.Spec.RangeStart+1 {
			t.Fatalf("%d items for the range %d-%d", j.Items.Len(), j.Spec.RangeStart, j.Spec.RangeEnd)
		}
		if _, err := EncodeJob(j); err != nil {
			t.Fatal(err)
		}
		j.Runs.Each(func(Run) {})
	})
}

// TestArchivedJobRoundTrip: a job handed to the sink encodes and decodes
// to the same bytes, items and runs with it.
func TestArchivedJobRoundTrip(t *testing.T) {
	w := newWorld(t)
	a := w.member(7, RoleMember)
	id := w.submit(a, 300, 0)
	var res []ItemResult
	for i := int64(1); i <= 300; i++ {
		res = append(res, ItemResult{Item: i, DurationMS: i})
	}
	w.ok(w.owner, KindJobResults, JobResults{Job: id, Results: res})
	var got []LeftJob
	w.log.State().SetLeftSink(func(l LeftJob) { got = append(got, l) })
	st := w.log.State()
	w.ok(w.owner, KindCheckpoint, Checkpoint{Entries: st.Applied + st.Ineffective, Hash: st.Hash()})
	if len(got) != 1 || got[0].Job.ID != id || got[0].Dropped {
		t.Fatalf("left: %+v", got)
	}
	if s := w.log.State().Jobs[id]; s.Archived == nil || s.Total() != 300 || s.RunCount() != 300 || s.Items.Len() != 0 {
		t.Fatalf("summary: %+v", s)
	}
	b, err := EncodeJob(got[0].Job)
	if err != nil {
		t.Fatal(err)
	}
	j, err := DecodeJob(b)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := EncodeJob(j)
	if string(again) != string(b) || j.Items.At(299).DurationMS != 300 || j.Runs.Len() != 300 {
		t.Fatalf("round trip: %d runs, item 300 %+v", j.Runs.Len(), j.Items.At(299))
	}
}
