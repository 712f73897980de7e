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
	if !l.Counts("m", a, false, at(0), grace) || !l.Counts("m", a, false, at(grace-time.Millisecond), grace) {
		t.Error("an unplaced claim does not count within its grace")
	}
	if l.Counts("m", a, false, at(grace), grace) {
		t.Error("an unplaced claim still counts after its grace")
	}
	// b is placed once, then the plan moves on: it counts while held.
	if !l.Counts("m", b, true, at(time.Second), grace) || !l.Counts("m", b, false, at(time.Hour), grace) {
		t.Error("a claim the plan placed lapsed while held")
	}
	// Dropped and claimed again: a keeps its first sight, b starts afresh.
	l.Observe("m", nil, nil)
	l.Observe("m", []Lease{a, b}, nil)
	if l.Counts("m", a, false, at(time.Hour), grace) {
		t.Error("dropping an unplaced claim and making it again bought a new grace")
	}
	if !l.Counts("m", b, false, at(time.Hour), grace) || l.Counts("m", b, false, at(time.Hour+grace), grace) {
		t.Error("a placed claim dropped and made again is not judged afresh")
	}
	// Another machine's claim on the same item is its own; an offline
	// machine's claims are forgotten.
	if !l.Counts("n", a, false, at(time.Hour), grace) {
		t.Error("a claim by another machine shares the first one's first sight")
	}
	l.Forget("m")
	if !l.Counts("m", a, false, at(2*time.Hour), grace) {
		t.Error("a machine back online is judged on what it knew before")
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
			l.Counts("m", k, false, now, time.Second)
		}
	}
	l.Observe("m", nil, nil)
	if n := len(l.claims["m"]); n > maxReleased {
		t.Errorf("%d claims remembered, want at most %d", n, maxReleased)
	}
}
