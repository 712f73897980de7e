package replica

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"

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
// naming a pruned parent links; a fresh replica still joins at the
// checkpoint.
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

	// A lagging writer's entry on a pruned parent links (by the clock
	// pruning kept) and sorts after the start.
	p := old[4]
	late, err := owner.Sign(org, ledger.KindOrgKey, ledger.OrgKey{KeyID: "late"}, []cid.Cid{p.CID()}, p.Clock, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Import([]*ledger.Entry{late}); err != nil || !r.Has(late.CID()) || d.get(DropPruned) != 0 {
		t.Fatalf("an entry on a pruned parent: err %v, added %v, %d refused", err, r.Has(late.CID()), d.get(DropPruned))
	}
	if r.Get(p.CID()) != nil {
		t.Fatal("Get returned a pruned entry")
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

// TestPrunedParentLinks: two replicas of one org, both compacted, one
// pruned and one not. Entries a lagging writer signs on parents below the
// pruned horizon link on both (the pruned one by the CID and clock it
// kept), so both reach one state and one count; that holds after the
// pruned one compacts again and opens again, through sync either way,
// and on a node joining at its checkpoint; its export holds no pruned
// entry.
func TestPrunedParentLinks(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	owner := newSigner(t)
	da, db := &drops{}, &drops{}
	var a *Replica
	fromA := func(ctx context.Context, p peer.ID, org string, want []cid.Cid, floor uint64, fn func([][]byte) error) error {
		return serve(a)(ctx, p, org, want, floor, fn)
	}
	adir := t.TempDir()
	a = open(t, adir, owner, Config{Now: clock.Now, Dropped: da.add})
	b := open(t, t.TempDir(), newSigner(t), Config{Now: clock.Now, Fetch: fromA, Dropped: db.add})
	org := genesis(t, a)
	retain := int64(time.Hour / time.Millisecond)
	if _, err := a.Write(ctx, ledger.KindOrgUpdate, ledger.OrgUpdate{LedgerRetainMS: &retain}); err != nil {
		t.Fatal(err)
	}
	old := renameN(t, a, 20)
	for range 3 {
		if _, err := a.WriteCheckpoint(ctx); err != nil {
			t.Fatal(err)
		}
		clock.add(2 * time.Hour)
		renameN(t, a, 5)
	}
	if err := b.CatchUp(ctx, "", org); err != nil || b.StateHash() != a.StateHash() {
		t.Fatalf("catch-up: %v", err)
	}
	for _, r := range []*Replica{a, b} {
		for _, d := range []int{1, 2} {
			if err := r.CompactTo(d); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n, err := a.Prune(); err != nil || n < len(old) {
		t.Fatalf("pruned %d entries, want at least %d: %v", n, len(old), err)
	}
	if a.st.HasBlock(old[4].CID()) || !b.st.HasBlock(old[4].CID()) {
		t.Fatal("pruned on the wrong replica")
	}
	same := func(when string) {
		t.Helper()
		if a.StateHash() != b.StateHash() || a.Len() != b.Len() {
			t.Fatalf("%s: %d and %d entries, same state %v", when, a.Len(), b.Len(), a.StateHash() == b.StateHash())
		}
		if k := da.get(DropPruned) + db.get(DropPruned); k != 0 {
			t.Fatalf("%s: %d entries refused", when, k)
		}
	}
	lateOn := func(p *ledger.Entry, id string) *ledger.Entry {
		t.Helper()
		e, err := owner.Sign(org, ledger.KindOrgKey, ledger.OrgKey{KeyID: id}, []cid.Cid{p.CID()}, p.Clock, 1)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}

	// Delivered to both: it links and takes effect on both alike.
	late := lateOn(old[4], "late")
	for _, r := range []*Replica{a, b} {
		if err := r.Import([]*ledger.Entry{late}); err != nil || !r.Has(late.CID()) {
			t.Fatalf("import on a parent below the pruned horizon: %v", err)
		}
	}
	same("after the late entry")
	effective := func(r *Replica, c cid.Cid) bool {
		l, done := r.ReadLog()
		defer done()
		return l.Effective(c)
	}
	if !effective(a, late.CID()) || !effective(b, late.CID()) {
		t.Fatal("the late entry does not take effect on both replicas")
	}
	if !a.Has(old[4].CID()) || a.Get(old[4].CID()) != nil {
		t.Fatal("a pruned parent, linked: Has must report it and Get must not return it")
	}

	// Compacted again past the late entry's parent, then opened again:
	// the pruned parent links each time from what the store kept.
	for _, r := range []*Replica{a, b} {
		if err := r.CompactTo(3); err != nil {
			t.Fatal(err)
		}
	}
	same("compacted again")
	a.Close()
	_ = a.st.Close()
	a = open(t, adir, owner, Config{Now: clock.Now, Fetch: serve(b), Dropped: da.add})
	same("opened again")
	late2 := lateOn(old[5], "late2")
	for _, r := range []*Replica{a, b} {
		if err := r.Import([]*ledger.Entry{late2}); err != nil || !r.Has(late2.CID()) {
			t.Fatalf("import after opening again: %v", err)
		}
	}
	same("a late entry after opening again")

	// Sync both ways, with late entries only one side has.
	renameN(t, a, 2)
	if err := b.CatchUp(ctx, "", org); err != nil {
		t.Fatal(err)
	}
	same("b synced from a")
	late3 := lateOn(old[6], "late3")
	if err := b.Import([]*ledger.Entry{late3}); err != nil {
		t.Fatal(err)
	}
	if err := a.CatchUp(ctx, "", org); err != nil || !a.Has(late3.CID()) {
		t.Fatalf("a synced from b: %v", err)
	}
	same("a synced from b")

	// A node joining at the pruned one's checkpoint is sent the stubs
	// (CIDs and clocks) and links the late entries too, also once opened
	// again; it counts what a node joining at the other counts (the
	// entries below the checkpoint it starts with count, as on every
	// joiner).
	ob, ok := b.offer()
	if !ok {
		t.Fatal("no offer from the replica that did not prune")
	}
	jb := open(t, t.TempDir(), newSigner(t), Config{})
	if err := jb.JoinAt(org, ob); err != nil || jb.StateHash() != b.StateHash() {
		t.Fatalf("join at the other replica's checkpoint: %v", err)
	}
	o, ok := a.offer()
	if !ok || len(o.Pruned) == 0 {
		t.Fatalf("offer: %v, %d pruned parents named", ok, len(o.Pruned))
	}
	jdir := t.TempDir()
	j := open(t, jdir, newSigner(t), Config{})
	if err := j.JoinAt(org, o); err != nil || j.StateHash() != a.StateHash() || j.Len() != jb.Len() || !j.Has(late3.CID()) {
		t.Fatalf("join at the pruned replica's checkpoint: %v; %d entries (want %d)", err, j.Len(), jb.Len())
	}
	j.Close()
	_ = j.st.Close()
	if j = open(t, jdir, newSigner(t), Config{}); j.StateHash() != a.StateHash() || j.Len() != jb.Len() {
		t.Fatalf("the joiner opened again: %d entries (want %d)", j.Len(), jb.Len())
	}

	// The export holds the late entries and no pruned one.
	var buf bytes.Buffer
	wrote, err := a.ExportHistory(&buf)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	if err := ReadHistory(bytes.NewReader(buf.Bytes()), func(e *ledger.Entry) error { got[e.CID().KeyString()] = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != wrote || !got[late.CID().KeyString()] || !got[late3.CID().KeyString()] {
		t.Fatalf("export: wrote %d, read %d distinct, late entries in it: %v %v", wrote, len(got), got[late.CID().KeyString()], got[late3.CID().KeyString()])
	}
	for _, e := range old {
		if got[e.CID().KeyString()] {
			t.Fatalf("export holds pruned entry %s", e.CID())
		}
	}
}
