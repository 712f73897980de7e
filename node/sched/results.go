package sched

import (
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/store"
)

// Finished items' results are facts of this machine until a job.results
// entry carries them into the ledger. So that a kill -9 cannot lose one
// (and the item run again), each is first written to the store as a
// write-ahead record, synchronously, before its run is removed (in batches,
// off the instance's path: retire.go); flush
// deletes the records once their entry is written, and a restarted node
// loads what is left and flushes it.

const resultsPrefix = "results/"

// resultKey is the write-ahead record of one run's result. A run is its
// item, instance and start: an instance that runs an item again (a retry)
// writes a second record, not over the first.
func resultKey(job string, r ledger.ItemResult) string {
	return resultsPrefix + job + "/" + strconv.FormatInt(r.Item, 10) + "/" + r.Instance + "/" + strconv.FormatInt(r.Started, 10)
}

// resultLog is the results' write-ahead records in the store.
type resultLog struct {
	rec Records
	log *slog.Logger
}

// put writes a result's record durably.
func (w resultLog) put(job string, r ledger.ItemResult) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return w.rec.PutRecord(resultKey(job, r), b)
}

// putAll writes the records of a batch of results durably, in one write.
func (w resultLog) putAll(xs []retiree) error {
	recs := make([]store.Record, len(xs))
	for i, x := range xs {
		b, err := json.Marshal(x.res)
		if err != nil {
			return err
		}
		recs[i] = store.Record{Key: resultKey(x.job, x.res), Val: b}
	}
	return w.rec.PutRecords(recs)
}

// forget deletes the records of results now in the ledger (or
// dropped for good).
func (w resultLog) forget(job string, rs []ledger.ItemResult) {
	keys := make([]string, len(rs))
	for i, r := range rs {
		keys[i] = resultKey(job, r)
	}
	if err := w.rec.DeleteRecords(keys); err != nil {
		w.log.Warn("could not delete results already in the ledger; a restart would write them again", "job", job, "err", err)
	}
}

// LoadResults takes back the results recorded before a restart that are
// not in the ledger yet; those that are (the node died between writing
// their entry and deleting their records) are deleted. It runs before
// adoption, which then skips the runs these results came from.
func (s *Scheduler) LoadResults() {
	type rec struct {
		job, key string // key as stored (an older node's keys lack the start)
		r        ledger.ItemResult
	}
	var recs []rec
	var stale []string
	err := s.d.Records.ForEachRecord(resultsPrefix, func(key string, val []byte) error {
		var r ledger.ItemResult
		job, _, _ := strings.Cut(strings.TrimPrefix(key, resultsPrefix), "/")
		if json.Unmarshal(val, &r) != nil || job == "" {
			stale = append(stale, key)
			return nil
		}
		recs = append(recs, rec{job, key, r})
		return nil
	})
	if err != nil {
		s.d.Log.Warn("could not read the results recorded before a restart", "err", err)
		return
	}
	var keep []rec
	s.d.Ledger.View(func(st *ledger.State) {
		for _, x := range recs {
			j := st.Jobs[x.job]
			// A job that left the State at a checkpoint has finished:
			// its result could only be a duplicate.
			if j == nil || j.Archived != nil || inLedger(j, s.d.Machine, x.r) {
				stale = append(stale, x.key)
				continue
			}
			keep = append(keep, x)
		}
	})
	if len(stale) > 0 {
		_ = s.d.Records.DeleteRecords(stale)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range keep {
		s.results[x.job] = append(s.results[x.job], x.r)
	}
	if len(keep) > 0 {
		s.d.Log.Info("results recorded before a restart will be written to the ledger", "results", len(keep))
	}
}

// inLedger reports whether job j holds machine's run r: the same item,
// instance and start (a retry of the item on the same instance is another
// run, whose result must not be taken for the first one's and dropped).
func inLedger(j *ledger.Job, machine string, r ledger.ItemResult) bool {
	found := false
	j.Runs.Each(func(run ledger.Run) {
		found = found || run.Item == r.Item && run.Machine == machine && run.Instance == r.Instance && run.Started == r.Started
	})
	return found
}

// hasResult reports whether a result of job's item by instance is waiting
// for the ledger. s.mu must be held.
func (s *Scheduler) hasResult(job string, item int64, instance string) bool {
	for _, r := range s.results[job] {
		if r.Item == item && r.Instance == instance {
			return true
		}
	}
	return false
}
