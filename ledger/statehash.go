package ledger

import (
	"sync"
	"sync/atomic"
	"weak"
)

// hashCache keeps the hash of the Log's State for the fold that made it,
// so that readers (node status, org show) do not encode the whole State on
// every call. Readers share the Log under a read lock, so it has its own.
type hashCache struct {
	mu   sync.Mutex
	st   weak.Pointer[State] // the State hashed (weak: a replaced State may go)
	n    int64               // its Applied + Ineffective: every fold step counts one
	hash string
}

// frozenHash is the hash of a frozen State (Freeze), computed once: the
// Log's StateHash, the replica's snapshot and every reader of it share it.
type frozenHash struct {
	once sync.Once
	hash string
}

// hashes counts the States encoded to be hashed (tests: a reader of a
// snapshot does not encode it again).
var hashes atomic.Int64

// Hashes is how many times a State was encoded to be hashed since the
// process started (tests).
func Hashes() int64 { return hashes.Load() }

// SnapshotHash is Hash, computed once for a frozen State (Freeze) and kept
// with it; a State not frozen is hashed on each call. Safe for concurrent
// readers of a frozen State.
func (s *State) SnapshotHash() string {
	if s.fh == nil {
		return s.Hash()
	}
	s.fh.once.Do(func() { s.fh.hash = s.Hash() })
	return s.fh.hash
}

// StateHash is State().Hash(), computed once per fold: the hash is kept
// until the State is replaced (a re-fold) or folds another entry; while
// the State is the one published (Snapshot), it is the snapshot's own
// (SnapshotHash). Safe for concurrent readers.
func (l *Log) StateHash() string {
	st := l.st
	if st.frozen {
		return st.SnapshotHash()
	}
	c := &l.hash
	c.mu.Lock()
	defer c.mu.Unlock()
	w, n := weak.Make(st), st.Applied+st.Ineffective
	if c.hash == "" || c.st != w || c.n != n {
		c.st, c.n, c.hash = w, n, st.Hash()
	}
	return c.hash
}
