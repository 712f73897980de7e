package p2p

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// SyncProtocol is the block-exchange stream protocol of the ledger: a peer
// asks for the entries reachable back from some CIDs and gets them in batches,
// ancestors first, in as few round trips as the DAG allows; or it pushes its
// heads so the other side fetches from it. Only the org's machines, joiners
// that proved a key (AdmitProtocol) and removed or rejected machines (up to
// the entry that put them out: SyncHorizon) are served (gate.go); anyone
// else's stream is reset before it is read.
const SyncProtocol = protocol.ID("/cshare/sync/1.0.0")

// Sync limits.
const (
	SyncBatch    = 2048     // blocks per response frame
	maxFrameSize = 16 << 20 // bytes per response frame
	// maxSyncRequest caps a request frame: 4096 wanted CIDs of at most 64
	// bytes each, and the rest of the request.
	maxSyncRequest = 4096*66 + 1024
	syncTimeout    = 2 * time.Minute
)

// SyncSource is the node's side of the protocol: it answers from its ledger.
type SyncSource interface {
	// SyncOrg is the org the node's ledger belongs to ("" before it has one).
	SyncOrg() string
	// Collect returns the raw entries reachable back from want (the heads
	// when want is empty), including want, skipping those with clock <=
	// floor, in the total order (ancestors first), at most limit of them.
	Collect(want []cid.Cid, floor uint64, limit int) [][]byte
	// Announced is called when a peer pushes its heads.
	Announced(from peer.ID, heads []cid.Cid)
}

// SyncHorizon is optionally implemented by a SyncSource. A peer with a
// horizon (a removed or rejected machine: see gate.go) is served only the
// entry that put it out and that entry's ancestors, with its heads
// answered as that entry, and may not announce: it learns that it is out,
// and nothing written since.
type SyncHorizon interface {
	// Horizon is p's last entry; out is false for a peer without one,
	// true with an undefined CID for one that gets nothing.
	Horizon(p peer.ID) (last cid.Cid, out bool)
	// CollectUpTo is Collect cut to last and its ancestors (want empty:
	// from last).
	CollectUpTo(last cid.Cid, want []cid.Cid, floor uint64, limit int) [][]byte
}

// errFormer answers a former machine's sync request that may not be served.
const errFormer = "this machine is no longer in the org"

type syncReq struct {
	Op    string   `cbor:"op"` // "get" | "announce"
	Org   string   `cbor:"org"`
	Want  [][]byte `cbor:"want,omitempty"`
	Floor uint64   `cbor:"floor,omitempty"`
	Limit int      `cbor:"limit,omitempty"`
}

type syncResp struct {
	Blocks [][]byte `cbor:"blocks,omitempty"`
	Done   bool     `cbor:"done,omitempty"`
	Err    string   `cbor:"err,omitempty"`
}

var syncDec, _ = cbor.DecOptions{MaxArrayElements: 1 << 20}.DecMode()

func writeSyncFrame(w *bufio.Writer, v any) error {
	b, err := cbor.Marshal(v)
	if err != nil {
		return err
	}
	var hdr [binary.MaxVarintLen64]byte
	n := binary.PutUvarint(hdr[:], uint64(len(b)))
	if _, err := w.Write(hdr[:n]); err != nil {
		return err
	}
	if _, err := w.Write(b); err != nil {
		return err
	}
	return w.Flush()
}

func readSyncFrame(r *bufio.Reader, v any) error { return readSyncFrameMax(r, maxFrameSize, v) }

// readSyncFrameMax reads one frame of at most max bytes into v; a longer
// one is refused before anything is allocated.
func readSyncFrameMax(r *bufio.Reader, max uint64, v any) error {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return err
	}
	if n > max {
		return fmt.Errorf("%w: sync frame of %d bytes exceeds %d", ErrTooLarge, n, max)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return err
	}
	return syncDec.Unmarshal(b, v)
}

func toCIDs(bs [][]byte) ([]cid.Cid, error) {
	out := make([]cid.Cid, 0, len(bs))
	for _, b := range bs {
		c, err := cid.Cast(b)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

func fromCIDs(cs []cid.Cid) [][]byte {
	out := make([][]byte, len(cs))
	for i, c := range cs {
		out[i] = c.Bytes()
	}
	return out
}

// ServeSync registers the sync protocol handler on h.
func ServeSync(h host.Host, src SyncSource) {
	h.SetStreamHandler(SyncProtocol, func(s network.Stream) {
		defer s.Close()
		_ = s.SetDeadline(time.Now().Add(syncTimeout))
		r, w := bufio.NewReader(s), bufio.NewWriter(s)
		var req syncReq
		if err := readSyncFrameMax(r, maxSyncRequest, &req); err != nil {
			_ = s.Reset()
			return
		}
		org := src.SyncOrg()
		if org == "" || req.Org != org {
			_ = writeSyncFrame(w, syncResp{Err: "not a node of org " + req.Org, Done: true})
			return
		}
		want, err := toCIDs(req.Want)
		if err != nil || len(want) > 4096 {
			_ = writeSyncFrame(w, syncResp{Err: "bad want list", Done: true})
			return
		}
		last, out := cid.Undef, false
		if hz, ok := src.(SyncHorizon); ok {
			last, out = hz.Horizon(s.Conn().RemotePeer())
		}
		if out && (req.Op != "get" || !last.Defined()) {
			_ = writeSyncFrame(w, syncResp{Err: errFormer, Done: true})
			return
		}
		if isCapped(src, s.Conn().RemotePeer()) {
			_ = writeSyncFrame(w, syncResp{Err: errCapped, Done: true}) // cap.go
			return
		}
		switch req.Op {
		case "announce":
			src.Announced(s.Conn().RemotePeer(), want)
			_ = writeSyncFrame(w, syncResp{Done: true})
		case "get":
			limit := req.Limit
			if limit <= 0 || limit > 1<<20 {
				limit = 1 << 20
			}
			var blocks [][]byte
			if out {
				blocks = src.(SyncHorizon).CollectUpTo(last, want, req.Floor, limit)
			} else {
				blocks = src.Collect(want, req.Floor, limit)
			}
			for len(blocks) > 0 {
				n := min(len(blocks), SyncBatch)
				if err := writeSyncFrame(w, syncResp{Blocks: blocks[:n]}); err != nil {
					return
				}
				blocks = blocks[n:]
			}
			_ = writeSyncFrame(w, syncResp{Done: true})
		default:
			_ = writeSyncFrame(w, syncResp{Err: "unknown op " + req.Op, Done: true})
		}
	})
}

// ErrSyncRefused says the peer refused the request.
var ErrSyncRefused = errors.New("p2p: sync refused")

// FetchBlocks asks peer p for the entries reachable back from want (its heads
// when want is empty) above floor, and calls fn with each batch as it arrives.
func FetchBlocks(ctx context.Context, h host.Host, p peer.ID, org string, want []cid.Cid, floor uint64, fn func([][]byte) error) error {
	return syncCall(ctx, h, p, syncReq{Op: "get", Org: org, Want: fromCIDs(want), Floor: floor}, fn)
}

// AnnounceHeads pushes our heads to peer p directly (used by a joining node,
// whose gossip is not yet accepted).
func AnnounceHeads(ctx context.Context, h host.Host, p peer.ID, org string, heads []cid.Cid) error {
	return syncCall(ctx, h, p, syncReq{Op: "announce", Org: org, Want: fromCIDs(heads)}, nil)
}

// serveOneShot registers a protocol of one request frame of at most max
// bytes and one answer frame: answer gets the request's bytes and the
// remote peer (authenticated by the connection) and returns what to send.
// A request that cannot be read resets the stream.
func serveOneShot(h host.Host, proto protocol.ID, timeout time.Duration, max int, answer func(req []byte, from peer.ID) any) {
	h.SetStreamHandler(proto, func(s network.Stream) {
		defer s.Close()
		_ = s.SetDeadline(time.Now().Add(timeout))
		r, w := bufio.NewReader(s), bufio.NewWriter(s)
		b, err := hbReadFrame(r, max)
		if err != nil {
			_ = s.Reset()
			return
		}
		_ = writeSyncFrame(w, answer(b, s.Conn().RemotePeer()))
	})
}

// request opens a stream of protocol proto to p, whose deadline is ctx's or
// timeout from now, and sends req as one frame.
func request(ctx context.Context, h host.Host, p peer.ID, proto protocol.ID, timeout time.Duration, req any) (network.Stream, *bufio.Reader, error) {
	s, err := h.NewStream(network.WithAllowLimitedConn(ctx, string(proto)), p, proto)
	if err != nil {
		return nil, nil, fmt.Errorf("p2p: open %s stream to %s: %w", proto, p, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(dl)
	} else {
		_ = s.SetDeadline(time.Now().Add(timeout))
	}
	if err := writeSyncFrame(bufio.NewWriter(s), req); err != nil {
		_ = s.Reset()
		return nil, nil, fmt.Errorf("p2p: %s request: %w", proto, err)
	}
	return s, bufio.NewReader(s), nil
}

func syncCall(ctx context.Context, h host.Host, p peer.ID, req syncReq, fn func([][]byte) error) error {
	s, r, err := request(ctx, h, p, SyncProtocol, syncTimeout, req)
	if err != nil {
		return err
	}
	defer s.Close()
	for {
		var resp syncResp
		if err := readSyncFrame(r, &resp); err != nil {
			_ = s.Reset()
			return fmt.Errorf("p2p: sync response from %s: %w", p, err)
		}
		if resp.Err != "" {
			return fmt.Errorf("%w: %s", ErrSyncRefused, resp.Err)
		}
		if len(resp.Blocks) > 0 && fn != nil {
			if err := fn(resp.Blocks); err != nil {
				_ = s.Reset()
				return err
			}
		}
		if resp.Done {
			return nil
		}
	}
}
