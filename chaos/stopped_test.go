//go:build chaos

package chaos

import (
	"testing"
	"time"
)

// A run that a plan change stopped, as job items record it, gives its item
// back: the next run after the stop is no violation; one that started
// while the stopped run was still running is.
func TestCheckRunsExcusesRunAfterStop(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	ms := func(d int) time.Time { return t0.Add(time.Duration(d) * time.Millisecond) }
	// The stopping node's clock is 100 s ahead: only the duration counts.
	lr := []ledgerRun{
		{Machine: "A", Instance: "j-s0-1", Start: "2026-01-01T10:01:40.000Z", End: "2026-01-01T10:01:40.500Z", ExitCode: 137, Stopped: true},
		{Machine: "B", Instance: "j-s0-2", Start: "2026-01-01T10:00:00.700Z", End: "2026-01-01T10:00:01.000Z", Counted: true},
	}
	items := []itemInfo{{Item: 1, Status: "done", Runs: lr}}
	machines := map[string]int{"A": 0, "B": 1}
	names := map[string]string{"A": "n1", "B": "n2"}
	for _, c := range []struct {
		second int // ms after t0 the second run starts
		want   int // violations
	}{{700, 0}, {300, 1}} {
		runs := map[jobItem][]*hostRun{{"j", 1}: {
			{job: "j", item: 1, machine: "A", instance: "j-s0-1", pid: "1", start: ms(0)},
			{job: "j", item: 1, machine: "B", instance: "j-s0-2", pid: "2", start: ms(c.second), end: ms(c.second + 300)},
		}}
		r := &report{}
		checkRuns(r, "j", 0, items, runs, nil, machines, names, time.Second)
		if len(r.violations) != c.want {
			t.Errorf("second run at +%dms: %d violations, want %d: %v", c.second, len(r.violations), c.want, r.violations)
		}
	}
}

// A kill -9 of the machine that ran an item first excuses a second run
// elsewhere while that machine was down and until slack after it came
// back (its leases lapsed with it; its run went on unannounced); a kill of
// the machine that ran it second, or one that ended before the first run
// started (by more than the slack), does not.
func TestForcedByKillOfTheFirstRunsMachine(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	machines := map[string]int{"A": 0, "B": 1}
	first, second := at(0), at(2.2) // A starts the item; B runs it 2.2 s later
	for _, c := range []struct {
		name   string
		f      fault
		forced string
	}{
		{"A killed 2 ms after its run started", fault{kind: faultKill, nodes: []int{0}, start: at(0.002), end: at(4)}, faultKill},
		{"B killed meanwhile", fault{kind: faultKill, nodes: []int{1}, start: at(0.002), end: at(4)}, ""},
		{"A killed and back long before", fault{kind: faultKill, nodes: []int{0}, start: at(-20), end: at(-10)}, ""},
		{"A paused", fault{kind: faultPause, nodes: []int{0}, start: at(0.5), end: at(3)}, faultPause},
		{"B paused", fault{kind: faultPause, nodes: []int{1}, start: at(0.5), end: at(3)}, faultPause},
		{"a partition", fault{kind: faultSingle, nodes: []int{0, 1}, start: at(1), end: at(9)}, "partition"},
	} {
		f := c.f
		if got := forced([]*fault{&f}, machines, first, second, 3*time.Second, "A", "B"); got != c.forced {
			t.Errorf("%s: forced by %q, want %q", c.name, got, c.forced)
		}
	}
}
