package replica

import (
	"errors"
	"slices"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/ledger"
)

// DropCapped (a reason passed to Config.Dropped): an entry of a machine
// the ledger's budget of entries without effect has capped, refused by
// the Log (docs/design.md §5.7).
const DropCapped = "capped"

// Capped reports whether machine id is capped in the current window of
// the ledger's budget: p2p.Capper (its heads announcements are ignored
// and its sync requests refused).
func (r *Replica) Capped(id peer.ID) bool {
	return r.snap.Load().State.IsCapped(id.String())
}

// noteCappedLocked logs the machines the last fold capped or let go (a
// checkpoint's new window). r.mu must be held.
func (r *Replica) noteCappedLocked() {
	now := r.lg.Capped()
	if slices.Equal(now, r.capped) {
		return
	}
	for _, id := range now {
		if !slices.Contains(r.capped, id) {
			r.log.Warn("ledger: machine capped: too many entries without effect since the last checkpoint; its entries are refused until the next one",
				"machine", id, "budget", ledger.IneffectiveBudget)
		}
	}
	for _, id := range r.capped {
		if !slices.Contains(now, id) {
			r.log.Info("ledger: machine no longer capped (a checkpoint began a new window)", "machine", id)
		}
	}
	r.capped = now
}

// capRefused reports whether the Log refused an entry for its machine's
// cap.
func capRefused(err error) bool { return errors.Is(err, ledger.ErrCapped) }
