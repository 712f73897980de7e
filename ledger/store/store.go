// Package store persists the ledger in Badger: blocks by CID (ledger
// entries, those below the node's checkpoint in a history of their own,
// history.go), small metadata, the node's write-ahead records (facts of this
// machine, such as a finished item's result, kept until they are in the
// ledger), finished jobs' items and runs once they left the folded State
// (jobs.go), and dataset blocks (small ones in Badger, file chunks in pack
// files beside it with their places in Badger; see datablocks.go, packs.go,
// and datawriter.go for how an import stores them with few syncs) with the
// pins that keep an unfinished import's blocks.
// Writes of ledger entries are synchronous (SyncWrites), so an entry the API
// acknowledged survives kill -9.
package store

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/ipfs/go-cid"
)

// ErrNotFound says a block or key is absent.
var ErrNotFound = errors.New("store: not found")

// Store is a Badger database.
type Store struct {
	db    *badger.DB
	packs *packs                            // dataset blocks of packMin bytes or more (packs.go)
	check atomic.Pointer[func(int64) error] // see SetWriteCheck
}

// SetWriteCheck makes every write of the store (blocks, metadata, records,
// dataset blocks, and the value log's garbage collection) first ask check
// with about how many bytes it will write; an error refuses the write and
// is returned as it is. The node checks the free space so (package
// internal/diskguard): Badger writes through memory-mapped files, and a
// write into one on a full disk kills the process with SIGBUS. Deletes are
// not asked: they are small and give space back.
func (s *Store) SetWriteCheck(check func(need int64) error) {
	if check == nil {
		s.check.Store(nil)
		return
	}
	s.check.Store(&check)
}

// mayWrite asks the write check about a write of need bytes.
func (s *Store) mayWrite(need int64) error {
	if c := s.check.Load(); c != nil {
		return (*c)(need)
	}
	return nil
}

var (
	blockPrefix = []byte("b/")
	metaPrefix  = []byte("m/")
	walPrefix   = []byte("w/")
)

type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Errorf(f string, v ...any)   { a.l.Error(fmt.Sprintf(f, v...)) }
func (a slogAdapter) Warningf(f string, v ...any) { a.l.Warn(fmt.Sprintf(f, v...)) }
func (a slogAdapter) Infof(string, ...any)        {}
func (a slogAdapter) Debugf(string, ...any)       {}

// LockWait is how long Open waits for a store another process holds.
var LockWait = 10 * time.Second

// isLocked reports whether err is Badger's refusal of a directory another
// process holds (it has no error value of its own for it).
func isLocked(err error) bool {
	return strings.Contains(err.Error(), "Cannot acquire directory lock")
}

// Open opens (or creates) the store in dir. log may be nil. A store another
// process holds is waited for up to LockWait, then refused with one line.
func Open(dir string, log *slog.Logger) (*Store, error) {
	// Badger writes its memtables (2 of 8 MiB, each logged to a 16 MiB
	// file) and value log through memory-mapped files it creates sparse: a
	// write into one on a full disk is a SIGBUS. The node refuses writes
	// before that (SetWriteCheck), and the ballast its reserve (32 MiB by
	// default) gives back holds a flush of both memtables, so that Badger
	// can still flush and close.
	opts := badger.DefaultOptions(dir).
		WithSyncWrites(true).
		WithNumVersionsToKeep(1).
		WithMemTableSize(8 << 20).
		WithBlockCacheSize(8 << 20).
		WithIndexCacheSize(4 << 20).
		WithValueLogFileSize(64 << 20).
		WithNumMemtables(2).
		WithNumLevelZeroTables(2).
		WithNumLevelZeroTablesStall(4).
		WithNumCompactors(2).
		// Values above 1 KiB (small dataset blocks, large entries) go to the
		// value log, not the LSM tree, where they made memtables flush often
		// and compactions rewrite them. (Dataset chunks go to packs.go.)
		WithValueThreshold(1 << 10)
	if log != nil {
		opts = opts.WithLogger(slogAdapter{log})
	} else {
		opts = opts.WithLogger(nil)
	}
	db, err := badger.Open(opts)
	// A process killed a moment ago may not have let go of the directory
	// lock yet (a restart right after kill -9, as a supervisor does): wait
	// for it a while before calling the store taken.
	for deadline := time.Now().Add(LockWait); err != nil && isLocked(err) && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		db, err = badger.Open(opts)
	}
	if err != nil && isLocked(err) {
		return nil, fmt.Errorf("store: %s is in use by another process (another cshare node on this data dir?)", dir)
	}
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", dir, err)
	}
	ps, err := openPacks(filepath.Join(dir, "packs"))
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return &Store{db: db, packs: ps}, nil
}

// Close closes the database.
func (s *Store) Close() error {
	s.packs.close()
	return s.db.Close()
}

func blockKey(c cid.Cid) []byte { return append(append([]byte(nil), blockPrefix...), c.Bytes()...) }

// Block is a CID and its bytes.
type Block struct {
	CID  cid.Cid
	Data []byte
}

// PutBlocks stores blocks durably in one transaction (split when large).
func (s *Store) PutBlocks(bs []Block) error {
	need := int64(0)
	for _, b := range bs {
		need += int64(len(blockPrefix) + len(b.CID.Bytes()) + len(b.Data))
	}
	if err := s.mayWrite(need); err != nil {
		return err
	}
	for len(bs) > 0 {
		txn := s.db.NewTransaction(true)
		n := 0
		for ; n < len(bs); n++ {
			err := txn.Set(blockKey(bs[n].CID), bs[n].Data)
			if errors.Is(err, badger.ErrTxnTooBig) {
				break
			}
			if err != nil {
				txn.Discard()
				return fmt.Errorf("store: put: %w", err)
			}
		}
		if n == 0 {
			txn.Discard()
			return fmt.Errorf("store: block too large")
		}
		if err := txn.Commit(); err != nil {
			return fmt.Errorf("store: commit: %w", err)
		}
		bs = bs[n:]
	}
	return nil
}

// GetBlock returns a block's bytes, from the blocks or the history
// (history.go).
func (s *Store) GetBlock(c cid.Cid) ([]byte, error) {
	var out []byte
	read := func(it *badger.Item) (err error) {
		out, err = it.ValueCopy(nil)
		return err
	}
	err := s.item(blockKey(c), read)
	if errors.Is(err, ErrNotFound) {
		err = s.item(historyKey(c), read)
	}
	return out, err
}

// HasBlock reports whether a block is stored (among the blocks or in the
// history).
func (s *Store) HasBlock(c cid.Cid) bool {
	return s.item(blockKey(c), func(*badger.Item) error { return nil }) == nil || s.InHistory(c)
}

// item calls fn with key's item in a read transaction; ErrNotFound when
// there is none.
func (s *Store) item(key []byte, fn func(*badger.Item) error) error {
	return s.db.View(func(txn *badger.Txn) error {
		it, err := txn.Get(key)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		return fn(it)
	})
}

// ForEachBlock calls fn for every stored block but those in the history
// (history.go).
func (s *Store) ForEachBlock(fn func(c cid.Cid, data []byte) error) error {
	return s.forEach(blockPrefix, fn)
}

// forEach calls fn for every block under prefix.
func (s *Store) forEach(prefix []byte, fn func(c cid.Cid, data []byte) error) error {
	return s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = prefix
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			c, err := cid.Cast(item.Key()[len(prefix):])
			if err != nil {
				return fmt.Errorf("store: bad key: %w", err)
			}
			v, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			if err := fn(c, v); err != nil {
				return err
			}
		}
		return nil
	})
}

// SetMeta stores a small durable value.
func (s *Store) SetMeta(key string, val []byte) error {
	if err := s.mayWrite(int64(len(metaPrefix) + len(key) + len(val))); err != nil {
		return err
	}
	return s.db.Update(func(txn *badger.Txn) error {
		return txn.Set(append(append([]byte(nil), metaPrefix...), key...), val)
	})
}

// Meta reads a value stored with SetMeta.
func (s *Store) Meta(key string) ([]byte, error) {
	var out []byte
	err := s.db.View(func(txn *badger.Txn) error {
		it, err := txn.Get(append(append([]byte(nil), metaPrefix...), key...))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		out, err = it.ValueCopy(nil)
		return err
	})
	return out, err
}

func walKey(key string) []byte { return append(append([]byte(nil), walPrefix...), key...) }

// PutRecord stores a write-ahead record durably (synchronously, like every
// write of the store) under key, replacing any record there.
func (s *Store) PutRecord(key string, val []byte) error {
	if err := s.mayWrite(int64(len(walPrefix) + len(key) + len(val))); err != nil {
		return err
	}
	return s.db.Update(func(txn *badger.Txn) error { return txn.Set(walKey(key), val) })
}

// Record is one write-ahead record: its key and value.
type Record struct {
	Key string
	Val []byte
}

// PutRecords stores write-ahead records durably, in as few synchronous
// transactions as Badger allows: a batch costs one disk sync, not one a
// record.
func (s *Store) PutRecords(recs []Record) error {
	var need int64
	for _, r := range recs {
		need += int64(len(walPrefix) + len(r.Key) + len(r.Val))
	}
	if err := s.mayWrite(need); err != nil {
		return err
	}
	for len(recs) > 0 {
		txn := s.db.NewTransaction(true)
		n := 0
		for ; n < len(recs); n++ {
			err := txn.Set(walKey(recs[n].Key), recs[n].Val)
			if errors.Is(err, badger.ErrTxnTooBig) && n > 0 {
				break
			}
			if err != nil {
				txn.Discard()
				return fmt.Errorf("store: put records: %w", err)
			}
		}
		if err := txn.Commit(); err != nil {
			return fmt.Errorf("store: put records: %w", err)
		}
		recs = recs[n:]
	}
	return nil
}

// DeleteRecords removes write-ahead records (absent keys are ignored).
func (s *Store) DeleteRecords(keys []string) error {
	ks := make([][]byte, len(keys))
	for i, k := range keys {
		ks[i] = walKey(k)
	}
	return s.deleteKeys(ks, "")
}

// deleteKeys deletes keys in as few transactions as Badger allows (absent
// keys are ignored); what names them in errors ("" or "data ").
func (s *Store) deleteKeys(keys [][]byte, what string) error {
	for len(keys) > 0 {
		txn := s.db.NewTransaction(true)
		n := 0
		for ; n < len(keys); n++ {
			err := txn.Delete(keys[n])
			if errors.Is(err, badger.ErrTxnTooBig) {
				break
			}
			if err != nil {
				txn.Discard()
				return fmt.Errorf("store: %sdelete: %w", what, err)
			}
		}
		if err := txn.Commit(); err != nil {
			return fmt.Errorf("store: %scommit: %w", what, err)
		}
		keys = keys[n:]
	}
	return nil
}

// ForEachRecord calls fn for every write-ahead record whose key starts with
// prefix, in key order.
func (s *Store) ForEachRecord(prefix string, fn func(key string, val []byte) error) error {
	return s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = walKey(prefix)
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			v, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			if err := fn(string(item.Key()[len(walPrefix):]), v); err != nil {
				return err
			}
		}
		return nil
	})
}
