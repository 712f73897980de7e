package store

import (
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// Finished jobs kept on this machine's disk (docs/design.md §5.7): when a
// job leaves the folded State at a checkpoint, its items and runs are
// written here for job show and job items, in parts (ledger.EncodeArchive:
// a header, then pages of items with their runs), under "j/", the job's ID
// and the part's number, so that a listing reads a page at a time.

var jobPrefix = []byte("j/")

func jobKeys(id string) []byte { return append(append(append([]byte(nil), jobPrefix...), id...), '/') }

func jobKey(id string, n int) []byte { return fmt.Appendf(jobKeys(id), "%08x", n) }

// JobOp writes a finished job's parts under its ID, or deletes them when
// Parts is nil.
type JobOp struct {
	ID    string
	Parts [][]byte
}

// PutJobs applies ops in order: each deletes the parts the job had, then
// writes its own.
func (s *Store) PutJobs(ops []JobOp) error {
	need := int64(0)
	for _, o := range ops {
		for _, p := range o.Parts {
			need += int64(len(jobPrefix) + len(o.ID) + 9 + len(p))
		}
	}
	if err := s.mayWrite(need); err != nil {
		return err
	}
	type kv struct{ k, v []byte } // v nil: delete
	var kvs []kv
	for _, o := range ops {
		old, err := s.jobParts(o.ID)
		if err != nil {
			return err
		}
		for _, k := range old {
			kvs = append(kvs, kv{k: k})
		}
		for n, p := range o.Parts {
			kvs = append(kvs, kv{jobKey(o.ID, n), p})
		}
	}
	for len(kvs) > 0 {
		txn := s.db.NewTransaction(true)
		n := 0
		for ; n < len(kvs); n++ {
			var err error
			if kvs[n].v == nil {
				err = txn.Delete(kvs[n].k)
			} else {
				err = txn.Set(kvs[n].k, kvs[n].v)
			}
			if errors.Is(err, badger.ErrTxnTooBig) {
				break
			}
			if err != nil {
				txn.Discard()
				return fmt.Errorf("store: put jobs: %w", err)
			}
		}
		if n == 0 {
			txn.Discard()
			return fmt.Errorf("store: put jobs: a part too large")
		}
		if err := txn.Commit(); err != nil {
			return fmt.Errorf("store: put jobs: %w", err)
		}
		kvs = kvs[n:]
	}
	return nil
}

// jobParts are the keys of job id's parts.
func (s *Store) jobParts(id string) ([][]byte, error) {
	var keys [][]byte
	err := s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix, opts.PrefetchValues = jobKeys(id), false
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			keys = append(keys, it.Item().KeyCopy(nil))
		}
		return nil
	})
	return keys, err
}

// JobPart is part n of finished job id, ErrNotFound when this machine has
// none.
func (s *Store) JobPart(id string, n int) ([]byte, error) {
	var out []byte
	err := s.item(jobKey(id, n), func(it *badger.Item) (err error) {
		out, err = it.ValueCopy(nil)
		return err
	})
	return out, err
}
