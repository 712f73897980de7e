package replica

import (
	"errors"
	"slices"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/ledger"
)

// The gate of the ledger's budget of entries without effect (docs/design.md
// §5.8). The fold only counts; once it caps a machine, this replica takes
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

// addFrom folds entries es of an answer from peer p, unless p is capped
// (then it reports capped and the fetch stops).
func (r *Replica) addFrom(p peer.ID, es []*ledger.Entry) (capped bool, err error) {
	if r.Capped(p) {
		r.dropped(DropCapped, len(es))
		return true, nil
	}
	return false, r.addDurable(p, es)
}

// markSentLocked notes the entries of es that their author sent itself
// (src is the author): the gate judges them when they are folded. An
// entry another peer sends is not judged, even one its author sent too.
func (r *Replica) markSentLocked(src peer.ID, es []*ledger.Entry) {
	s := src.String()
	for _, e := range es {
		k := e.CID().KeyString()
		switch {
		case src != "" && e.AuthorString() == s && r.waiting[k] == nil && !r.lg.Has(e.CID()):
			r.sentBy[k] = s
		case e.AuthorString() != s:
			delete(r.sentBy, k)
		}
	}
}

// gateLocked splits batch (entries ready to fold, in total order) at the
// gate: part is what to add now, rest what to judge after it is folded.
// An entry its author sent itself is refused (dropped) once the State caps
// the author, and other entries above a refused one go on waiting (a peer
// that holds the refused one may pass it on). A part ends at the entry
// that would use up the rest of the budget of an author with entries it
// sent itself in the batch, if none of its entries took effect (those
// other peers passed on count too: they may come in the same batch), so
// the cap is folded before the author's next: a machine gets in no more
// of what it sends itself than the entry that caps it.
func (r *Replica) gateLocked(batch []*ledger.Entry) (part, rest []*ledger.Entry) {
	if len(r.sentBy) == 0 {
		return batch, nil
	}
	gated := map[string]bool{}
	for _, m := range r.sentBy {
		gated[m] = true
	}
	st := r.lg.State()
	in := map[string]bool{}
	own := map[string]int{}
	for i, e := range batch {
		k := e.CID().KeyString()
		if m := r.sentBy[k]; m != "" && st.IsCapped(m) {
			delete(r.waiting, k)
			delete(r.sentBy, k)
			r.waitBytes -= len(e.Bytes())
			r.dropped(DropCapped, 1)
			continue
		}
		if !r.parentsIn(e, in) {
			continue // a parent was refused: it waits
		}
		part = append(part, e)
		in[k] = true
		a := e.AuthorString()
		if !gated[a] {
			continue
		}
		if own[a]++; own[a] >= ledger.IneffectiveBudget+1-int(st.Budgets[a].Ineffective) {
			return part, batch[i+1:]
		}
	}
	return part, nil
}

// parentsIn reports whether every parent of e is in the log or in in.
func (r *Replica) parentsIn(e *ledger.Entry, in map[string]bool) bool {
	for _, p := range e.Parents {
		if !in[p.KeyString()] && !r.lg.Has(p) {
			return false
		}
	}
	return true
}
