package market

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"

	"pgregory.net/rapid"
)

// wild draws an int64 from anywhere: edges, small values, values near
// lo..hi, or any 64 bits.
func wild(t *rapid.T, label string, lo, hi int64) int64 {
	return rapid.OneOf(
		rapid.SampledFrom([]int64{math.MinInt64, -1, 0, 1, MaxTime, MaxTime + 1, MaxDuration, MaxDuration + 1, math.MaxInt64 - 1, math.MaxInt64}),
		rapid.Int64Range(lo, hi),
		rapid.Int64(),
	).Draw(t, label)
}

// checkFigures fails when a contract holds a figure out of range at any
// of nows (see CheckFigures), or a usage or reservation is negative.
func checkFigures(t *rapid.T, cs []Contract, nows []int64, p Policy) {
	for _, c := range cs {
		for _, now := range nows {
			if err := c.CheckFigures(now, p); err != nil {
				t.Fatalf("%v", err)
			}
		}
	}
	for _, now := range nows {
		renters, hosts := Usage(cs, now)
		for _, a := range append(renters, hosts...) {
			if a.Cost.Total < 0 || a.Cost.Compute < 0 || a.Cost.Storage < 0 {
				t.Fatalf("usage at %d: %+v", now, a)
			}
		}
		for _, r := range Reservations(cs, now, p) {
			if r.CPUMilli < 0 || r.MemoryMB < 0 || r.Slots < 0 {
				t.Fatalf("reservation at %d: %+v", now, r)
			}
		}
	}
}

// TestPropertyFiguresNeverOverflow: offers, asks, times and extensions of
// arbitrary 64-bit values, through every transition (and Terminate),
// never yield a negative time or cost, an end before a start, or a
// contract deleted before its end; a transition that errs changes
// nothing.
func TestPropertyFiguresNeverOverflow(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := Policy{DeleteAfter: wild(t, "delete_after", 0, MaxDuration)}
		var offers []Offer
		for i := range rapid.IntRange(1, 3).Draw(t, "offers") {
			o := Offer{ID: fmt.Sprintf("o%d", i), Machine: "m",
				CPUs:        rapid.OneOf(rapid.Int64Range(1, MaxCPUs), rapid.Int64()).Draw(t, "cpus"),
				MemoryMB:    wild(t, "mem", 1, MaxMemoryMB),
				DiskMB:      wild(t, "disk", 0, MaxDiskMB),
				Price:       wild(t, "price", 0, MaxPrice),
				DiskPrice:   wild(t, "disk_price", 0, MaxPrice),
				Created:     wild(t, "created", 0, MaxTime),
				MinDuration: wild(t, "min_duration", 0, Hour),
			}
			o.Until = o.Created + wild(t, "window", 1, MaxDuration) // may wrap: Check must refuse
			if rapid.Bool().Draw(t, "gpus") {
				o.GPUs = []GPU{{Index: 0, Name: "T4", MemoryMB: wild(t, "gpu_mem", 0, MaxMemoryMB)}, {Index: 1, Name: "T4"}}
			}
			offers = append(offers, o)
		}
		var cs []Contract
		nows := []int64{math.MinInt64, -1, 0, MaxTime, math.MaxInt64}
		for range rapid.IntRange(1, 12).Draw(t, "ops") {
			kinds := []string{"request"}
			if len(cs) > 0 {
				kinds = append(kinds, "accept", "accept", "reject", "stop", "start", "extend", "extend", "rm", "terminate")
			}
			kind := rapid.SampledFrom(kinds).Draw(t, "kind")
			o := offers[rapid.IntRange(0, len(offers)-1).Draw(t, "offer")]
			near := min(o.Created, math.MaxInt64-Hour) // times near the offer's, where most transitions take effect
			at := rapid.OneOf(rapid.Int64Range(near, near+Hour), rapid.Just(o.Until-1), rapid.Int64Range(0, MaxTime), rapid.Int64()).Draw(t, "at")
			nows = append(nows, at)
			if kind == "request" {
				ask := Ask{GPUs: wild(t, "ask_gpus", 0, 2), CPUs: wild(t, "ask_cpus", 0, 4), DiskMB: wild(t, "ask_disk", 0, 100), Duration: wild(t, "ask_for", 0, 2*Hour)}
				cs = append(cs, Open(fmt.Sprintf("c%d", len(cs)), int64(len(cs)), o, "r", "h", ask, at, cs, p))
				checkFigures(t, cs, nows, p)
				continue
			}
			i := rapid.IntRange(0, len(cs)-1).Draw(t, "target")
			c := cs[i]
			var next Contract
			var err error
			switch kind {
			case "accept":
				next, err = Accept(c, at, cs, p)
			case "reject":
				next, err = Reject(c, "no", at, p)
			case "stop":
				next, err = Stop(c, at, p)
			case "start":
				next, err = Start(c, at, cs, p)
			case "extend":
				next, err = Extend(c, wild(t, "by", 1, MaxDuration), at, p)
			case "rm":
				next, err = Remove(c, at, p)
			case "terminate":
				next = Terminate(c, at, "gone", p)
			}
			if err != nil {
				if !reflect.DeepEqual(next, c) {
					t.Fatalf("a failed %s changed %s", kind, c.ID)
				}
				continue
			}
			cs[i] = next
			checkFigures(t, cs, nows, p)
		}
	})
}

// TestExtendOverflow: the largest extensions are refused as the
// duration's fault, the contract unchanged (an extension by the largest
// int64 wrapped its end to the year -292274998, read as deleted and
// costing nothing).
func TestExtendOverflow(t *testing.T) {
	o := Offer{ID: "o", Machine: "m", CPUs: 4, MemoryMB: 1024, Price: MaxPrice, Created: 1_700_000_000_000, Until: 1_700_000_000_000 + 100*Hour}
	c := Open("c", 1, o, "r", "h", Ask{CPUs: 4, Duration: Hour}, o.Created, nil, Policy{})
	c, err := Accept(c, o.Created, nil, Policy{})
	if err != nil || c.State(o.Created, Policy{}) != StateRunning {
		t.Fatalf("accept: %v", err)
	}
	for _, d := range []int64{math.MaxInt64, 1e18, MaxDuration, MaxDuration - Hour + 1, 0, -1, math.MinInt64} {
		next, err := Extend(c, d, o.Created+1, Policy{})
		if !errors.Is(err, ErrDuration) || !reflect.DeepEqual(next, c) {
			t.Fatalf("extend by %d: %v, end %d", d, err, next.End)
		}
	}
	if c.ExtendLimit() != MaxDuration-Hour {
		t.Fatalf("extend limit %d", c.ExtendLimit())
	}
	next, err := Extend(c, c.ExtendLimit(), o.Created+1, Policy{})
	if err != nil || next.End-next.Start != MaxDuration {
		t.Fatalf("extend to ten years: %v", err)
	}
	// Ten years at the highest prices: the cost is exact, not wrapped.
	if got := next.Cost(next.End).Compute; got != MaxPrice*(MaxDuration/Hour) {
		t.Fatalf("ten years at %s an hour cost %d", FormatMoney(MaxPrice), got)
	}
}

// TestCostSaturates: disk at the highest price for the largest disk over
// ten years exceeds an int64 of micro-dollars; the cost stays at the
// largest int64 instead of wrapping negative, in Usage too.
func TestCostSaturates(t *testing.T) {
	c := Contract{ID: "c", Accepted: true, Start: 0, End: MaxDuration, Offer: Offer{Price: MaxPrice, DiskPrice: MaxPrice}, Alloc: Alloc{DiskMB: MaxDiskMB}}
	cost := c.Cost(MaxDuration)
	if cost.Storage != math.MaxInt64 || cost.Total != math.MaxInt64 || cost.Compute <= 0 {
		t.Fatalf("cost %+v", cost)
	}
	renters, _ := Usage([]Contract{c, c}, MaxDuration)
	if renters[0].Cost.Total != math.MaxInt64 {
		t.Fatalf("usage %+v", renters[0])
	}
	if got := c.Cost(math.MinInt64); got != (Cost{}) {
		t.Fatalf("cost before its start: %+v", got)
	}
}

// TestRejectedHoldsNothing: a request rejected by the host, or at its
// acceptance because another contract holds its GPU, holds no GPU from
// then on and is never named as a holder.
func TestRejectedHoldsNothing(t *testing.T) {
	p := Policy{}
	o := Offer{ID: "o", Machine: "m", CPUs: 4, MemoryMB: 1024, Created: 0, Until: 100 * Hour,
		GPUs: []GPU{{Index: 0, Name: "T4"}}}
	a := Open("a", 1, o, "r", "h", Ask{GPUs: 1}, 10, nil, p)
	// b was requested while a was rejected at another node's view; here
	// both claim GPU 0 and b's acceptance finds a running.
	b := a
	b.ID, b.Seq = "b", 2
	a, err := Accept(a, 20, nil, p)
	if err != nil {
		t.Fatal(err)
	}
	b, err = Accept(b, 30, []Contract{a, b}, p)
	if err != nil || !b.Rejected || b.Reason != "GPU 0 is held by contract a" {
		t.Fatalf("b: %+v %v", b, err)
	}
	if len(b.Alloc.GPUs) != 0 {
		t.Fatalf("b, rejected at its acceptance, holds GPUs %v", b.Alloc.GPUs)
	}
	c := Open("c", 3, o, "r", "h", Ask{GPUs: 1}, 40, []Contract{a, b}, p)
	if !c.Rejected || c.Reason != "1 GPUs asked, 0 free (held: GPU 0 by a)" {
		t.Fatalf("c: %q", c.Reason)
	}
	a, err = Remove(a, 50, p)
	if err != nil {
		t.Fatal(err)
	}
	d := Open("d", 4, o, "r", "h", Ask{GPUs: 1}, 60, []Contract{a, b, c}, p)
	if d.Rejected {
		t.Fatalf("d, with GPU 0 free but for rejected requests: %q", d.Reason)
	}
	e, err := Reject(d, "no", 70, p)
	if err != nil || len(e.Alloc.GPUs) != 0 {
		t.Fatalf("d rejected by the host holds GPUs %v (%v)", e.Alloc.GPUs, err)
	}
}
