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
		rapid.SampledFrom([]int64{math.MaxInt64, math.MinInt64, -1, 0, 1, MaxTime, MaxTime + 1, MaxDuration, MaxDuration + 1, math.MaxInt64 - 1}),
		rapid.Int64Range(lo, hi),
		rapid.Int64(),
	).Draw(t, label)
}

// fig draws a figure: with tame, within lo..hi (rapid favours the edges),
// else from anywhere (wild). Tame offers and asks take effect, so the
// transitions after them are reached; wild ones check the refusals.
func fig(t *rapid.T, tame bool, label string, lo, hi int64) int64 {
	if tame {
		return rapid.Int64Range(lo, hi).Draw(t, label)
	}
	return wild(t, label, lo, hi)
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
		p := Policy{DeleteAfter: fig(t, rapid.IntRange(0, 3).Draw(t, "wild_policy") < 3, "delete_after", 0, MaxDuration)}
		var offers []Offer
		for i := range rapid.IntRange(1, 3).Draw(t, "offers") {
			tame := rapid.IntRange(0, 3).Draw(t, "wild_offer") < 3
			o := Offer{ID: fmt.Sprintf("o%d", i), Machine: "m",
				CPUs:        fig(t, tame, "cpus", 1, MaxCPUs),
				MemoryMB:    fig(t, tame, "mem", 1, MaxMemoryMB),
				DiskMB:      fig(t, tame, "disk", 100, MaxDiskMB),
				Price:       fig(t, tame, "price", 0, MaxPrice),
				DiskPrice:   fig(t, tame, "disk_price", 0, MaxPrice),
				Created:     fig(t, tame, "created", 0, MaxTime),
				MinDuration: fig(t, tame, "min_duration", 0, Hour/4),
				Until:       0, // below: a window after Created
			}
			o.Until = o.Created + fig(t, tame, "window", Hour, MaxDuration) // may wrap: Check must refuse
			if rapid.Bool().Draw(t, "gpus") {
				o.GPUs = []GPU{{Index: 0, Name: "T4", MemoryMB: fig(t, tame, "gpu_mem", 0, MaxMemoryMB)}, {Index: 1, Name: "T4"}}
			}
			offers = append(offers, o)
		}
		var cs []Contract
		nows := []int64{math.MinInt64, -1, 0, MaxTime, math.MaxInt64}
		// when draws a transition's time: mostly within an hour after
		// from (where transitions take effect), else anywhere.
		when := func(from, until int64) int64 {
			near := min(from, math.MaxInt64-Hour)
			var at int64
			switch rapid.IntRange(0, 9).Draw(t, "when") {
			case 6:
				at = until - 1
			case 7:
				at = rapid.Int64Range(0, MaxTime).Draw(t, "at")
			case 8, 9:
				at = rapid.Int64().Draw(t, "at")
			default:
				at = rapid.Int64Range(near, near+Hour).Draw(t, "at")
			}
			nows = append(nows, at)
			return at
		}
		for range 16 {
			kinds := []string{"request"}
			if len(cs) > 0 {
				kinds = append(kinds, "accept", "accept", "reject", "stop", "start", "extend", "extend", "rm", "terminate")
			}
			kind := rapid.SampledFrom(kinds).Draw(t, "kind")
			if kind == "request" {
				o := offers[rapid.IntRange(0, len(offers)-1).Draw(t, "offer")]
				at := when(o.Created, o.Until)
				tame := rapid.IntRange(0, 3).Draw(t, "wild_ask") < 3
				ask := Ask{DiskMB: fig(t, tame, "ask_disk", 0, 100), Duration: fig(t, tame, "ask_for", 0, Hour/2)}
				if len(o.GPUs) > 0 {
					ask.GPUs = fig(t, tame, "ask_gpus", 1, 2)
				} else {
					ask.CPUs = fig(t, tame, "ask_cpus", 1, min(max(o.CPUs, 1), 4))
				}
				cs = append(cs, Open(fmt.Sprintf("c%d", len(cs)), int64(len(cs)), o, "r", "h", ask, at, cs, p))
				checkFigures(t, cs, nows, p)
				continue
			}
			// Mostly a contract the transition can apply to: one not
			// rejected, accepted unless the transition accepts.
			var apt []int
			for j, c := range cs {
				if !c.Rejected && (c.Accepted != (kind == "accept")) {
					apt = append(apt, j)
				}
			}
			i := rapid.IntRange(0, len(cs)-1).Draw(t, "target")
			if len(apt) > 0 && rapid.IntRange(0, 3).Draw(t, "any_target") < 3 {
				i = rapid.SampledFrom(apt).Draw(t, "apt")
			}
			at := when(max(cs[i].Requested, cs[i].Start), cs[i].End)
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
				by := rapid.OneOf(rapid.Int64Range(1, MaxDuration), rapid.Int64(),
					rapid.SampledFrom([]int64{math.MaxInt64, math.MaxInt64 - Hour, math.MaxInt64 - c.End, 1e18, MaxDuration, math.MinInt64, 0})).Draw(t, "by")
				next, err = Extend(c, by, at, p)
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
	c := Contract{ID: "c", Accepted: true, Start: 0, End: MaxDuration, Offer: Offer{Price: MaxPrice, DiskPrice: MaxPrice}, Alloc: Alloc{DiskMB: MaxDiskMB},
		Marks: []Mark{{Kind: MarkStart, Acked: true}}}
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

// TestAcceptBeforeOfferOpens: an acceptance timed before the offer opened
// (a host clock behind, or set so) is refused: it made a contract run from
// then to the offer's end, beyond its window and the ten years' limit
// (found by TestPropertyFiguresContractTimes: a contract from 0 to 2023).
func TestAcceptBeforeOfferOpens(t *testing.T) {
	o := Offer{ID: "o", Machine: "m", CPUs: 4, MemoryMB: 1024, Price: 1, Created: 1_700_000_000_000, Until: 1_700_000_000_000 + 100*Hour}
	c := Open("c", 1, o, "r", "h", Ask{CPUs: 4}, o.Created, nil, Policy{})
	for _, at := range []int64{0, o.Created - MaxDuration - 1, o.Created - 1} {
		if next, err := Accept(c, at, nil, Policy{}); !errors.Is(err, ErrState) || !reflect.DeepEqual(next, c) {
			t.Fatalf("accept at %d: %v, from %d to %d", at, err, next.Start, next.End)
		}
	}
	if next, err := Accept(c, o.Created, nil, Policy{}); err != nil || next.CheckFigures(o.Created, Policy{}) != nil {
		t.Fatalf("accept as the offer opens: %v", err)
	}
}
