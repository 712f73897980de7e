package ledger

import (
	"sync"
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

// StateHash is State().Hash(), computed once per fold: the hash is kept
// until the State is replaced (a re-fold) or folds another entry. Safe for
// concurrent readers.
func (l *Log) StateHash() string {
	st := l.st
	c := &l.hash
	c.mu.Lock()
	defer c.mu.Unlock()
	w, n := weak.Make(st), st.Applied+st.Ineffective
	if c.hash == "" || c.st != w || c.n != n {
		c.st, c.n, c.hash = w, n, st.Hash()
	}
	return c.hash
}
