package dataset

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	yamux "github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	quic "github.com/libp2p/go-libp2p/p2p/transport/quic"
	tcp "github.com/libp2p/go-libp2p/p2p/transport/tcp"

	"github.com/cshare/cshare/p2p"
)

func newHost(tb testing.TB) host.Host {
	tb.Helper()
	// The node's transports, security, muxer and dial ranker (p2p.New):
	// TCP and QUIC, TLS then Noise, yamux, TCP first.
	h, err := libp2p.New(
		libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1"),
		libp2p.Transport(tcp.NewTCPTransport),
		libp2p.Transport(quic.NewTransport),
		p2p.Security(),
		libp2p.Muxer(yamux.ID, yamux.DefaultTransport),
		libp2p.SwarmOpts(swarm.WithDialRanker(p2p.TCPFirst)),
		libp2p.DisableRelay(),
	)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { h.Close() })
	return h
}

func connect(tb testing.TB, a, b host.Host) {
	tb.Helper()
	if err := a.Connect(context.Background(), peer.AddrInfo{ID: b.ID(), Addrs: b.Addrs()}); err != nil {
		tb.Fatal(err)
	}
}

type node struct {
	h  host.Host
	bs *Blockstore
	x  *Exchange
}

func newNode(tb testing.TB, allow Allow) *node {
	tb.Helper()
	n := &node{h: newHost(tb), bs: openStore(tb)}
	ctx, cancel := context.WithCancel(context.Background())
	n.x = NewExchange(ctx, n.h, n.bs, allow)
	tb.Cleanup(func() { n.x.Close(); cancel() })
	return n
}

func all(peer.ID, cid.Cid) bool { return true }

func TestExchangeFetch(t *testing.T) {
	dir := t.TempDir()
	if err := writeGolden(dir, "tree"); err != nil {
		t.Fatal(err)
	}
	if err := stream(filepath.Join(dir, "tree", "big.bin"), "big", 3*ChunkSize+11); err != nil {
		t.Fatal(err)
	}
	seed := newNode(t, all)
	res, err := Import(context.Background(), seed.bs, filepath.Join(dir, "tree"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	fetcher := newNode(t, all)
	connect(t, fetcher.h, seed.h)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var last [2]int
	if err := fetcher.x.Fetch(ctx, res.CID, func(have, known int) { last = [2]int{have, known} }); err != nil {
		t.Fatal(err)
	}
	if last[0] != res.Blocks || last[1] != res.Blocks {
		t.Fatalf("progress ended at %v, want %d of %d", last, res.Blocks, res.Blocks)
	}
	out := filepath.Join(t.TempDir(), "out")
	if err := WriteOut(ctx, fetcher.bs, res.CID, out); err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"a/b/c.txt", "a/x.bin", "big.bin", "unicode"} {
		want, werr := os.ReadFile(filepath.Join(dir, "tree", rel))
		got, gerr := os.ReadFile(filepath.Join(out, rel))
		if (werr == nil) != (gerr == nil) || !bytes.Equal(want, got) {
			t.Fatalf("%s differs after the round trip (%v, %v)", rel, werr, gerr)
		}
	}
	if _, err := os.Stat(filepath.Join(out, ".hidden")); err == nil {
		t.Fatal("a hidden file was imported")
	}
}

// A peer the seeder does not allow gets nothing.
func TestExchangeRefuses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	data := make([]byte, 100)
	rand.Read(data)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	seed := newNode(t, func(peer.ID, cid.Cid) bool { return false })
	res, err := Import(context.Background(), seed.bs, path, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	fetcher := newNode(t, all)
	connect(t, fetcher.h, seed.h)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := fetcher.x.Fetch(ctx, res.CID, nil); err == nil {
		t.Fatal("fetched from a seeder that refuses")
	}
	if fetcher.bs.s.HasDataBlock(res.CID) {
		t.Fatal("refused block stored")
	}
}

func TestVerifyingRefusesBadBlock(t *testing.T) {
	bs := openStore(t)
	good, _ := cidBuilder.Sum([]byte("x"))
	blk, err := newBlockUnchecked([]byte("y"), good)
	if err != nil {
		t.Fatal(err)
	}
	if err := (verifying{bs}).Put(context.Background(), blk); err == nil {
		t.Fatal("stored a block whose bytes do not hash to its CID")
	}
}

func newBlockUnchecked(data []byte, c cid.Cid) (blocks.Block, error) {
	return blocks.NewBlockWithCid(data, c)
}

// A seeder without the blocks protocol is fetched from with bitswap.
func TestExchangeBitswapFallback(t *testing.T) {
	dir := t.TempDir()
	if err := stream(filepath.Join(dir, "f"), "fallback", 5*ChunkSize+3); err != nil {
		t.Fatal(err)
	}
	seed := newNode(t, all)
	seed.h.RemoveStreamHandler(BlocksProtocol)
	res, err := Import(context.Background(), seed.bs, filepath.Join(dir, "f"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	fetcher := newNode(t, all)
	connect(t, fetcher.h, seed.h)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := fetcher.x.Fetch(ctx, res.CID, nil); err != nil {
		t.Fatal(err)
	}
	if ok, err := Complete(ctx, fetcher.bs, res.CID); !ok || err != nil {
		t.Fatalf("incomplete after fetch (%v)", err)
	}
}

// The blocks protocol serves every block asked for, in order, an empty one
// (an empty file's raw leaf) and a large one included, and says "not
// served" for one it does not hold.
func TestBlocksProtocolAnswers(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "empty"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := stream(filepath.Join(dir, "big"), "big", 3*ChunkSize+5); err != nil {
		t.Fatal(err)
	}
	seed := newNode(t, all)
	ctx := context.Background()
	empty, err := Import(ctx, seed.bs, filepath.Join(dir, "empty"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	big, err := Import(ctx, seed.bs, filepath.Join(dir, "big"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var want []cid.Cid
	if err := Walk(ctx, seed.bs, big.CID, func(c cid.Cid, _ bool) error { want = append(want, c); return nil }); err != nil {
		t.Fatal(err)
	}
	absent, _ := cidBuilder.WithCodec(cid.Raw).Sum([]byte("not stored"))
	ask := append([]cid.Cid{empty.CID, absent}, want...)
	fetcher := newNode(t, all)
	connect(t, fetcher.h, seed.h)
	var got []cid.Cid
	if err := askBlocks(ctx, fetcher.h, seed.h.ID(), ask, func(b blocks.Block) error {
		got = append(got, b.Cid())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if w := append([]cid.Cid{empty.CID}, want...); !slices.Equal(got, w) {
		t.Fatalf("got %v, want %v", got, w)
	}
}
