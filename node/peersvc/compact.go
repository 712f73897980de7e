package peersvc

import (
	"time"

	"github.com/cshare/cshare/ledger"
)

// Compaction (docs/design.md §5.6, §7.1). Each heartbeat names the depth of
// the newest barrier its machine has folded. On each tick this node moves
// to disk (replica.CompactTo) the entries below the newest barrier that
// every online approved machine has passed, keeping one barrier of lag (it
// never compacts to its own top: entries written around the newest
// checkpoint, which may lag it by one, stay in memory), then prunes what
// ledger.retain lets go (replica.Prune). Both run on a goroutine of their
// own, one at a time.

// compactTarget is the barrier depth this node may compact to at now, 0
// for none: the least depth the online approved machines announce, at most
// its own top less one.
func (s *Service) compactTarget(now time.Time) int {
	start, top := s.d.Ledger.Start()
	target := top - 1
	st := s.d.Ledger.Snapshot().State
	for _, sn := range s.live.All() {
		id := sn.Heartbeat.Machine
		if id == s.idStr {
			continue
		}
		m := st.Machines[id]
		if m == nil || m.Status != ledger.MachineApproved {
			continue
		}
		if _, _, ok := s.Liveness(id, now); ok {
			target = min(target, int(sn.Heartbeat.Barrier))
		}
	}
	if target <= start {
		return 0
	}
	return target
}

// maybeCompact compacts, and prunes once per new barrier, when there is
// something to do and no earlier run is still going.
func (s *Service) maybeCompact(now time.Time) {
	target := s.compactTarget(now)
	_, top := s.d.Ledger.Start()
	prune := int64(top) != s.prunedAt.Load()
	if (target == 0 && !prune) || !s.compacting.CompareAndSwap(false, true) {
		return
	}
	s.d.Spawn(func() {
		defer s.compacting.Store(false)
		if target > 0 {
			if err := s.d.Ledger.CompactTo(target); err != nil {
				s.d.Log.Warn("ledger: not compacted", "depth", target, "err", err)
			}
		}
		if !prune {
			return
		}
		if _, err := s.d.Ledger.Prune(); err != nil {
			s.d.Log.Warn("ledger: not pruned", "err", err)
			return
		}
		s.prunedAt.Store(int64(top))
	})
}
