package replica

import (
	"errors"
	"slices"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/ledger"
)

// The gate of the ledger's budget of entries without effect (docs/design.md
// §5.7). The fold only counts; once it caps a machine, this replica takes
// nothing more that the machine itself sends: its heads announcements
// (OnHeads; p2p ignores them before, in its validator), the heads its
// heartbeats name (WantHeads), its sync answers (SyncFrom, fetch, between
// parts of an answer) and its sync requests (p2p.ServeSync, through
// Capped). Its entries that another machine passes on (pushed in that
// machine's announcement, or in its sync answer) are taken as any entry
// is: a node that took them before it folded the cap may hold them, and
// refusing them would leave the honest nodes on different DAGs.

// DropCapped (a reason passed to Config.Dropped): an entry a capped machine
// sent itself, refused at the gate.
const DropCapped = "capped"

// ErrCapped is Write's error on a capped machine: no node would take the
// entry from it until a checkpoint starts a new window.
var ErrCapped = errors.New("this machine is capped: too many ledger entries without effect since the last checkpoint; its writes wait for the next checkpoint")

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
			r.log.Warn("ledger: machine capped: too many entries without effect since the last checkpoint; what it sends is refused until the next one",
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

// addFrom folds entries es of an answer from peer p, in parts holding at
// most ledger.IneffectiveBudget entries signed by p, and stops (capped)
// once p is capped: a machine answering with a long chain of its own
// entries without effect gets in at most a part's worth past its cap.
func (r *Replica) addFrom(p peer.ID, es []*ledger.Entry) (capped bool, err error) {
	self := p.String()
	for len(es) > 0 {
		if r.Capped(p) {
			r.dropped(DropCapped, len(es))
			return true, nil
		}
		n, own := 0, 0
		for n < len(es) && (own < ledger.IneffectiveBudget || es[n].AuthorString() != self) {
			if es[n].AuthorString() == self {
				own++
			}
			n++
		}
		if err := r.addDurable(es[:n]); err != nil {
			return false, err
		}
		es = es[n:]
	}
	return false, nil
}
