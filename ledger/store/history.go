package store

import (
	"errors"
	"fmt"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/ipfs/go-cid"
)

// History: ledger entries below the checkpoint a node's Log starts at
// (docs/design.md §7.3). They are kept under their own prefix, so Open
// (ForEachBlock) never reads them, while GetBlock and HasBlock still find
// them: the node serves them to peers behind it and exports them. Pruning
// deletes them (DeleteHistory).

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

// PruneHistory deletes blocks of the history and remembers their CIDs
// (IsPruned), so that an entry naming one is refused with that reason
// rather than waiting for it.
func (s *Store) PruneHistory(cs []cid.Cid) error {
	if err := s.mayWrite(int64(len(cs) * 40)); err != nil {
		return err
	}
	for len(cs) > 0 {
		txn := s.db.NewTransaction(true)
		n := 0
		for ; n < len(cs); n++ {
			err := txn.Set(append(append([]byte(nil), prunedPrefix...), cs[n].Bytes()...), nil)
			if err == nil {
				err = txn.Delete(historyKey(cs[n]))
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
		cs = cs[n:]
	}
	return nil
}

// IsPruned reports whether c was pruned from the history.
func (s *Store) IsPruned(c cid.Cid) bool {
	return s.item(append(append([]byte(nil), prunedPrefix...), c.Bytes()...), func(*badger.Item) error { return nil }) == nil
}

// ReclaimSpace gives back the value log's space that moved and pruned
// entries left behind (each pass rewrites at most one file of at most 64
// MiB, not on a disk too full for that).
func (s *Store) ReclaimSpace() {
	for s.mayWrite(64<<20) == nil && s.db.RunValueLogGC(0.5) == nil {
	}
}
