package dispatch_test

import (
	"fmt"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/dispatch"
)

// Two machines' slots share a job of eight items; each takes its own
// lowest item first, and neither needs to see the other's lease.
func ExampleNext() {
	slots := []dispatch.Slot{{Machine: "m1", Slot: 0}, {Machine: "m2", Slot: 0}}
	owners := dispatch.NewOwners(slots, dispatch.NewRing(dispatch.Seeds("job", slots)))
	items := make([]ledger.Item, 8)
	now := time.Unix(0, 0)
	for _, sl := range slots {
		var c dispatch.Cursor // kept by the instance between calls
		v := dispatch.View{
			Items: ledger.ItemsOf(items...), RangeStart: 100, Slot: sl, Owners: owners,
			Alive: func(k dispatch.Slot) bool { _, ok := owners.Rank[k]; return ok },
		}
		it, ok := dispatch.Next(v, &c, now)
		fmt.Println(sl, "takes", it, ok)
	}
	// Output:
	// m1/0 takes 100 true
	// m2/0 takes 102 true
}
