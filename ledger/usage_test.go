package ledger

import (
	"reflect"
	"testing"
)

// TestUsageFromRuns: CPU, GPU and memory seconds are the runs' time in the
// window times what the job asked (one core when none), items are counted
// where they ended, a failure only once it is final, jobs where they were
// submitted, and datasets for the time they were held; the same entries
// delivered in another order give the same Usage.
func TestUsageFromRuns(t *testing.T) {
	w := newWorld(t)
	alice := w.member(2, RoleMember)
	t0 := w.now
	// Job 1 asks 2 cores, 1 GPU and 512 MiB; job 2 asks nothing, retries once.
	j1 := JobIDFor(w.ok(alice, KindJobSubmit, JobSpec{Driver: "exec", Cmd: []string{"true"}, RangeStart: 1, RangeEnd: 2,
		Priority: 5, CPUs: 1, Cores: 2000, GPUs: 1, MemoryMB: 512}))
	j2 := JobIDFor(w.ok(alice, KindJobSubmit, JobSpec{Driver: "exec", Cmd: []string{"true"}, RangeStart: 1, RangeEnd: 1,
		Priority: 5, CPUs: 1, Retries: 1}))
	w.now = t0 + 100_000
	// Item 1 of job 1 ran 10 s from t0+10s on the owner's machine.
	w.ok(w.owner, KindJobResults, JobResults{Job: j1, Results: []ItemResult{{Item: 1, Started: t0 + 10_000, DurationMS: 10_000}}})
	// Job 2's item failed (4 s), then failed again (6 s): final at the second.
	w.ok(w.owner, KindJobResults, JobResults{Job: j2, Results: []ItemResult{{Item: 1, Started: t0 + 20_000, DurationMS: 4000, Code: 1}}})
	w.ok(w.owner, KindJobResults, JobResults{Job: j2, Results: []ItemResult{{Item: 1, Started: t0 + 30_000, DurationMS: 6000, Code: 1}}})
	w.ok(alice, KindDatasetAdd, DatasetAdd{Name: "d", CID: datasetCID("d"), Size: 1000, Blocks: 1, Access: AccessOrg})
	added := w.now
	w.now += 50_000
	w.ok(alice, KindDatasetRm, DatasetRef{Name: "d"})

	st := w.log.State()
	u := st.Usage(t0, t0+200_000)
	var a UsageRow
	for _, p := range u.Persons {
		if p.ID == alice.id {
			a = p
		}
	}
	want := Consumption{CPUMilliMS: 2000*10_000 + 1000*(4000+6000), GPUMS: 10_000, MemoryMBMS: 512 * 10_000,
		ItemsDone: 1, ItemsFailed: 1, Jobs: 2, DatasetBytes: 0, DatasetByteSec: 1000 * (w.now - added) / 1000}
	if a.Consumption != want {
		t.Fatalf("alice's usage\n got %+v\nwant %+v", a.Consumption, want)
	}
	if u.Totals != want {
		t.Fatalf("totals %+v, want alice's alone %+v", u.Totals, want)
	}
	if len(u.Machines) != 2 || u.Machines[0].CPUMilliMS+u.Machines[1].CPUMilliMS != want.CPUMilliMS {
		t.Fatalf("machines %+v: want the owner's to hold every run", u.Machines)
	}
	// A window that ends before job 2's second run: its failure is not
	// final there, and only the part of job 1's run inside counts.
	early := st.Usage(t0+15_000, t0+30_000)
	for _, p := range early.Persons {
		if p.ID != alice.id {
			continue
		}
		if p.ItemsFailed != 0 || p.ItemsDone != 1 || p.Jobs != 0 || p.CPUMilliMS != 2000*5000+1000*4000 {
			t.Fatalf("early window: %+v", p.Consumption)
		}
	}
	// Another delivery order folds to the same Usage.
	es := w.log.Entries()
	rev := append([]*Entry{es[0]}, es[1:]...)
	for i, k := 1, len(rev)-1; i < k; i, k = i+1, k-1 {
		rev[i], rev[k] = rev[k], rev[i]
	}
	l := NewLog()
	if _, err := l.AddBatch(rev); err != nil {
		t.Fatal(err)
	}
	if got := l.State().Usage(t0, t0+200_000); !reflect.DeepEqual(got, u) {
		t.Fatalf("another order: %+v\nwant %+v", got, u)
	}
}
