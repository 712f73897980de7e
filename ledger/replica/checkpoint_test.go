package replica

import (
	"context"
	"errors"
	"testing"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/store"
)

// TestJoinAtCheckpoint: a new replica starts from a peer's newest
// checkpoint and the entries after it, reaches the peer's State with a
// fraction of its entries, opens again at the same place, and follows new
// entries; a forged State is refused and leaves the replica empty.
func TestJoinAtCheckpoint(t *testing.T) {
	ctx := context.Background()
	owner := newSigner(t)
	src := open(t, t.TempDir(), owner, Config{})
	org := genesis(t, src)
	if _, ok := src.offer(); ok {
		t.Fatal("an offer without a checkpoint")
	}
	writeN(t, src, 50)
	if _, err := src.WriteCheckpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := src.WriteCheckpoint(ctx); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("a second checkpoint with nothing after the first: %v", err)
	}
	writeN(t, src, 30)
	if _, err := src.WriteCheckpoint(ctx); err != nil {
		t.Fatal(err)
	}
	writeN(t, src, 5)
	o, ok := src.offer()
	if !ok || o.Depth != 2 || len(o.Tail) != 5 {
		t.Fatalf("offer: ok %v depth %d tail %d", ok, o.Depth, len(o.Tail))
	}

	// A forged State is refused.
	dir := t.TempDir()
	s2 := newSigner(t)
	j := open(t, dir, s2, Config{})
	bad := o
	st, err := ledger.DecodeState(o.State)
	if err != nil {
		t.Fatal(err)
	}
	st.Name = "forged"
	if bad.State, err = ledger.EncodeState(st); err != nil {
		t.Fatal(err)
	}
	if err := j.JoinAt(org, bad); err == nil || j.Len() != 0 {
		t.Fatalf("forged state: %v, %d entries", err, j.Len())
	}
	if err := j.JoinAt("another", o); err == nil {
		t.Fatal("joined another org's checkpoint")
	}

	if err := j.JoinAt(org, o); err != nil {
		t.Fatal(err)
	}
	if j.StateHash() != src.StateHash() || j.Len() >= src.Len()/4 {
		t.Fatalf("joined: %d entries of %d, same state %v", j.Len(), src.Len(), j.StateHash() == src.StateHash())
	}
	if err := j.JoinAt(org, o); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("a second join: %v", err)
	}
	// New entries on both sides reach each other through ordinary sync.
	e := writeN(t, src, 1)[0]
	if err := j.Import([]*ledger.Entry{e}); err != nil {
		t.Fatal(err)
	}
	if j.StateHash() != src.StateHash() {
		t.Fatal("after a new entry: another state")
	}
	hash, n := j.StateHash(), j.Len()
	j.Close()
	j.st.Close()

	// Open starts again at the checkpoint.
	stt, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stt.Close()
	j2, err := Open(stt, s2, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	if j2.StateHash() != hash || j2.Len() != n {
		t.Fatalf("reopened: %d entries (want %d), same state %v", j2.Len(), n, j2.StateHash() == hash)
	}
}
