package replica

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/cshare/cshare/ledger"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// renameN writes n org.update entries (kinds pruning does not keep).
func renameN(t *testing.T, r *Replica, n int) []*ledger.Entry {
	t.Helper()
	var es []*ledger.Entry
	for i := range n {
		name := fmt.Sprintf("acme-%d-%d", r.Len(), i)
		e, err := r.Write(context.Background(), ledger.KindOrgUpdate, ledger.OrgUpdate{Name: &name})
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
	}
	return es
}

// TestPruneAndExport: with ledger.retain set, Prune deletes the entries
// below a barrier older than retain (by the checkpoints' times), keeps the
// authority entries, and leaves the state as it was; the export holds
// what is left and reads back with every signature checked; an entry
// naming a pruned parent is refused with that reason; a fresh replica
// still joins at the checkpoint.
func TestPruneAndExport(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	owner := newSigner(t)
	d := &drops{}
	dir := t.TempDir()
	r := open(t, dir, owner, Config{Now: clock.Now, Dropped: d.add})
	org := genesis(t, r)
	retain := int64(time.Hour / time.Millisecond)
	if _, err := r.Write(ctx, ledger.KindOrgUpdate, ledger.OrgUpdate{LedgerRetainMS: &retain}); err != nil {
		t.Fatal(err)
	}
	old := renameN(t, r, 20)
	keys := writeN(t, r, 2)
	if _, err := r.WriteCheckpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := r.Prune(); err != nil || n != 0 {
		t.Fatalf("pruned %d before any compaction: %v", n, err)
	}
	clock.add(2 * time.Hour)
	mid := renameN(t, r, 20)
	if _, err := r.WriteCheckpoint(ctx); err != nil {
		t.Fatal(err)
	}
	renameN(t, r, 5)
	// A late entry on a parent of the first round: the Log names that
	// parent below its start, so pruning keeps it.
	lp := old[2]
	lateOld, err := owner.Sign(org, ledger.KindOrgKey, ledger.OrgKey{KeyID: "late-old"}, []cid.Cid{lp.CID()}, lp.Clock, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Import([]*ledger.Entry{lateOld}); err != nil {
		t.Fatal(err)
	}
	for _, dd := range []int{1, 2} {
		if err := r.CompactTo(dd); err != nil {
			t.Fatal(err)
		}
	}
	hash := r.StateHash()
	n, err := r.Prune()
	if err != nil || n != len(old) { // the retain update too, not old[2]
		t.Fatalf("pruned %d entries, want %d: %v", n, len(old), err)
	}
	if !r.st.HasBlock(lp.CID()) {
		t.Fatal("pruned a parent the Log names below its start")
	}
	if r.st.HasBlock(old[3].CID()) || !r.st.HasBlock(keys[0].CID()) || !r.st.HasBlock(mid[3].CID()) {
		t.Fatal("pruned the wrong entries")
	}
	if g, _ := cid.Decode(org); !r.st.HasBlock(g) {
		t.Fatal("pruned the genesis")
	}
	if r.StateHash() != hash {
		t.Fatal("pruning changed the state")
	}
	if n, _ := r.Prune(); n != 0 {
		t.Fatalf("pruned %d more the second time", n)
	}

	var buf bytes.Buffer
	wrote, err := r.ExportHistory(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var got []*ledger.Entry
	if err := ReadHistory(bytes.NewReader(buf.Bytes()), func(e *ledger.Entry) error { got = append(got, e); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != wrote || wrote < r.Len()+len(mid) {
		t.Fatalf("export: wrote %d, read %d; the log holds %d", wrote, len(got), r.Len())
	}
	bad := bytes.Clone(buf.Bytes())
	bad[len(bad)-10] ^= 1
	if err := ReadHistory(bytes.NewReader(bad), func(*ledger.Entry) error { return nil }); err == nil {
		t.Fatal("a damaged export read back")
	}
	if err := ReadHistory(bytes.NewReader([]byte("hello")), func(*ledger.Entry) error { return nil }); err == nil {
		t.Fatal("read something that is no export")
	}

	// A lagging writer's entry on a pruned parent is refused.
	p := old[4]
	late, err := owner.Sign(org, ledger.KindOrgKey, ledger.OrgKey{KeyID: "late"}, []cid.Cid{p.CID()}, p.Clock, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Import([]*ledger.Entry{late}); err != nil || r.Has(late.CID()) || d.get(DropPruned) != 1 {
		t.Fatalf("an entry on a pruned parent: err %v, added %v, %d refused", err, r.Has(late.CID()), d.get(DropPruned))
	}

	// A fresh replica joins at the checkpoint.
	o, ok := r.offer()
	if !ok {
		t.Fatal("no offer")
	}
	j := open(t, t.TempDir(), newSigner(t), Config{})
	if err := j.JoinAt(org, o); err != nil || j.StateHash() != r.StateHash() {
		t.Fatalf("join after pruning: %v", err)
	}

	// Opened again after pruning: the same state.
	hash = r.StateHash()
	r.Close()
	_ = r.st.Close()
	again := open(t, dir, owner, Config{Now: clock.Now})
	if again.StateHash() != hash || !again.Has(lateOld.CID()) {
		t.Fatal("reopened after pruning: another state")
	}
}
