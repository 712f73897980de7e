package peersvc

import (
	"testing"
	"time"
)

// TestCatchUpVerdict: alone after two intervals without a peer; with peers
// that do not answer, anyway after catchUpCap intervals.
func TestCatchUpVerdict(t *testing.T) {
	t0 := time.Unix(1000, 0)
	iv := time.Second
	for _, tc := range []struct {
		after time.Duration
		peers bool
		want  string
	}{
		{0, false, ""},
		{2*iv - time.Millisecond, false, ""},
		{2 * iv, false, "alone"},
		{2 * iv, true, ""},
		{catchUpCap*iv - time.Millisecond, true, ""},
		{catchUpCap * iv, true, "timeout"},
	} {
		if got := catchUpVerdict(t0, t0.Add(tc.after), iv, tc.peers); got != tc.want {
			t.Errorf("after %v, peers %v: %q, want %q", tc.after, tc.peers, got, tc.want)
		}
	}
}

// TestCaughtUpOpens: a node that caught up waits for a heartbeat from the
// connected machines it has not heard of (up to 1.5 intervals) and for
// the online machines to announce its plan (up to planAgreeCap intervals).
func TestCaughtUpOpens(t *testing.T) {
	iv := time.Second
	for _, tc := range []struct {
		waited         time.Duration
		unheard, split int
		want           bool
	}{
		{0, 0, 0, true},
		{0, 1, 0, false},
		{iv*3/2 - time.Millisecond, 1, 0, false},
		{iv * 3 / 2, 1, 0, true},
		{0, 0, 1, false},
		{iv * 3 / 2, 0, 2, false},
		{planAgreeCap*iv - time.Millisecond, 0, 1, false},
		{planAgreeCap * iv, 0, 1, true},
		{planAgreeCap * iv, 3, 1, true},
	} {
		if got := caughtUpOpens(tc.waited, iv, tc.unheard, tc.split); got != tc.want {
			t.Errorf("waited %v, %d unheard, %d other plans: %v, want %v", tc.waited, tc.unheard, tc.split, got, tc.want)
		}
	}
}
