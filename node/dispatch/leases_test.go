package dispatch

import (
	"testing"
	"time"
)

// TestCountsVetsClaimsAgainstThePlan: a claim the plan never places counts
// for grace after it was first seen, and no longer, even when the machine
// drops it and claims it again; one the plan placed while it was held
// counts until it is dropped, whatever the plan says later.
func TestCountsVetsClaimsAgainstThePlan(t *testing.T) {
	t0 := time.Unix(1000, 0)
	const grace = 3 * time.Second
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	a, b := Lease{"j", 1}, Lease{"j", 2}
	var l Leases
	l.Observe("m", []Lease{a, b}, nil)
	if !l.Counts("m", a, false, at(0), grace, 0, -1) || !l.Counts("m", a, false, at(grace-time.Millisecond), grace, 0, -1) {
		t.Error("an unplaced claim does not count within its grace")
	}
	if l.Counts("m", a, false, at(grace), grace, 0, -1) {
		t.Error("an unplaced claim still counts after its grace")
	}
	// b is placed once, then the plan moves on: it counts while held.
	if !l.Counts("m", b, true, at(time.Second), grace, 0, -1) || !l.Counts("m", b, false, at(time.Hour), grace, 0, -1) {
		t.Error("a claim the plan placed lapsed while held")
	}
	// Dropped and claimed again: a keeps its first sight, b starts afresh.
	l.Observe("m", nil, nil)
	l.Observe("m", []Lease{a, b}, nil)
	if l.Counts("m", a, false, at(time.Hour), grace, 0, -1) {
		t.Error("dropping an unplaced claim and making it again bought a new grace")
	}
	if !l.Counts("m", b, false, at(time.Hour), grace, 0, -1) || l.Counts("m", b, false, at(time.Hour+grace), grace, 0, -1) {
		t.Error("a placed claim dropped and made again is not judged afresh")
	}
	// Another machine's claim on the same item is its own; an offline
	// machine's claims are forgotten.
	if !l.Counts("n", a, false, at(time.Hour), grace, 0, -1) {
		t.Error("a claim by another machine shares the first one's first sight")
	}
	l.Forget("m")
	if !l.Counts("m", a, false, at(2*time.Hour), grace, 0, -1) {
		t.Error("a machine back online is judged on what it knew before")
	}
}

// TestCountsLapseAtTheItemTimeout: with an item timeout, a claim counts
// for less than limit (the timeout plus one heartbeat interval) after it
// was first seen, whether the plan placed it or not; dropping and making it
// again buys nothing; a new attempt of the item (its runs in the ledger
// changed) is a new claim, and a claim seen before the attempts were known
// keeps its first sight.
func TestCountsLapseAtTheItemTimeout(t *testing.T) {
	t0 := time.Unix(1000, 0)
	const grace, limit = 3 * time.Second, 12 * time.Second
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	a, b := Lease{"j", 1}, Lease{"j", 2}
	var l Leases
	l.Observe("liar", []Lease{a, b}, nil)
	l.Counts("liar", a, true, at(0), grace, 0, -1) // seen on arrival: attempts not known
	for _, d := range []time.Duration{time.Second, 5 * time.Second, limit - time.Millisecond} {
		if !l.Counts("liar", a, true, at(d), grace, limit, 0) {
			t.Fatalf("a placed claim does not count %v after it was first seen, within its limit %v", d, limit)
		}
	}
	if l.Counts("liar", a, true, at(limit), grace, limit, 0) {
		t.Fatal("a placed claim still counts at its limit")
	}
	// Dropped and made again: still lapsed, placed or not.
	l.Observe("liar", []Lease{b}, nil)
	l.Observe("liar", []Lease{a, b}, nil)
	if l.Counts("liar", a, true, at(limit+time.Second), grace, limit, 0) {
		t.Error("dropping a lapsed claim and making it again bought a new limit")
	}
	// Another run of the item ended (attempts 0 -> 1): a new claim.
	if !l.Counts("liar", a, true, at(limit+2*time.Second), grace, limit, 1) {
		t.Error("a claim of the next attempt is judged by the lapse of the last one")
	}
	if l.Counts("liar", a, true, at(2*limit+2*time.Second), grace, limit, 1) {
		t.Error("the claim of the next attempt outlives its limit")
	}
	// No timeout: a placed claim counts while held.
	if !l.Counts("liar", b, true, at(time.Hour), grace, 0, 0) {
		t.Error("a placed claim lapsed with no item timeout")
	}
	// An honest machine's claim, dropped before its limit, is forgotten: a
	// claim of the same item later starts afresh.
	l.Counts("honest", b, true, at(0), grace, limit, 0)
	l.Observe("honest", []Lease{b}, nil)
	l.Observe("honest", nil, nil)
	l.Observe("honest", []Lease{b}, nil)
	if !l.Counts("honest", b, true, at(limit+time.Second), grace, limit, 0) {
		t.Error("a claim dropped before its limit and made again is judged from its first sight")
	}
}

// TestCountsForgetsPastMaxReleased: a machine that claims ever new items
// the plan never places does not grow the book past maxReleased of them.
func TestCountsForgetsPastMaxReleased(t *testing.T) {
	var l Leases
	now := time.Unix(1000, 0)
	for i := int64(0); i < maxReleased+512; i += 512 { // a heartbeat of 512 new claims
		var held []Lease
		for k := i; k < i+512; k++ {
			held = append(held, Lease{"j", k})
		}
		l.Observe("m", held, nil)
		for _, k := range held {
			l.Counts("m", k, false, now, time.Second, 0, -1)
		}
	}
	l.Observe("m", nil, nil)
	if n := len(l.claims["m"]); n > maxReleased {
		t.Errorf("%d claims remembered, want at most %d", n, maxReleased)
	}
}
