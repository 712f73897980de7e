package store

import (
	"errors"
	"fmt"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/ipfs/go-cid"
)

// Dataset blocks live under their own prefix, apart from the ledger's
// blocks, so a dataset's garbage collection can never touch a ledger entry
// and a ledger walk never sees a dataset chunk. Keys are the CID's bytes.
var dataPrefix = []byte("d/")

func dataKey(c cid.Cid) []byte { return append(append([]byte(nil), dataPrefix...), c.Bytes()...) }

// PutDataBlocks stores dataset blocks durably, skipping those already
// stored, and returns how many were new. It writes through a Badger
// WriteBatch: many blocks per synced write, which a transaction (capped at a
// fraction of the memtable) cannot hold.
func (s *Store) PutDataBlocks(bs []Block) (int, error) {
	fresh := make([]Block, 0, len(bs))
	err := s.db.View(func(txn *badger.Txn) error {
		for _, b := range bs {
			_, err := txn.Get(dataKey(b.CID))
			if errors.Is(err, badger.ErrKeyNotFound) {
				fresh = append(fresh, b)
				continue
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store: data put: %w", err)
	}
	if len(fresh) == 0 {
		return 0, nil
	}
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	for _, b := range fresh {
		if err := wb.Set(dataKey(b.CID), b.Data); err != nil {
			return 0, fmt.Errorf("store: data put: %w", err)
		}
	}
	if err := wb.Flush(); err != nil {
		return 0, fmt.Errorf("store: data put: %w", err)
	}
	return len(fresh), nil
}

// DataBlock returns a dataset block's bytes, or ErrNotFound.
func (s *Store) DataBlock(c cid.Cid) ([]byte, error) {
	var out []byte
	err := s.item(dataKey(c), func(it *badger.Item) (err error) {
		out, err = it.ValueCopy(nil)
		return err
	})
	return out, err
}

// DataBlockSize returns a dataset block's size, or ErrNotFound.
func (s *Store) DataBlockSize(c cid.Cid) (int, error) {
	n := 0
	err := s.item(dataKey(c), func(it *badger.Item) error {
		n = int(it.ValueSize())
		return nil
	})
	return n, err
}

// HasDataBlock reports whether a dataset block is stored.
func (s *Store) HasDataBlock(c cid.Cid) bool {
	return s.item(dataKey(c), func(*badger.Item) error { return nil }) == nil
}

// DeleteDataBlocks removes dataset blocks (absent ones are ignored).
func (s *Store) DeleteDataBlocks(cs []cid.Cid) error {
	ks := make([][]byte, len(cs))
	for i, c := range cs {
		ks[i] = dataKey(c)
	}
	if err := s.deleteKeys(ks, "data "); err != nil {
		return err
	}
	// Give the value log's space back (each call rewrites at most one file).
	for s.db.RunValueLogGC(0.5) == nil {
	}
	return nil
}

// ForEachDataCID calls fn with the CID of every stored dataset block.
func (s *Store) ForEachDataCID(fn func(c cid.Cid) error) error {
	return s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = dataPrefix
		opts.PrefetchValues = false
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			c, err := cid.Cast(it.Item().Key()[len(dataPrefix):])
			if err != nil {
				return fmt.Errorf("store: bad data key: %w", err)
			}
			if err := fn(c); err != nil {
				return err
			}
		}
		return nil
	})
}
