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
