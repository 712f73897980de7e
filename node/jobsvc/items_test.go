package jobsvc

import (
	"reflect"
	"testing"

	"pgregory.net/rapid"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
)

// TestRunIndexMatchesFilter: whatever the runs of a job (any items, in any
// order, added between syncs, in chunks of any growth, and a re-fold's
// new job), the runs runIndex gives an item of its range are those of the
// item, in fold order.
func TestRunIndexMatchesFilter(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		start := rapid.Int64Range(0, 5).Draw(t, "start")
		size := rapid.Int64Range(1, 40).Draw(t, "size")
		lo := rapid.Int64Range(start, start+size-1).Draw(t, "lo")
		hi := rapid.Int64Range(lo, start+size-1).Draw(t, "hi")
		j := &ledger.Job{}
		x := runIndex{lo: lo, hi: hi}
		var all []ledger.Run
		for round := range rapid.IntRange(1, 4).Draw(t, "rounds") {
			if round > 0 && rapid.Bool().Draw(t, "refold") {
				// A re-fold: another Job, its runs grown from a copy.
				nj := &ledger.Job{}
				for _, r := range all {
					nj.Runs.Add(r)
				}
				j = nj
			}
			for range rapid.IntRange(0, 300).Draw(t, "adds") {
				r := ledger.Run{Item: rapid.Int64Range(start, start+size-1).Draw(t, "item"), Code: int64(len(all))}
				j.Runs.Add(r)
				all = append(all, r)
			}
			x.sync(j)
			x.index()
			for item := lo; item <= hi; item++ {
				var want []api.RunInfo
				for i := range all {
					if all[i].Item == item {
						want = append(want, runInfo(&all[i]))
					}
				}
				if got := x.runsOf(item, nil); !reflect.DeepEqual(got, want) {
					t.Fatalf("round %d, item %d: runs %v, want %v", round, item, got, want)
				}
			}
		}
	})
}
