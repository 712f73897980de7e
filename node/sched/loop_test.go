package sched

import (
	"testing"
	"time"
)

// TestPauseGap: a pause shows on the wall clock alone (a suspended
// machine) or on both (SIGSTOP).
func TestPauseGap(t *testing.T) {
	mono := time.Now()
	if g := pauseGap(mono, mono.Add(5*time.Second)); g != 5*time.Second {
		t.Errorf("pauseGap = %v", g)
	}
	wall := mono.Round(0)
	if g := pauseGap(wall, wall.Add(7*time.Second)); g != 7*time.Second {
		t.Errorf("wall pauseGap = %v", g)
	}
}
