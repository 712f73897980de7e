package store

import (
	"encoding/binary"
	"errors"
	"fmt"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/ipfs/go-cid"
)

// History: ledger entries below the checkpoint a node's Log starts at
// (docs/design.md §7.3). They are kept under their own prefix, so Open
// (ForEachBlock) never reads them, while GetBlock and HasBlock still find
// them: the node serves them to peers behind it and exports them. Pruning
// deletes them and keeps each one's CID and clock (PruneHistory).

var historyPrefix = []byte("h/")

func historyKey(c cid.Cid) []byte {
	return append(append([]byte(nil), historyPrefix...), c.Bytes()...)
}

// MoveToHistory moves blocks from the ledger's blocks (ForEachBlock) to its
// history, in as few transactions as Badger allows. A CID that is not
// among the blocks (already moved, or never stored) is skipped; the move
// is idempotent, so one cut short is finished by calling it again.
func (s *Store) MoveToHistory(cs []cid.Cid) error {
	return s.move(cs, blockKey, historyKey)
}

// MoveFromHistory moves blocks of the history back among the ledger's
// blocks (the chain of checkpoints moved below the node's start, and
// entries below the old start are after the new one); as MoveToHistory.
func (s *Store) MoveFromHistory(cs []cid.Cid) error {
	return s.move(cs, historyKey, blockKey)
}

// move moves the blocks cs from their keys by from to their keys by to.
func (s *Store) move(cs []cid.Cid, from, to func(cid.Cid) []byte) error {
	for len(cs) > 0 {
		txn := s.db.NewTransaction(true)
		n := 0
		for ; n < len(cs); n++ {
			it, err := txn.Get(from(cs[n]))
			if errors.Is(err, badger.ErrKeyNotFound) {
				continue
			}
			if err != nil {
				txn.Discard()
				return fmt.Errorf("store: move: %w", err)
			}
			v, err := it.ValueCopy(nil)
			if err != nil {
				txn.Discard()
				return fmt.Errorf("store: move: %w", err)
			}
			err = txn.Set(to(cs[n]), v)
			if err == nil {
				err = txn.Delete(from(cs[n]))
			}
			if errors.Is(err, badger.ErrTxnTooBig) && n > 0 {
				break
			}
			if err != nil {
				txn.Discard()
				return fmt.Errorf("store: move: %w", err)
			}
		}
		if err := txn.Commit(); err != nil {
			return fmt.Errorf("store: move: %w", err)
		}
		cs = cs[n:]
	}
	return nil
}

// InHistory reports whether a block is in the history.
func (s *Store) InHistory(c cid.Cid) bool {
	return s.item(historyKey(c), func(*badger.Item) error { return nil }) == nil
}

// ForEachHistory calls fn for every block of the history, by CID.
func (s *Store) ForEachHistory(fn func(c cid.Cid, data []byte) error) error {
	return s.forEach(historyPrefix, fn)
}

var prunedPrefix = []byte("x/")

func prunedKey(c cid.Cid) []byte {
	return append(append([]byte(nil), prunedPrefix...), c.Bytes()...)
}

// Pruned is what the store keeps of an entry it pruned from the history:
// its CID and clock, what a later entry naming it as a parent needs to
// link (ledger.Log.LinkPruned) as on a node that still holds it.
type Pruned struct {
	CID   cid.Cid
	Clock uint64
}

// PruneHistory deletes blocks of the history and keeps, for each, its
// clock under its CID (PrunedClock, IsPruned): a few bytes an entry.
func (s *Store) PruneHistory(ps []Pruned) error {
	if err := s.mayWrite(int64(len(ps) * 48)); err != nil {
		return err
	}
	for len(ps) > 0 {
		txn := s.db.NewTransaction(true)
		n := 0
		for ; n < len(ps); n++ {
			if ps[n].Clock == 0 {
				txn.Discard()
				return fmt.Errorf("store: prune: %s: clock 0", ps[n].CID)
			}
			err := txn.Set(prunedKey(ps[n].CID), binary.AppendUvarint(nil, ps[n].Clock))
			if err == nil {
				err = txn.Delete(historyKey(ps[n].CID))
			}
			if errors.Is(err, badger.ErrTxnTooBig) && n > 0 {
				break
			}
			if err != nil {
				txn.Discard()
				return fmt.Errorf("store: prune: %w", err)
			}
		}
		if err := txn.Commit(); err != nil {
			return fmt.Errorf("store: prune: %w", err)
		}
		ps = ps[n:]
	}
	return nil
}

// IsPruned reports whether c was pruned from the history.
func (s *Store) IsPruned(c cid.Cid) bool {
	return s.item(prunedKey(c), func(*badger.Item) error { return nil }) == nil
}

// PrunedClock is the clock of entry c, pruned from the history; false when
// c was not pruned, or was pruned before clocks were kept (an empty
// marker).
func (s *Store) PrunedClock(c cid.Cid) (uint64, bool) {
	var clock uint64
	err := s.item(prunedKey(c), func(it *badger.Item) error {
		return it.Value(func(v []byte) error {
			k, n := binary.Uvarint(v)
			if n <= 0 || n != len(v) || k == 0 {
				return errors.New("no clock")
			}
			clock = k
			return nil
		})
	})
	return clock, err == nil
}

// ReclaimSpace gives back the value log's space that moved and pruned
// entries left behind (each pass rewrites at most one file of at most 64
// MiB, not on a disk too full for that).
func (s *Store) ReclaimSpace() {
	for s.mayWrite(64<<20) == nil && s.db.RunValueLogGC(0.5) == nil {
	}
}
