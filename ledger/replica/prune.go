package replica

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/fxamacker/cbor/v2"
	"github.com/ipfs/go-cid"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/store"
)

// Pruning and export (docs/design.md §7.3). Each compaction lists what it
// moved to the history under historyRecord(depth), with its barrier's time.
// Prune deletes the entries of every list whose barrier is older than the
// org's ledger.retain, measured from the newest barrier's time (the
// checkpoint entries' times: every node prunes the same entries), keeping
// forever the authority entries (keepForever), and those the Log names as
// parents below its start (it reads them again at Open). Of each entry it
// deletes, the store keeps the CID and clock, so that a later entry naming
// it still links (linkBelowLocked). ExportHistory writes what
// this node still has; ReadHistory reads it back, checking every entry.

// historyList is the value of a historyRecord.
type historyList struct {
	Barrier []byte   `cbor:"barrier"` // the barrier's CID
	Time    int64    `cbor:"time"`    // its entry's time, unix ms
	CIDs    [][]byte `cbor:"cids"`    // the entries moved (after pruning: those kept)
	Pruned  bool     `cbor:"pruned,omitempty"`
}

// keepForever are the kinds pruning keeps: the org's authority chain
// (/work/shared/DESIGN.md "Checkpoints a joiner can trust": genesis, roles,
// removals, org key rotations), who was a machine of the org, and the
// checkpoints themselves.
var keepForever = map[string]bool{
	ledger.KindGenesis: true, ledger.KindOrgKey: true, ledger.KindOrgTransfer: true, ledger.KindOrgDelete: true,
	ledger.KindMemberRole: true, ledger.KindMemberRemove: true,
	ledger.KindMachineApprove: true, ledger.KindMachineReject: true, ledger.KindMachineRemove: true,
	ledger.KindCheckpoint: true,
}

// Prune deletes from the history the entries below barriers older than
// the org's ledger.retain (see above) and reports how many. It does
// nothing while ledger.retain is 0.
func (r *Replica) Prune() (int, error) {
	r.pruneMu.Lock()
	defer r.pruneMu.Unlock()
	retain := r.Snapshot().State.Settings.Ledger.RetainMS
	r.mu.RLock()
	top := r.lg.Top()
	keep := map[string]bool{} // what the Log needs to start again (ledger.Log.BelowParents)
	for _, c := range r.lg.BelowParents() {
		keep[c.KeyString()] = true
	}
	r.mu.RUnlock()
	if retain == 0 || top.Entry == nil {
		return 0, nil
	}
	cut := top.Entry.Time - retain
	due := map[string]historyList{}
	err := r.st.ForEachRecord(historyRecordPrefix, func(key string, val []byte) error {
		var l historyList
		if err := cbor.Unmarshal(val, &l); err != nil {
			return fmt.Errorf("replica: history record %s: %w", key, err)
		}
		if !l.Pruned && l.Time <= cut {
			due[key] = l
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	total := 0
	for key, l := range due {
		var gone []store.Pruned
		kept := l.CIDs[:0:0]
		for _, b := range l.CIDs {
			c, err := cid.Cast(b)
			if err != nil {
				continue
			}
			e := r.storedEntry(c)
			switch {
			case e == nil: // not stored (it was never here)
			case keepForever[e.Kind] || keep[c.KeyString()]:
				kept = append(kept, b)
			default:
				gone = append(gone, store.Pruned{CID: c, Clock: e.Clock})
			}
		}
		if err := r.st.PruneHistory(gone); err != nil {
			return total, err
		}
		l.CIDs, l.Pruned = kept, true
		v, err := cbor.Marshal(l)
		if err != nil {
			return total, err
		}
		if err := r.st.PutRecord(key, v); err != nil {
			return total, err
		}
		total += len(gone)
	}
	if total > 0 {
		r.log.Info("ledger: pruned entries older than ledger.retain", "entries", total)
		r.st.ReclaimSpace()
	}
	return total, nil
}

const historyRecordPrefix = "ledger.history/"

// HistoryFormat names the format ExportHistory writes; the file opens with
// it and a newline (historyMagic).
const HistoryFormat = "cshare-ledger-history/1"

const historyMagic = HistoryFormat + "\n"

// ExportHistory writes every entry this node still has (the history and
// the Log's) to w: historyMagic, then each entry's bytes as a uvarint
// length and the bytes, by CID. It reports how many.
func (r *Replica) ExportHistory(w io.Writer) (int, error) {
	bw := bufio.NewWriter(w)
	if _, err := bw.WriteString(historyMagic); err != nil {
		return 0, err
	}
	n := 0
	var lb [binary.MaxVarintLen64]byte
	put := func(_ cid.Cid, data []byte) error {
		k := binary.PutUvarint(lb[:], uint64(len(data)))
		if _, err := bw.Write(lb[:k]); err != nil {
			return err
		}
		_, err := bw.Write(data)
		n++
		return err
	}
	if err := r.st.ForEachHistory(put); err != nil {
		return n, err
	}
	if err := r.st.ForEachBlock(put); err != nil {
		return n, err
	}
	return n, bw.Flush()
}

// ReadHistory reads what ExportHistory wrote, calling fn with each entry
// after checking its form, CID and signature (ledger.DecodeBatch); the
// first entry that fails stops it with an error naming its place.
func ReadHistory(rd io.Reader, fn func(*ledger.Entry) error) error {
	br := bufio.NewReader(rd)
	head := make([]byte, len(historyMagic))
	if _, err := io.ReadFull(br, head); err != nil || string(head) != historyMagic {
		return fmt.Errorf("replica: not an exported ledger history (want it to start %q)", strings.TrimSpace(historyMagic))
	}
	var batch [][]byte
	at := 0
	flush := func() error {
		es, errs := ledger.DecodeBatch(batch)
		for i, e := range es {
			if e == nil {
				return fmt.Errorf("replica: exported entry %d: %w", at+i, errs[i])
			}
			if err := fn(e); err != nil {
				return err
			}
		}
		at += len(batch)
		batch = batch[:0]
		return nil
	}
	for {
		k, err := binary.ReadUvarint(br)
		if errors.Is(err, io.EOF) {
			return flush()
		}
		if err != nil || k == 0 || k > ledger.MaxEntrySize {
			return fmt.Errorf("replica: exported entry %d: length %d: %v", at+len(batch), k, err)
		}
		raw := make([]byte, k)
		if _, err := io.ReadFull(br, raw); err != nil {
			return fmt.Errorf("replica: exported entry %d: %w", at+len(batch), err)
		}
		if batch = append(batch, raw); len(batch) == 1024 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
}
