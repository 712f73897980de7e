package replica

import (
	"github.com/ipfs/go-cid"
)

// Walking back a ledger longer than one answer. A peer answers a fetch with
// the entries leading to what was asked, at most its limit of them: the
// newest ones, sent oldest first. A new node joining a ledger longer than
// that gets, first, entries whose parents it lacks; it asks again below
// them, deeper each round, holding them while they wait. Past its cap of
// waiting entries it drops them (DropOrphans), but keeps where the lowest
// ones stopped (the frontier) and which asks it dropped the answers of: it
// walks on down from the frontier until an answer meets what it has (or the
// genesis) and folds, then asks again, in turn back up, what it dropped.
// Memory stays within the waiting caps and a few thousand CIDs per dropped
// ask; every answer is taken oldest first, so it folds as it arrives.

// maxSyncAnswers is how many answers' worth of blocks (MaxFetchBlocks each)
// one fetch reads at most, all rounds together.
const maxSyncAnswers = 4

// walk is where a fetch's walk back stands after a round.
type walk struct {
	missing  []cid.Cid // parents the lowest waiting (or dropped) entries lack
	minClock uint64    // the clock of those entries
	dropped  bool      // waiting entries were dropped during the round
}

// orphanFrontierLocked returns the parents the waiting entries lack (in
// neither the log nor the waiting set) and the lowest clock of an entry
// that lacks one. r.mu must be held.
func (r *Replica) orphanFrontierLocked() ([]cid.Cid, uint64) {
	var missing []cid.Cid
	var minClock uint64
	for _, e := range r.waiting {
		for _, pc := range e.Parents {
			if !r.lg.Has(pc) && r.waiting[pc.KeyString()] == nil {
				missing = append(missing, pc)
				if minClock == 0 || e.Clock < minClock {
					minClock = e.Clock
				}
			}
		}
	}
	return missing, minClock
}

// keepFrontierLocked records, before the waiting entries are dropped, the
// frontier below them, if it is lower than the one recorded. r.mu must be
// held.
func (r *Replica) keepFrontierLocked() {
	r.lostDrops++
	miss, clock := r.orphanFrontierLocked()
	if len(miss) > 0 && (len(r.lost) == 0 || clock < r.lostClock) {
		r.lost, r.lostClock = dedupCIDs(miss), clock
	}
}

// walkLocked returns where the walk stands after a round that began when
// r.lostDrops was drops0, and forgets the recorded frontier. r.mu must be
// held.
func (r *Replica) walkLocked(drops0 int) walk {
	w := walk{dropped: r.lostDrops != drops0}
	w.missing, w.minClock = r.orphanFrontierLocked()
	if len(r.lost) > 0 && (len(w.missing) == 0 || r.lostClock < w.minClock) {
		w.missing, w.minClock = w.missing[:0], r.lostClock
		for _, c := range r.lost {
			if !r.lg.Has(c) {
				w.missing = append(w.missing, c)
			}
		}
	}
	r.lost, r.lostClock = nil, 0
	w.missing = dedupCIDs(w.missing)
	return w
}

func dedupCIDs(cs []cid.Cid) []cid.Cid {
	seen := map[string]bool{}
	out := cs[:0]
	for _, c := range cs {
		if !seen[c.KeyString()] {
			seen[c.KeyString()] = true
			out = append(out, c)
		}
	}
	if len(out) > 4096 {
		out = out[:4096]
	}
	return out
}
