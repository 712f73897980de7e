package p2p_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/ledger/replica"
	"github.com/cshare/cshare/ledger/store"
	"github.com/cshare/cshare/p2p"
)

func loopbackPair(t *testing.T) (host.Host, host.Host) {
	t.Helper()
	var hs [2]host.Host
	for i := range hs {
		h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableRelay())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.Close() })
		hs[i] = h
	}
	if err := hs[1].Connect(context.Background(), peer.AddrInfo{ID: hs[0].ID(), Addrs: hs[0].Addrs()}); err != nil {
		t.Fatal(err)
	}
	return hs[0], hs[1]
}

// TestCheckpointProtocol: a node fetches a peer's newest checkpoint over
// the protocol (the ancestors below, the State, the 999 entries after it in
// frames) and starts there at the
// peer's state hash; a peer without a checkpoint, or of another org,
// refuses.
func TestCheckpointProtocol(t *testing.T) {
	ctx := context.Background()
	src, org := buildLedger(t, t.TempDir(), 3000, 1000)
	h1, h2 := loopbackPair(t)
	p2p.ServeCheckpoints(h1, src)
	o, err := p2p.FetchCheckpoint(ctx, h2, h1.ID(), org)
	if err != nil {
		t.Fatal(err)
	}
	if o.Depth != 2 || len(o.Tail) != 999 || len(o.Below) != 0 {
		t.Fatalf("offer: depth %d, %d below, %d after", o.Depth, len(o.Below), len(o.Tail))
	}
	st, err := store.Open(filepath.Join(t.TempDir(), "j"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	j, err := replica.Open(st, signer(t, 2), replica.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.Close)
	if err := j.JoinAt(org, replica.Offer(o)); err != nil {
		t.Fatal(err)
	}
	if j.StateHash() != src.StateHash() || j.Len() != 1000 {
		t.Fatalf("joined with %d entries, same state %v", j.Len(), j.StateHash() == src.StateHash())
	}
	if _, err := p2p.FetchCheckpoint(ctx, h2, h1.ID(), "another"); !errors.Is(err, p2p.ErrSyncRefused) {
		t.Fatalf("another org: %v", err)
	}
	empty, org2 := buildLedger(t, t.TempDir(), 10, 1000)
	h3, h4 := loopbackPair(t)
	p2p.ServeCheckpoints(h3, empty)
	if _, err := p2p.FetchCheckpoint(ctx, h4, h3.ID(), org2); !errors.Is(err, p2p.ErrSyncRefused) {
		t.Fatalf("no checkpoint: %v", err)
	}
}
