package store

import (
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// Finished jobs kept on this machine's disk (docs/design.md §5.7): when a
// job leaves the folded State at a checkpoint, its items and runs are
// written here for job show and job items, under "j/", the job's ID and
// the number of each piece of at most jobPiece bytes (a job of a million
// items is about 150 MB).

var jobPrefix = []byte("j/")

const jobPiece = 1 << 20

func jobKeys(id string) []byte { return append(append(append([]byte(nil), jobPrefix...), id...), '/') }

func jobKey(id string, n int) []byte { return fmt.Appendf(jobKeys(id), "%08x", n) }

// JobOp writes a finished job's encoding (ledger.EncodeJob) under its ID,
// or deletes it when Data is nil.
type JobOp struct {
	ID   string
	Data []byte
}

// PutJobs applies ops in order: each deletes what the job had, then
// writes its pieces.
func (s *Store) PutJobs(ops []JobOp) error {
	need := int64(0)
	for _, o := range ops {
		need += int64(len(jobPrefix) + len(o.ID) + 10 + len(o.Data))
	}
	if err := s.mayWrite(need); err != nil {
		return err
	}
	type kv struct{ k, v []byte } // v nil: delete
	var kvs []kv
	for _, o := range ops {
		old, err := s.jobPieces(o.ID)
		if err != nil {
			return err
		}
		for _, k := range old {
			kvs = append(kvs, kv{k: k})
		}
		for n, b := 0, o.Data; len(b) > 0; n++ {
			m := min(len(b), jobPiece)
			kvs = append(kvs, kv{jobKey(o.ID, n), b[:m]})
			b = b[m:]
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
			return fmt.Errorf("store: put jobs: a piece too large")
		}
		if err := txn.Commit(); err != nil {
			return fmt.Errorf("store: put jobs: %w", err)
		}
		kvs = kvs[n:]
	}
	return nil
}

// jobPieces are the keys of job id's pieces.
func (s *Store) jobPieces(id string) ([][]byte, error) {
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

// Job is a finished job's encoding, ErrNotFound when this machine has none.
func (s *Store) Job(id string) ([]byte, error) {
	var out []byte
	found := false
	err := s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = jobKeys(id)
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			found = true
			if err := it.Item().Value(func(v []byte) error { out = append(out, v...); return nil }); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil && !found {
		err = ErrNotFound
	}
	return out, err
}
