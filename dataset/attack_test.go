package dataset

// Attacks on the dataset stream protocols, each asserting no effect: a
// request larger than the protocol allows is not served (the store and the
// access check are not consulted).

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

func TestOversizedDatasetRequests(t *testing.T) {
	var asked atomic.Int64
	count := func(peer.ID, cid.Cid) bool { asked.Add(1); return true }
	srv, cl := newHost(t), newHost(t)
	ServeBlocks(srv, openStore(t), count)
	ServeHave(srv, count)
	connect(t, cl, srv)
	c := cid.NewCidV1(cid.Raw, make([]byte, 34)) // not a valid multihash: never read if over the cap
	one := c.Bytes()

	// have: a CID longer than maxCIDBytes.
	have := append(bytes.Repeat([]byte{1}, maxCIDBytes+1), one...)
	// blocks: more CIDs than maxBlocksPerRequest, and one CID too long.
	var many, long bytes.Buffer
	many.Write(binary.AppendUvarint(nil, maxBlocksPerRequest+1))
	for range maxBlocksPerRequest + 1 {
		many.Write(binary.AppendUvarint(nil, uint64(len(one))))
		many.Write(one)
	}
	long.Write(binary.AppendUvarint(nil, 1))
	long.Write(binary.AppendUvarint(nil, maxCIDBytes+1))
	long.Write(bytes.Repeat([]byte{1}, maxCIDBytes+1))
	for _, x := range []struct {
		proto protocol.ID
		req   []byte
		want  []byte // the answer: none, or have's "no"
	}{
		{HaveProtocol, have, []byte{0}},
		{BlocksProtocol, many.Bytes(), nil},
		{BlocksProtocol, long.Bytes(), nil},
	} {
		got := rawAsk(t, cl, srv.ID(), x.proto, x.req)
		if !bytes.Equal(got, x.want) {
			t.Errorf("%s: an oversized request of %d bytes was answered %x, want %x", x.proto, len(x.req), got, x.want)
		}
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("oversized requests reached the access check %d times", n)
	}
}

// rawAsk sends req on a new stream of proto, closes its write side and
// reads the answer until the stream ends.
func rawAsk(t *testing.T, h host.Host, p peer.ID, proto protocol.ID, req []byte) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := h.NewStream(ctx, p, proto)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_ = s.SetDeadline(time.Now().Add(20 * time.Second))
	_, _ = s.Write(req) // the server may reset before it is all sent
	_ = s.CloseWrite()
	got, _ := io.ReadAll(s)
	return got
}
