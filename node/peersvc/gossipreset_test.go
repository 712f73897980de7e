package peersvc

import (
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// A connected machine without a GossipSub writer is reset only after
// gossipResetAfter without one; a writer that comes back (a respawn after
// a backoff) clears the count, and a reset starts a new grace.
func TestGossipStuck(t *testing.T) {
	const iv = time.Second
	p := peer.ID("p")
	t0 := time.Unix(1000, 0)
	mute := map[peer.ID]time.Time{}
	grace := gossipResetAfter(iv)
	steps := []struct {
		at     time.Duration
		writer bool
		want   bool
	}{
		{0, false, false},         // first seen without a writer
		{grace / 2, false, false}, // within the grace
		{grace / 2, true, false},  // the writer came back
		{grace, false, false},     // a new count starts
		{grace + grace - time.Millisecond, false, false},
		{2 * grace, false, true},                   // stuck: reset
		{2*grace + time.Millisecond, false, false}, // a new grace after the reset
	}
	for i, s := range steps {
		if got := gossipStuck(mute, p, s.writer, t0.Add(s.at), iv); got != s.want {
			t.Fatalf("step %d (at %v, writer %v): stuck %v, want %v", i, s.at, s.writer, got, s.want)
		}
	}
	if g := gossipResetAfter(30 * time.Second); g != 5*time.Second {
		t.Fatalf("gossipResetAfter(30s) = %v, want the 5s cap", g)
	}
}
