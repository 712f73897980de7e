package marketsvc

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/market"
	"github.com/cshare/cshare/runtime"
)

// TestPlanContracts: the pure comparison of instances with the ledger.
func TestPlanContracts(t *testing.T) {
	const now = 1_000_000
	p := market.Policy{DeleteAfter: 1000}
	mk := func(id string, seq int64, start, end int64, running bool, gpus ...int64) ledger.Contract {
		return ledger.Contract{Contract: market.Contract{ID: id, Seq: seq, Accepted: true, Start: start, End: end, Running: running, Since: start,
			Offer: market.Offer{ID: "o", Machine: "m", Until: end + 10_000}, Alloc: market.Alloc{GPUs: gpus}}}
	}
	cs := []ledger.Contract{
		mk("run", 1, 10, now+100, true, 0),
		mk("stopped", 2, 10, now+100, false, 1),
		mk("ended", 3, 10, now-1, true, 2),
		mk("gone", 4, 10, now-2000, true, 3),
		mk("new", 5, 10, now+100, true, 4),
	}
	runs := []runtime.ContractRun{
		{ID: "r1", Contract: "run", Running: true, GPUs: []string{"0"}},
		{ID: "r1b", Contract: "run", Running: false},
		{ID: "r2", Contract: "stopped", Running: true},
		{ID: "r3", Contract: "ended", Running: true},
		{ID: "r4", Contract: "gone", Running: false},
		{ID: "r5", Contract: "unknown", Running: true},
	}
	pl := planContracts(cs, runs, now, p)
	ids := func(rs []runtime.ContractRun) string {
		var s []string
		for _, r := range rs {
			s = append(s, string(r.ID))
		}
		return strings.Join(s, ",")
	}
	var run []string
	for _, c := range pl.run {
		run = append(run, c.ID)
	}
	if got := fmt.Sprintf("remove %s; stop %s; keep %s; run %s", ids(pl.remove), ids(pl.stop), ids(pl.keep), strings.Join(run, ",")); got != "remove r1b,r4,r5; stop r2,r3; keep r1; run new" {
		t.Fatal(got)
	}
	if d := nextBoundary(cs, now, p); d != 100*time.Millisecond+time.Millisecond {
		t.Fatalf("next boundary %s", d)
	}
}
