package replica

import (
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/ledger"
)

// What readers see: the published snapshot (read without a lock), the Log
// under the read lock, and the membership answers p2p asks of it.

// Reader is the read side of the Log; see ReadLog.
type Reader interface {
	State() *ledger.State
	StateHash() string // State().Hash(), kept per fold
	Org() string
	Len() int
	Has(c cid.Cid) bool
	Get(c cid.Cid) *ledger.Entry
	Heads() ([]cid.Cid, uint64)
	Effective(c cid.Cid) bool
	Entries() []*ledger.Entry
}

// Snapshot is the ledger as of one fold (or batch of folds): its State,
// frozen, and the DAG's size and heads then. Nothing changes it: it is
// read without any lock, kept as long as wanted, and shared by every
// reader; the fold goes on with a copy of the State that shares what it
// does not write (ledger/cow.go).
type Snapshot struct {
	State *ledger.State
	// Len is the number of entries in the DAG; Heads its heads, sorted
	// by CID, and Clock the largest clock among them.
	Len   int
	Heads []cid.Cid
	Clock uint64
}

// StateHash is State.Hash(), computed once per fold and kept with the
// frozen State (ledger.State.SnapshotHash): the Log's StateHash (a
// checkpoint) and every reader of this snapshot share it.
func (s *Snapshot) StateHash() string { return s.State.SnapshotHash() }

// publishLocked swaps in a snapshot of the Log as it is now, when it
// changed. r.mu must be held.
func (r *Replica) publishLocked() {
	r.archiveLocked() // archive.go
	if old := r.snap.Load(); old != nil && old.State == r.lg.State() && old.Len == r.lg.Len() {
		return
	}
	r.noteCappedLocked()
	heads, clock := r.lg.Heads()
	r.snap.Store(&Snapshot{State: r.lg.Snapshot(), Len: r.lg.Len(), Heads: heads, Clock: clock})
}

// Snapshot is the ledger as of the last fold; it takes no lock (see
// Snapshot).
func (r *Replica) Snapshot() *Snapshot { return r.snap.Load() }

// View runs fn with the State as of the last fold (Snapshot), holding no
// lock: a slow fn delays no fold. fn must not modify the State; it may
// keep it, and call the Replica.
func (r *Replica) View(fn func(st *ledger.State)) {
	fn(r.snap.Load().State)
}

// TryView is View; it always runs fn and reports true. (Kept for the
// monitors that once had to skip a look while a fold held the lock.)
func (r *Replica) TryView(fn func(st *ledger.State)) bool {
	r.View(fn)
	return true
}

// ReadLog read-locks the Log and returns it with the function that unlocks
// it. Until then the caller must not call the Replica, and the lock delays
// every fold: it is for reading the DAG (Has, Get, Effective, Entries).
// Readers of the State, heads or hash use Snapshot or View.
func (r *Replica) ReadLog() (Reader, func()) {
	r.mu.RLock()
	return r.lg, r.mu.RUnlock
}

// IsMachine reports whether id is a registered machine of the org (pending
// or approved): p2p.Membership.
func (r *Replica) IsMachine(id peer.ID) bool {
	mc := r.snap.Load().State.Machines[id.String()]
	return mc != nil && (mc.Status == ledger.MachinePending || mc.Status == ledger.MachineApproved)
}

// IsApproved reports whether id is an approved machine: p2p.Membership.
func (r *Replica) IsApproved(id peer.ID) bool {
	mc := r.snap.Load().State.Machines[id.String()]
	return mc != nil && mc.Status == ledger.MachineApproved
}

// HasHeads reports whether every head is in the log: if so, a sender this
// replica does not know as a machine is provably not one (see p2p.LagAware);
// if not, this replica may lag behind it.
func (r *Replica) HasHeads(heads []string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, h := range heads {
		c, err := cid.Decode(h)
		if err != nil {
			continue // not a head at all: proves nothing either way
		}
		if !r.lg.Has(c) {
			return false
		}
	}
	return true
}

// Org is the org ID, once genesis is known ("" before).
func (r *Replica) Org() string { return r.snap.Load().State.Org }

// Heads are the entries without children, sorted by CID, and the largest
// clock among them.
func (r *Replica) Heads() ([]cid.Cid, uint64) {
	s := r.snap.Load()
	return append([]cid.Cid(nil), s.Heads...), s.Clock
}

// Len is the number of entries in the DAG.
func (r *Replica) Len() int { return r.snap.Load().Len }

// Has reports whether the entry is in the Log.
func (r *Replica) Has(c cid.Cid) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.lg.Has(c)
}

// Get returns an entry of the Log by CID, or nil.
func (r *Replica) Get(c cid.Cid) *ledger.Entry {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.lg.Get(c)
}

// StateHash is the hash of the current State.
func (r *Replica) StateHash() string { return r.snap.Load().StateHash() }

// LastAdded is when an entry was last added, or the Replica opened.
func (r *Replica) LastAdded() time.Time {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.lastAdded
}

// LastSync is the peer a fetch last completed from without error (even when
// nothing was missing), and when; zero values before any.
func (r *Replica) LastSync() (peer.ID, time.Time) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.lastPeer, r.lastSync
}
