package replica

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/store"
)

func newSigner(t testing.TB) *ledger.Signer {
	t.Helper()
	k, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ledger.NewSigner(k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// drops counts Config.Dropped calls by reason.
type drops struct {
	mu sync.Mutex
	n  map[string]int
}

func (d *drops) add(reason string, k int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.n == nil {
		d.n = map[string]int{}
	}
	d.n[reason] += k
}

func (d *drops) get(reason string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n[reason]
}

// open opens a replica over a Badger store in dir, both closed at the end of
// the test (the replica first).
func open(t testing.TB, dir string, s *ledger.Signer, cfg Config) *Replica {
	t.Helper()
	st, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Open(st, s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.Close()
		_ = st.Close()
	})
	return r
}

// syncBatch is the blocks per answer frame of p2p's sync protocol
// (p2p.SyncBatch), and errSyncRefused its refusal (p2p.ErrSyncRefused): the
// replica does not import p2p (p2p imports ledger).
const syncBatch = 2048

var errSyncRefused = errors.New("sync refused")

// serve is a Fetch that answers from src's Collect in frames, as
// p2p.ServeSync does.
func serve(src *Replica) FetchFunc {
	return func(ctx context.Context, p peer.ID, org string, want []cid.Cid, floor uint64, fn func([][]byte) error) error {
		if src.SyncOrg() != org {
			return errSyncRefused
		}
		blocks := src.Collect(want, floor, 1<<20)
		for len(blocks) > 0 {
			k := min(len(blocks), syncBatch)
			if err := fn(blocks[:k]); err != nil {
				return err
			}
			blocks = blocks[k:]
		}
		return ctx.Err()
	}
}

func genesis(t testing.TB, r *Replica) string {
	t.Helper()
	g, err := r.Write(context.Background(), ledger.KindGenesis, ledger.Genesis{Name: "acme", OrgKeyID: "k0", Settings: ledger.DefaultSettings()})
	if err != nil {
		t.Fatal(err)
	}
	return g.CID().String()
}

// writeN writes n effective entries (org key rotations).
func writeN(t testing.TB, r *Replica, n int) []*ledger.Entry {
	t.Helper()
	var es []*ledger.Entry
	for i := 0; i < n; i++ {
		e, err := r.Write(context.Background(), ledger.KindOrgKey, ledger.OrgKey{KeyID: fmt.Sprintf("k%d-%d", r.Len(), i)})
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		es = append(es, e)
	}
	return es
}

func TestWriteSurvivesReopen(t *testing.T) {
	dir, s := t.TempDir(), newSigner(t)
	st, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	var added int
	r, err := Open(st, s, Config{OnAdded: func(es []*ledger.Entry) { added += len(es) }})
	if err != nil {
		t.Fatal(err)
	}
	org := genesis(t, r)
	last := writeN(t, r, 5)[4]
	hash, n := r.StateHash(), r.Len()
	if n != 6 || added != 6 {
		t.Fatalf("len %d, OnAdded saw %d; want 6", n, added)
	}
	// The fold's verdict comes back as the error, and the entry stays.
	e, err := r.Write(context.Background(), ledger.KindMachineApprove, ledger.MachineRef{Machine: "nobody"})
	if err == nil || e == nil || !r.Has(e.CID()) {
		t.Fatalf("an approval of an unknown machine: entry %v, err %v", e, err)
	}
	hash2 := r.StateHash()
	r.Close()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	r2 := open(t, dir, s, Config{})
	if r2.Org() != org || r2.Len() != n+1 || r2.StateHash() != hash2 || !r2.Has(last.CID()) {
		t.Fatalf("reopened: org %q len %d hash %.8s; want %q %d %.8s", r2.Org(), r2.Len(), r2.StateHash(), org, n+1, hash2)
	}
	if hash == "" || r2.Get(last.CID()) == nil {
		t.Fatal("no state hash or entry")
	}
	if r2.LastAdded().IsZero() {
		t.Fatal("LastAdded is zero after Open")
	}
}

func TestCatchUpAndSync(t *testing.T) {
	ctx := context.Background()
	owner := newSigner(t)
	a := open(t, t.TempDir(), owner, Config{})
	org := genesis(t, a)
	writeN(t, a, 300)

	// b is another machine of the same person (so its writes take effect).
	var d drops
	b := open(t, t.TempDir(), owner, Config{Fetch: serve(a), Dropped: d.add})
	if p, at := b.LastSync(); p != "" || !at.IsZero() {
		t.Fatalf("LastSync before any sync: %q %v", p, at)
	}
	if err := b.CatchUp(ctx, "a", org); err != nil {
		t.Fatal(err)
	}
	if b.Len() != a.Len() || b.StateHash() != a.StateHash() || b.Org() != org {
		t.Fatalf("after catch-up: %d entries %.8s; want %d %.8s", b.Len(), b.StateHash(), a.Len(), a.StateHash())
	}
	if p, at := b.LastSync(); p != "a" || at.IsZero() {
		t.Fatalf("LastSync after catch-up: %q %v", p, at)
	}

	// Concurrent branches: both write, each syncs the other's heads.
	writeN(t, a, 40)
	writeN(t, b, 30)
	a.cfg.Fetch = serve(b)
	ha, _ := a.Heads()
	hb, _ := b.Heads()
	b.SyncFrom("a", ha)
	a.SyncFrom("b", hb)
	if a.Len() != 371 || b.Len() != a.Len() || a.StateHash() != b.StateHash() {
		t.Fatalf("after merge: a %d %.8s, b %d %.8s", a.Len(), a.StateHash(), b.Len(), b.StateHash())
	}
	if d.get(DropBadBlock) != 0 || d.get(DropInvalid) != 0 {
		t.Fatalf("drops: %v", d.n)
	}
	// Nothing missing: a sync that completes still counts.
	_, before := b.LastSync()
	if err := b.CatchUp(ctx, "a", org); err != nil {
		t.Fatal(err)
	}
	if _, at := b.LastSync(); at.Before(before) {
		t.Fatal("LastSync not updated by an empty sync")
	}
}

func TestPushedEntriesWaitForParents(t *testing.T) {
	a := open(t, t.TempDir(), newSigner(t), Config{})
	org := genesis(t, a)
	b := open(t, t.TempDir(), newSigner(t), Config{Fetch: serve(a)})
	if err := b.CatchUp(context.Background(), "a", org); err != nil {
		t.Fatal(err)
	}
	// From now on b cannot fetch: only what is pushed reaches it.
	var fetches sync.WaitGroup
	b.cfg.Fetch = func(context.Context, peer.ID, string, []cid.Cid, uint64, func([][]byte) error) error {
		return errors.New("offline")
	}
	b.cfg.Spawn = func(fn func()) { fetches.Add(1); go func() { defer fetches.Done(); fn() }() }
	var pushes [][]byte
	a.cfg.Publish = func(_ context.Context, payload []byte) error {
		pushes = append(pushes, payload)
		return nil
	}
	es := writeN(t, a, 2)
	if len(pushes) != 2 {
		t.Fatalf("%d announcements for 2 writes", len(pushes))
	}
	var msg headsMsg
	if err := cbor.Unmarshal(pushes[1], &msg); err != nil || len(msg.Entries) != 1 {
		t.Fatalf("announcement: %v, %d entries pushed", err, len(msg.Entries))
	}

	var hooked []bool
	b.cfg.HeadsHook = func(pushed int, before bool) { hooked = append(hooked, before) }
	b.OnHeads("a", pushes[1]) // the child first: it waits
	fetches.Wait()
	if b.Has(es[1].CID()) {
		t.Fatal("a pushed entry was folded before its parent")
	}
	b.OnHeads("a", pushes[0])
	fetches.Wait()
	if !b.Has(es[0].CID()) || !b.Has(es[1].CID()) || b.StateHash() != a.StateHash() {
		t.Fatalf("after the parent: has %v %v, hash %.8s want %.8s", b.Has(es[0].CID()), b.Has(es[1].CID()), b.StateHash(), a.StateHash())
	}
	if len(hooked) != 4 || !hooked[0] || hooked[1] {
		t.Fatalf("HeadsHook calls: %v", hooked)
	}
	// Both are durable: b's store has them.
	if !b.st.HasBlock(es[0].CID()) || !b.st.HasBlock(es[1].CID()) {
		t.Fatal("pushed entries not stored")
	}
}

func TestBadInputDropped(t *testing.T) {
	a := open(t, t.TempDir(), newSigner(t), Config{})
	org := genesis(t, a)
	writeN(t, a, 3)
	good := a.Collect(nil, 0, 100)
	forged := append([]byte(nil), good[len(good)-1]...)
	forged[len(forged)-1] ^= 1 // in the signature
	forgedCID := ledger.CIDOf(forged)

	var d drops
	b := open(t, t.TempDir(), newSigner(t), Config{Dropped: d.add,
		Fetch: func(_ context.Context, _ peer.ID, _ string, _ []cid.Cid, _ uint64, fn func([][]byte) error) error {
			return fn(append(append([][]byte(nil), good...), forged))
		}})
	if err := b.CatchUp(context.Background(), "a", org); err != nil {
		t.Fatal(err)
	}
	if d.get(DropBadBlock) != 1 || b.Has(forgedCID) || b.Len() != a.Len() {
		t.Fatalf("bad_block %d, forged kept %v, len %d want %d", d.get(DropBadBlock), b.Has(forgedCID), b.Len(), a.Len())
	}
	b.OnHeads("a", []byte("not cbor"))
	if d.get(DropBadHeads) != 1 {
		t.Fatalf("bad_heads %d", d.get(DropBadHeads))
	}
	// A forged entry pushed in an announcement.
	payload, _ := cbor.Marshal(headsMsg{Entries: [][]byte{forged}})
	b.OnHeads("a", payload)
	if d.get(DropBadBlock) != 2 || b.Has(forgedCID) {
		t.Fatalf("pushed forgery: bad_block %d, kept %v", d.get(DropBadBlock), b.Has(forgedCID))
	}
}

func TestMembership(t *testing.T) {
	a := open(t, t.TempDir(), newSigner(t), Config{})
	genesis(t, a)
	heads, _ := a.Heads()
	if !a.HasHeads([]string{heads[0].String(), "garbage"}) {
		t.Fatal("HasHeads of own head")
	}
	other := newSigner(t)
	if a.IsMachine(other.ID()) || a.IsApproved(other.ID()) {
		t.Fatal("a stranger is a machine")
	}
	e, err := other.Sign(a.Org(), ledger.KindMerge, ledger.Merge{}, heads, 1, time.Now().UnixMilli())
	if err != nil {
		t.Fatal(err)
	}
	if a.HasHeads([]string{e.CID().String()}) {
		t.Fatal("HasHeads of an unknown entry")
	}
	payload, _ := cbor.Marshal(headsMsg{Heads: [][]byte{e.CID().Bytes()}})
	if a.HasHeadsPayload(payload) || !a.HasHeadsPayload([]byte("x")) {
		t.Fatal("HasHeadsPayload")
	}
}

// TestCollectUpTo: a peer served up to an entry (a removed machine, up to
// its removal) gets that entry and its ancestors, never what came after,
// even when it names a later entry.
func TestCollectUpTo(t *testing.T) {
	a := open(t, t.TempDir(), newSigner(t), Config{})
	genesis(t, a)
	es := writeN(t, a, 4)
	last, later := es[1].CID(), es[3].CID()
	got := map[string]bool{}
	for _, b := range a.CollectUpTo(last, nil, 0, 100) {
		got[ledger.CIDOf(b).String()] = true
	}
	if len(got) != 3 || !got[last.String()] || got[es[2].CID().String()] || got[later.String()] {
		t.Fatalf("up to entry 1 of 4 (and the genesis): %d entries %v", len(got), got)
	}
	if b := a.CollectUpTo(last, []cid.Cid{later}, 0, 100); len(b) != 0 {
		t.Fatalf("a later entry asked for: %d entries served", len(b))
	}
	if b := a.CollectUpTo(last, []cid.Cid{es[0].CID(), later}, 0, 100); len(b) != 2 {
		t.Fatalf("an ancestor and a later entry asked for: %d entries served, want the ancestor and the genesis", len(b))
	}
	if _, out := a.Horizon(newSigner(t).ID()); out {
		t.Fatal("a stranger has a horizon")
	}
}

// TestSlowReaderDelaysNoFold: a reader inside View, blocked there until
// the writes end, delays no fold: the writes complete while it still
// reads, it keeps reading the State it was given (a snapshot, unchanged),
// and the next reader sees the writes.
func TestSlowReaderDelaysNoFold(t *testing.T) {
	r := open(t, t.TempDir(), newSigner(t), Config{})
	genesis(t, r)
	writeN(t, r, 1)
	before := r.Snapshot()
	key0 := before.State.OrgKeyID

	inside, release, readerDone := make(chan struct{}), make(chan struct{}), make(chan string)
	go func() {
		var seen string
		r.View(func(st *ledger.State) {
			close(inside)
			<-release // a slow handler: it reads on after the writes below
			seen = st.OrgKeyID
		})
		readerDone <- seen
	}()
	<-inside

	written := make(chan []*ledger.Entry)
	go func() {
		var es []*ledger.Entry
		for i := 0; i < 5; i++ {
			e, err := r.Write(context.Background(), ledger.KindOrgKey, ledger.OrgKey{KeyID: fmt.Sprintf("slow-%d", i)})
			if err != nil {
				t.Errorf("write %d: %v", i, err)
			}
			es = append(es, e)
		}
		written <- es
	}()
	// Not a timed assertion: the bound only turns a deadlock (a fold
	// waiting on the reader, which waits on the fold) into a failure.
	select {
	case <-written:
	case <-time.After(time.Minute):
		close(release)
		t.Fatal("the writes did not complete while a reader was inside View")
	}
	if got := r.Snapshot().State.OrgKeyID; got != "slow-4" {
		t.Fatalf("after the writes the snapshot's org key is %q, want slow-4", got)
	}
	close(release)
	if seen := <-readerDone; seen != key0 {
		t.Fatalf("the slow reader's State changed under it: org key %q, it was %q", seen, key0)
	}
	if before.State.OrgKeyID != key0 || before.Len+5 != r.Len() {
		t.Fatalf("an earlier snapshot changed: key %q (was %q), %d entries, now %d", before.State.OrgKeyID, key0, before.Len, r.Len())
	}
}
