package peersvc

import (
	"context"
	"errors"
	"time"

	"github.com/cshare/cshare/ledger"
)

// Checkpoints (docs/design.md §5.6). When the org's ledger.checkpoint_every
// says one is due (entries since the newest barrier, or time since it),
// the online approved machine with the lowest ID among those acting for an
// admin writes a ledger.checkpoint of its State. Two that each take
// themselves for the lowest write two concurrent checkpoints: the chain
// keeps the deeper, then the lower CID, and the other is an entry without
// effect on the order's barriers.

// maybeCheckpoint writes a checkpoint if this machine should now.
func (s *Service) maybeCheckpoint(ctx context.Context, now time.Time) {
	if !s.d.Ledger.CheckpointDue(now) && !ledger.ArchiveDue(s.d.Ledger.Snapshot().State) {
		return
	}
	admin := func(st *ledger.State, id string) bool {
		m := st.Machines[id]
		return m != nil && m.Status == ledger.MachineApproved && st.IsAdmin(m.Owner)
	}
	st := s.d.Ledger.Snapshot().State
	mine := admin(st, s.idStr)
	lower := false
	if mine {
		for _, sn := range s.live.All() { // sorted by machine ID
			id := sn.Heartbeat.Machine
			if id >= s.idStr {
				break
			}
			if _, _, ok := s.Liveness(id, now); ok && admin(st, id) {
				lower = true // a lower online admin machine writes it
				break
			}
		}
	}
	if !mine || lower {
		return
	}
	if _, err := s.d.Ledger.WriteCheckpoint(ctx); err != nil && !errors.Is(err, context.Canceled) {
		s.d.Log.Debug("ledger: no checkpoint written", "err", err)
	}
}
