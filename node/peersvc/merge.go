package peersvc

import (
	"context"
	"errors"
	"time"

	"github.com/cshare/cshare/ledger"
)

// Merging the ledger's heads. After a wave of concurrent writes (every
// machine of a busy org flushing results at once) the ledger has about as
// many heads as there were writers, and keeps them until someone writes
// again: meanwhile every heartbeat and heads announcement lists them all
// (about 60 bytes each; 6 KB at 100 machines), and the next entry names up
// to ledger.MaxParents of them. Once the ledger has been quiet (and the
// node up) for mergeQuiet intervals, the online machine with the lowest ID among those
// that see more than Deps.MergeAbove heads writes one ledger.merge entry naming
// them. Two machines that each take themselves for the lowest write two,
// leaving two heads; a merge is itself a write, so the next one waits for
// quiet again.

// mergeQuiet is how many heartbeat intervals without a new entry come
// before a merge.
const mergeQuiet = 2

// maybeMerge writes a ledger.merge entry if this machine should now (see
// above).
func (s *Service) maybeMerge(ctx context.Context, now time.Time) {
	snap := s.d.Ledger.Snapshot()
	heads := snap.Heads
	m := snap.State.Machines[s.idStr]
	approved := m != nil && m.Status == ledger.MachineApproved
	quiet := now.Sub(s.d.Ledger.LastAdded()) >= mergeQuiet*s.d.Interval
	if s.d.MergeAbove <= 0 || len(heads) <= s.d.MergeAbove || !quiet || !approved {
		return
	}
	for _, sn := range s.live.All() { // sorted by machine ID
		id := sn.Heartbeat.Machine
		if id >= s.idStr {
			break
		}
		if _, _, ok := s.Liveness(id, now); ok {
			return // a lower online machine merges
		}
	}
	if _, err := s.d.Ledger.Write(ctx, ledger.KindMerge, ledger.Merge{}); err != nil && !errors.Is(err, context.Canceled) {
		s.d.Log.Warn("ledger: merging the heads failed", "heads", len(heads), "err", err)
	}
}
