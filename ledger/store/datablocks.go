package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/ipfs/go-cid"
)

// Dataset blocks live under their own prefixes, apart from the ledger's
// blocks, so a dataset's garbage collection can never touch a ledger entry
// and a ledger walk never sees a dataset chunk: d/<CID> holds a small
// block's bytes, dk/<CID> where a packed one is (packs.go), dp/<import>/<CID>
// a pin.
var dataPrefix = []byte("d/")

func dataKey(c cid.Cid) []byte { return dataKeyOf(c.Bytes()) }

// Pin keeps the blocks an import wrote from the collector while the import
// has no dataset entry yet (it runs, or it was interrupted and a rerun will
// reuse them), until the import's entry is written (DeleteDataPins) or the
// pin is older than the collector allows.
type Pin struct {
	// ID names one import: 1 to 64 bytes without "/".
	ID string
	// At is when the import started.
	At time.Time
}

var pinPrefix = []byte("dp/")

func pinKey(id string, c cid.Cid) []byte {
	k := append(append(append([]byte(nil), pinPrefix...), id...), '/')
	return append(k, c.Bytes()...)
}

// PutDataBlocks stores dataset blocks durably, skipping those already
// stored, and returns how many were new. With pin, every block of bs (new
// or not) is pinned in the same writes. It writes through a Badger
// WriteBatch: many blocks per synced write, which a transaction (capped at a
// fraction of the memtable) cannot hold. (A DataWriter's Put and Flush.)
func (s *Store) PutDataBlocks(bs []Block, pin *Pin) (int, error) {
	w, err := s.NewDataWriter(pin)
	if err != nil {
		return 0, err
	}
	defer w.Close()
	n, err := w.Put(bs)
	if err != nil {
		return 0, err
	}
	if err := w.Flush(); err != nil {
		return 0, err
	}
	return n, nil
}

// ForEachDataPin calls fn for every pinned block with its pin.
func (s *Store) ForEachDataPin(fn func(p Pin, c cid.Cid) error) error {
	return s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = pinPrefix
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			rest := it.Item().Key()[len(pinPrefix):]
			k := bytes.IndexByte(rest, '/')
			if k < 0 {
				return fmt.Errorf("store: bad pin key %q", it.Item().Key())
			}
			c, err := cid.Cast(rest[k+1:])
			if err != nil {
				return fmt.Errorf("store: bad pin key: %w", err)
			}
			var at int64
			if err := it.Item().Value(func(v []byte) error {
				if len(v) != 8 {
					return fmt.Errorf("store: pin of %d bytes; want 8", len(v))
				}
				at = int64(binary.BigEndian.Uint64(v))
				return nil
			}); err != nil {
				return err
			}
			if err := fn(Pin{ID: string(rest[:k]), At: time.Unix(at, 0)}, c); err != nil {
				return err
			}
		}
		return nil
	})
}

// DeleteDataPins removes every pin of the imports ids (the blocks stay).
func (s *Store) DeleteDataPins(ids []string) error {
	var ks [][]byte
	err := s.db.View(func(txn *badger.Txn) error {
		for _, id := range ids {
			opts := badger.DefaultIteratorOptions
			opts.Prefix = append(append(append([]byte(nil), pinPrefix...), id...), '/')
			opts.PrefetchValues = false
			it := txn.NewIterator(opts)
			for it.Rewind(); it.Valid(); it.Next() {
				ks = append(ks, it.Item().KeyCopy(nil))
			}
			it.Close()
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: pin delete: %w", err)
	}
	return s.deleteKeys(ks, "pin ")
}

// hasData reports whether a block (in Badger or in a pack) is stored.
func hasData(txn *badger.Txn, c []byte) (bool, error) {
	for _, k := range [][]byte{ptrKey(c), dataKeyOf(c)} {
		_, err := txn.Get(k)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, badger.ErrKeyNotFound) {
			return false, err
		}
	}
	return false, nil
}

func dataKeyOf(c []byte) []byte { return append(append([]byte(nil), dataPrefix...), c...) }

// dataAt calls inBadger with a block kept in Badger, or inPack with where a
// packed one is; ErrNotFound when it is neither.
func (s *Store) dataAt(c cid.Cid, inBadger func(*badger.Item) error, inPack func(ptr) error) error {
	var at *ptr
	err := s.db.View(func(txn *badger.Txn) error {
		k := c.Bytes()
		it, err := txn.Get(ptrKey(k))
		if err == nil {
			return it.Value(func(v []byte) error {
				p, err := decodePtr(v)
				at = &p
				return err
			})
		}
		if !errors.Is(err, badger.ErrKeyNotFound) {
			return err
		}
		it, err = txn.Get(dataKeyOf(k))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		return inBadger(it)
	})
	if err != nil || at == nil {
		return err
	}
	return inPack(*at)
}

// DataBlock returns a dataset block's bytes, or ErrNotFound.
func (s *Store) DataBlock(c cid.Cid) ([]byte, error) { return s.DataBlockInto(c, nil) }

// DataBlockInto returns a dataset block's bytes in buf's memory when they
// fit (else in new memory), or ErrNotFound.
func (s *Store) DataBlockInto(c cid.Cid, buf []byte) ([]byte, error) {
	var out []byte
	err := s.dataAt(c, func(it *badger.Item) (err error) {
		out, err = it.ValueCopy(buf[:0])
		if out == nil {
			out = []byte{}
		}
		return err
	}, func(at ptr) (err error) {
		out, err = s.packs.read(at, buf)
		return err
	})
	return out, err
}

// DataBlockSize returns a dataset block's size, or ErrNotFound.
func (s *Store) DataBlockSize(c cid.Cid) (int, error) {
	n := 0
	err := s.dataAt(c, func(it *badger.Item) error {
		n = int(it.ValueSize())
		return nil
	}, func(at ptr) error {
		n = int(at.n)
		return nil
	})
	return n, err
}

// HasDataBlock reports whether a dataset block is stored.
func (s *Store) HasDataBlock(c cid.Cid) bool {
	has := false
	_ = s.db.View(func(txn *badger.Txn) (err error) {
		has, err = hasData(txn, c.Bytes())
		return err
	})
	return has
}

// DeleteDataBlocks removes dataset blocks (absent ones are ignored), and
// the packs no block is left in.
func (s *Store) DeleteDataBlocks(cs []cid.Cid) error {
	ks := make([][]byte, 0, 2*len(cs))
	for _, c := range cs {
		ks = append(ks, dataKey(c), ptrKey(c.Bytes()))
	}
	if err := s.deleteKeys(ks, "data "); err != nil {
		return err
	}
	if err := s.dropDeadPacks(); err != nil {
		return err
	}
	s.ReclaimSpace()
	return nil
}

// dropDeadPacks deletes the packs no pointer refers to.
func (s *Store) dropDeadPacks() error {
	s.packs.gc.Lock()
	defer s.packs.gc.Unlock()
	live := map[uint32]bool{}
	if err := s.forEachPtr(func(_ []byte, at ptr) error { live[at.pack] = true; return nil }); err != nil {
		return err
	}
	return s.packs.drop(live)
}

func (s *Store) forEachPtr(fn func(c []byte, at ptr) error) error {
	return s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = ptrPrefix
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			err := it.Item().Value(func(v []byte) error {
				at, err := decodePtr(v)
				if err != nil {
					return err
				}
				return fn(it.Item().Key()[len(ptrPrefix):], at)
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// ForEachDataCID calls fn with the CID of every stored dataset block.
func (s *Store) ForEachDataCID(fn func(c cid.Cid) error) error {
	return s.db.View(func(txn *badger.Txn) error {
		for _, prefix := range [][]byte{dataPrefix, ptrPrefix} {
			opts := badger.DefaultIteratorOptions
			opts.Prefix = prefix
			opts.PrefetchValues = false
			it := txn.NewIterator(opts)
			for it.Rewind(); it.Valid(); it.Next() {
				c, err := cid.Cast(it.Item().Key()[len(prefix):])
				if err == nil {
					err = fn(c)
				} else {
					err = fmt.Errorf("store: bad data key: %w", err)
				}
				if err != nil {
					it.Close()
					return err
				}
			}
			it.Close()
		}
		return nil
	})
}
