package p2p

import (
	"bufio"
	"context"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// CheckpointProtocol serves a new node the newest checkpoint of the ledger
// (docs/design.md §5.6), beside SyncProtocol and gated like it: the
// checkpoint entry and its depth in the chain, the ancestors of it that
// later entries name, the State its hash names in chunks, and the entries
// after it. The client checks everything (ledger.NewLogAt): a peer can
// only waste its time.
//
// Wire (frames as in SyncProtocol): the client sends {"org"}; the server
// answers with frames {"part", "blocks", "data", "depth", "size", "err"}:
// one "head" (the checkpoint entry in blocks, its depth, the State's size),
// then "below" frames of blocks, "state" frames of data, "tail" frames of
// blocks, and "done"; or one frame with err.
const CheckpointProtocol = protocol.ID("/cshare/checkpoint/1.0.0")

// Checkpoint limits.
const (
	checkpointChunk   = 4 << 20 // State bytes per frame
	MaxCheckpointSize = 1 << 30 // the State a client accepts
	// MaxCheckpointBlocks caps the entries below and after the
	// checkpoint that a client accepts.
	MaxCheckpointBlocks = 1 << 21
	checkpointTimeout   = 5 * time.Minute
)

// CheckpointOffer is a checkpoint as served: raw entries and the State's
// canonical bytes.
type CheckpointOffer struct {
	Entry       []byte
	Depth       int
	State       []byte
	Below, Tail [][]byte
	// Pruned and PrunedClock: the CIDs and clocks of entries below the
	// checkpoint that later entries name and the server pruned (sent in
	// "below" frames; a client that predates them ignores them).
	Pruned      [][]byte
	PrunedClock []uint64
}

// CheckpointSource is the node's side of CheckpointProtocol.
type CheckpointSource interface {
	SyncOrg() string
	// CheckpointOffer is the newest checkpoint (CheckpointOffer's
	// fields); ok is false without one.
	CheckpointOffer() (entry []byte, depth int, state []byte, below, tail, pruned [][]byte, prunedClock []uint64, ok bool)
}

type ckReq struct {
	Org string `cbor:"org"`
}

// ckPruned is an entry the server pruned: its CID and clock.
type ckPruned struct {
	CID   []byte `cbor:"cid"`
	Clock uint64 `cbor:"clock"`
}

type ckResp struct {
	Part   string     `cbor:"part"`
	Blocks [][]byte   `cbor:"blocks,omitempty"`
	Pruned []ckPruned `cbor:"pruned,omitempty"`
	Data   []byte     `cbor:"data,omitempty"`
	Depth  int        `cbor:"depth,omitempty"`
	Size   int64      `cbor:"size,omitempty"`
	Err    string     `cbor:"err,omitempty"`
}

// ServeCheckpoints registers the checkpoint protocol handler on h. A
// former machine (SyncHorizon) is refused.
func ServeCheckpoints(h host.Host, src CheckpointSource) {
	h.SetStreamHandler(CheckpointProtocol, func(s network.Stream) {
		defer s.Close()
		_ = s.SetDeadline(time.Now().Add(checkpointTimeout))
		r, w := bufio.NewReader(s), bufio.NewWriter(s)
		var req ckReq
		if err := readSyncFrameMax(r, 1024, &req); err != nil {
			_ = s.Reset()
			return
		}
		org := src.SyncOrg()
		if org == "" || req.Org != org {
			_ = writeSyncFrame(w, ckResp{Err: "not a node of org " + req.Org})
			return
		}
		if hz, ok := src.(SyncHorizon); ok {
			if _, out := hz.Horizon(s.Conn().RemotePeer()); out {
				_ = writeSyncFrame(w, ckResp{Err: errFormer})
				return
			}
		}
		var o CheckpointOffer
		var ok bool
		o.Entry, o.Depth, o.State, o.Below, o.Tail, o.Pruned, o.PrunedClock, ok = src.CheckpointOffer()
		if !ok {
			_ = writeSyncFrame(w, ckResp{Err: "no checkpoint"})
			return
		}
		if writeSyncFrame(w, ckResp{Part: "head", Blocks: [][]byte{o.Entry}, Depth: o.Depth, Size: int64(len(o.State))}) != nil {
			return
		}
		blocks := func(part string, bs [][]byte) error {
			for len(bs) > 0 {
				n := min(len(bs), SyncBatch)
				if err := writeSyncFrame(w, ckResp{Part: part, Blocks: bs[:n]}); err != nil {
					return err
				}
				bs = bs[n:]
			}
			return nil
		}
		if blocks("below", o.Below) != nil {
			return
		}
		for ps, cs := o.Pruned, o.PrunedClock; len(ps) > 0 && len(ps) == len(cs); {
			n := min(len(ps), SyncBatch)
			f := ckResp{Part: "below", Pruned: make([]ckPruned, n)}
			for i := range n {
				f.Pruned[i] = ckPruned{CID: ps[i], Clock: cs[i]}
			}
			if writeSyncFrame(w, f) != nil {
				return
			}
			ps, cs = ps[n:], cs[n:]
		}
		for st := o.State; len(st) > 0; {
			n := min(len(st), checkpointChunk)
			if writeSyncFrame(w, ckResp{Part: "state", Data: st[:n]}) != nil {
				return
			}
			st = st[n:]
		}
		if blocks("tail", o.Tail) != nil {
			return
		}
		_ = writeSyncFrame(w, ckResp{Part: "done"})
	})
}

// FetchCheckpoint asks peer p for org's newest checkpoint.
func FetchCheckpoint(ctx context.Context, h host.Host, p peer.ID, org string) (CheckpointOffer, error) {
	var o CheckpointOffer
	s, r, err := request(ctx, h, p, CheckpointProtocol, checkpointTimeout, ckReq{Org: org})
	if err != nil {
		return o, err
	}
	defer s.Close()
	bad := func(format string, a ...any) (CheckpointOffer, error) {
		_ = s.Reset()
		return CheckpointOffer{}, fmt.Errorf("p2p: checkpoint from %s: "+format, append([]any{p}, a...)...)
	}
	var size int64
	stage := 0 // head, below, state, tail
	for {
		var resp ckResp
		if err := readSyncFrame(r, &resp); err != nil {
			return bad("%v", err)
		}
		if resp.Err != "" {
			return bad("%w: %s", ErrSyncRefused, resp.Err)
		}
		next := map[string]int{"head": 0, "below": 1, "state": 2, "tail": 3, "done": 4}[resp.Part]
		if resp.Part == "" || (resp.Part != "head" && next == 0) || next < stage || (stage == 0 && o.Entry == nil && resp.Part != "head") || (resp.Part == "head" && o.Entry != nil) {
			return bad("frame %q out of order", resp.Part)
		}
		stage = next
		switch resp.Part {
		case "head":
			if len(resp.Blocks) != 1 || resp.Size < 0 || resp.Size > MaxCheckpointSize || resp.Depth < 1 {
				return bad("bad head: %d blocks, state of %d bytes, depth %d", len(resp.Blocks), resp.Size, resp.Depth)
			}
			o.Entry, o.Depth, size = resp.Blocks[0], resp.Depth, resp.Size
			o.State = make([]byte, 0, size)
		case "below", "tail":
			if len(o.Below)+len(o.Tail)+len(o.Pruned)+len(resp.Blocks)+len(resp.Pruned) > MaxCheckpointBlocks {
				return bad("more than %d entries", MaxCheckpointBlocks)
			}
			if resp.Part == "below" {
				o.Below = append(o.Below, resp.Blocks...)
				for _, x := range resp.Pruned {
					o.Pruned, o.PrunedClock = append(o.Pruned, x.CID), append(o.PrunedClock, x.Clock)
				}
			} else {
				o.Tail = append(o.Tail, resp.Blocks...)
			}
		case "state":
			if int64(len(o.State))+int64(len(resp.Data)) > size {
				return bad("state larger than the %d bytes announced", size)
			}
			o.State = append(o.State, resp.Data...)
		case "done":
			if int64(len(o.State)) != size {
				return bad("state of %d bytes, %d announced", len(o.State), size)
			}
			return o, nil
		}
	}
}
