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

// prunedSource serves a fixed offer naming pruned entries.
type prunedSource struct {
	pruned [][]byte
	clocks []uint64
}

func (prunedSource) SyncOrg() string { return "org" }

func (s prunedSource) CheckpointOffer() ([]byte, int, []byte, [][]byte, [][]byte, [][]byte, []uint64, bool) {
	return []byte("entry"), 3, []byte("state"), [][]byte{[]byte("below")}, [][]byte{[]byte("tail")}, s.pruned, s.clocks, true
}

// TestCheckpointProtocolCarriesPruned: the CIDs and clocks of the entries
// a server pruned below its checkpoint reach the client whole, over more
// than one frame, beside the entries below it.
func TestCheckpointProtocolCarriesPruned(t *testing.T) {
	src := prunedSource{}
	for i := range p2p.SyncBatch + 10 {
		src.pruned = append(src.pruned, []byte{byte(i), byte(i >> 8)})
		src.clocks = append(src.clocks, uint64(i+1))
	}
	h1, h2 := loopbackPair(t)
	p2p.ServeCheckpoints(h1, src)
	o, err := p2p.FetchCheckpoint(context.Background(), h2, h1.ID(), "org")
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Below) != 1 || len(o.Tail) != 1 || len(o.Pruned) != len(src.pruned) || len(o.PrunedClock) != len(src.clocks) {
		t.Fatalf("offer: %d below, %d after, %d pruned, %d clocks", len(o.Below), len(o.Tail), len(o.Pruned), len(o.PrunedClock))
	}
	for i := range o.Pruned {
		if string(o.Pruned[i]) != string(src.pruned[i]) || o.PrunedClock[i] != src.clocks[i] {
			t.Fatalf("pruned entry %d: %x at %d, want %x at %d", i, o.Pruned[i], o.PrunedClock[i], src.pruned[i], src.clocks[i])
		}
	}
}
