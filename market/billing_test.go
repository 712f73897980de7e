package market

import "testing"

// TestBillingRestartBilledBeforeFirstStart: a start witnessed late is billed
// after a stop and a restart that were acknowledged at once, so the restart
// is billed before the first start (found by TestCostsAdditive). The
// contract must not run longer than it exists.
func TestBillingRestartBilledBeforeFirstStart(t *testing.T) {
	c := Contract{
		ID: "c0", Accepted: true, Start: 0, End: 72 * Hour,
		Marks: []Mark{
			{Kind: MarkStart, Request: "c0/0", Acked: true, Witnessed: true, Witness: AckSlack + 1},
			{Kind: MarkStop, Request: "c0/1", Acked: true},
			{Kind: MarkStart, Request: "c0/2", Acked: true},
		},
	}
	run, exist := c.Billing(c.End)
	if run > exist {
		t.Fatalf("ran %d ms, existed only %d ms", run, exist)
	}
	if want := c.End - (AckSlack + 1 - AckSlack); run != want {
		t.Fatalf("ran %d ms, want %d (from the first start's billed time)", run, want)
	}
}
