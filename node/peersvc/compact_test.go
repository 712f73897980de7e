package peersvc

import (
	"testing"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/replica"
	"github.com/cshare/cshare/p2p"
)

// compactLedger is the ledger as compactTarget reads it: its start and
// top barriers and a State; the rest of Ledger is not called.
type compactLedger struct {
	Ledger
	start, top int
	st         *ledger.State
}

func (l *compactLedger) Start() (int, int)           { return l.start, l.top }
func (l *compactLedger) Snapshot() *replica.Snapshot { return &replica.Snapshot{State: l.st} }

// TestCompactTarget: a node compacts to the least barrier the online
// approved machines announce, never beyond its own top less one; pending
// and offline machines do not hold it back; nothing when it starts there.
func TestCompactTarget(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	st := ledger.NewState()
	for id, status := range map[string]string{"a": ledger.MachineApproved, "b": ledger.MachineApproved,
		"c": ledger.MachineApproved, "d": ledger.MachinePending, "e": ledger.MachineApproved} {
		st.Machines[id] = &ledger.Machine{ID: id, Status: status}
	}
	lg := &compactLedger{start: 1, top: 6, st: st}
	s := &Service{d: Deps{Ledger: lg, Interval: time.Second}, idStr: "a"}
	var seq uint64
	beat := func(id string, barrier int64, at time.Time) {
		seq++
		s.live.Observe(p2p.Heartbeat{Machine: id, Seq: seq, Interval: 1000, Barrier: barrier}, at)
	}
	beat("a", 6, now)
	beat("b", 5, now)
	beat("c", 3, now)
	beat("d", 0, now)                      // pending
	beat("e", 1, now.Add(-10*time.Second)) // offline
	if got := s.compactTarget(now); got != 3 {
		t.Fatalf("target %d, want 3 (c's barrier)", got)
	}
	beat("c", 6, now)
	if got := s.compactTarget(now); got != 5 {
		t.Fatalf("target %d, want 5 (b's barrier, and the top less one)", got)
	}
	beat("e", 1, now) // back online, far behind
	if got := s.compactTarget(now); got != 0 {
		t.Fatalf("target %d, want 0: e has passed only the barrier this node starts at", got)
	}
}
