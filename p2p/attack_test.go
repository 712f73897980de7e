package p2p

// Attacks on the stream protocols, each asserting no effect: a request
// larger than the protocol's cap is refused before it is read whole (the
// stream is reset, nothing is answered, the node's source is not asked).
// Strangers on these protocols belong to the closed-org tests.

import (
	"bufio"
	"context"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// countingSync is a SyncSource that counts what it is asked.
type countingSync struct{ asked atomic.Int64 }

func (s *countingSync) SyncOrg() string { return ptOrg }
func (s *countingSync) Collect([]cid.Cid, uint64, int) [][]byte {
	s.asked.Add(1)
	return nil
}
func (s *countingSync) Announced(peer.ID, []cid.Cid) { s.asked.Add(1) }

// TestOversizedRequestOnEveryProtocol sends each stream protocol of
// package p2p (sync, heartbeat, logs, witness, tombstone) a well-formed
// request one frame over its cap: without the cap each would be answered.
// The dataset protocols (have, blocks) are in dataset/attack_test.go.
func TestOversizedRequestOnEveryProtocol(t *testing.T) {
	server, client := ptHost(t, nil), ptHost(t, nil)
	m := newPtMembers(server.ID(), client.ID())
	if _, err := server.JoinOrg(ptOrg, m); err != nil {
		t.Fatal(err)
	}
	syncSrc := &countingSync{}
	ServeSync(server.LibP2P(), syncSrc)
	ServeLogs(server.LibP2P(), &ptLogs{org: ptOrg, approved: map[peer.ID]bool{client.ID(): true}, logs: map[string][]byte{}})
	ServeTombstones(server.LibP2P(), ptTombs{})
	ServeWitness(server.LibP2P(), &ptWitness{signer: ptSigner(t, ptKey(t)), approved: true})
	ptConnect(t, client, server)

	wantMany := make([][]byte, 4096)
	for i := range wantMany {
		wantMany[i] = make([]byte, 80) // not CIDs: a bad want list, if it were read
	}
	pad := func(n int) string { return strings.Repeat("x", n) }
	for _, c := range []struct {
		proto protocol.ID
		max   int
		req   any
	}{
		{SyncProtocol, maxSyncRequest, syncReq{Op: "get", Org: ptOrg, Want: wantMany}},
		{HeartbeatProtocol, maxRequestSize, hbRequest{Org: ptOrg + pad(maxRequestSize)}},
		{LogsProtocol, maxLogRequest, LogsRequest{Org: ptOrg, Job: pad(maxLogRequest), Item: 1}},
		{TombstoneProtocol, maxTombstoneRequest, tombstoneReq{Org: pad(maxTombstoneRequest)}},
		{WitnessProtocol, maxWitnessFrame, WitnessRequest{Org: pad(maxWitnessFrame)}},
	} {
		b, err := cbor.Marshal(c.req)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) <= c.max {
			t.Fatalf("%s: the request of %d bytes is not over the cap %d", c.proto, len(b), c.max)
		}
		got, err := rawExchange(client, server.ID(), c.proto, c.req)
		if len(got) != 0 {
			t.Errorf("%s: an oversized request (%d bytes, cap %d) was answered with %d bytes (%v)", c.proto, len(b), c.max, len(got), err)
		}
	}
	if n := syncSrc.asked.Load(); n != 0 {
		t.Errorf("the sync source was asked %d times by oversized requests", n)
	}
	// The cap is not the refusal: a request under it is answered.
	if got, err := rawExchange(client, server.ID(), SyncProtocol, syncReq{Op: "get", Org: ptOrg}); len(got) == 0 || syncSrc.asked.Load() != 1 {
		t.Errorf("a request under the cap: %d bytes answered (%v), source asked %d times", len(got), err, syncSrc.asked.Load())
	}
}

// rawExchange sends req as one frame on a new stream of proto and reads
// whatever comes back until the stream ends.
func rawExchange(h *Host, p peer.ID, proto protocol.ID, req any) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, r, err := request(ctx, h.LibP2P(), p, proto, 20*time.Second, req)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	_ = s.CloseWrite()
	return io.ReadAll(bufio.NewReader(r))
}
