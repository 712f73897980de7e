package sched

import (
	"testing"

	"github.com/cshare/cshare/ledger"
)

// A retry of an item on the same instance is another run: after a restart
// its write-ahead result must not be taken for the first run's (which the
// ledger holds) and deleted, or the result is lost and the item runs again.
func TestResultsRetryOnSameInstanceIsAnotherRun(t *testing.T) {
	const machine, inst = "m1", "job-s0-1"
	first := ledger.ItemResult{Item: 7, Code: 3, Instance: inst, Started: 1_000}
	retry := ledger.ItemResult{Item: 7, Code: 0, Instance: inst, Started: 2_500}
	var j ledger.Job
	j.Runs.Add(ledger.Run{Item: first.Item, Machine: machine, Instance: inst, Started: first.Started, Code: first.Code, Counted: true})

	if !inLedger(&j, machine, first) {
		t.Fatal("the first run is in the ledger, inLedger says no")
	}
	if inLedger(&j, machine, retry) {
		t.Fatal("the retry (same item and instance, later start) is taken as already in the ledger")
	}
	if inLedger(&j, "m2", first) {
		t.Fatal("another machine's run with the same instance name is taken as this one's")
	}
	if resultKey("job", first) == resultKey("job", retry) {
		t.Fatalf("the retry's write-ahead record overwrites the first run's: both %q", resultKey("job", first))
	}
}
