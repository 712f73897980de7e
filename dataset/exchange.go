package dataset

import (
	"context"
	"fmt"

	"github.com/ipfs/boxo/bitswap"
	bsnet "github.com/ipfs/boxo/bitswap/network/bsnet"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
)

// ProtocolPrefix puts cshare's bitswap apart from the public IPFS network's:
// the protocols are /cshare/ipfs/bitswap/...
const ProtocolPrefix = "/cshare"

// Allow says whether peer p may be sent block c.
type Allow func(p peer.ID, c cid.Cid) bool

// Exchange fetches and serves dataset blocks with bitswap over a libp2p
// host. It serves a block only when allow says so, and stores a received
// block only after checking it against its CID.
type Exchange struct {
	bs    *bitswap.Bitswap
	store *Blockstore
	h     host.Host
}

// verifying stores a block only if its bytes hash to its CID.
type verifying struct{ *Blockstore }

func check(b blocks.Block) error {
	c, err := b.Cid().Prefix().Sum(b.RawData())
	if err != nil {
		return fmt.Errorf("dataset: block %s: %w", b.Cid(), err)
	}
	if !c.Equals(b.Cid()) {
		return fmt.Errorf("dataset: block %s: its bytes hash to %s", b.Cid(), c)
	}
	return nil
}

func (v verifying) Put(ctx context.Context, b blocks.Block) error {
	if err := check(b); err != nil {
		return err
	}
	return v.Blockstore.Put(ctx, b)
}

func (v verifying) PutMany(ctx context.Context, bs []blocks.Block) error {
	for _, b := range bs {
		if err := check(b); err != nil {
			return err
		}
	}
	return v.Blockstore.PutMany(ctx, bs)
}

// NewExchange starts bitswap on h over bs. ctx bounds its life (or Close).
func NewExchange(ctx context.Context, h host.Host, bs *Blockstore, allow Allow) *Exchange {
	vb := verifying{bs}
	net := bsnet.NewFromIpfsHost(h, bsnet.Prefix(ProtocolPrefix))
	b := bitswap.New(ctx, net, nil, vb,
		bitswap.WithPeerBlockRequestFilter(func(p peer.ID, c cid.Cid) bool { return allow(p, c) }),
		bitswap.SetSendDontHaves(true),
		bitswap.MaxOutstandingBytesPerPeer(32<<20),
		bitswap.WithTargetMessageSize(1<<20),
		bitswap.EngineBlockstoreWorkerCount(32),
		bitswap.TaskWorkerCount(8),
	)
	ServeBlocks(h, bs, allow)
	return &Exchange{bs: b, store: bs, h: h}
}

// Close stops bitswap.
func (x *Exchange) Close() error { return x.bs.Close() }

// Fetch fetches every block under root that is not stored, layer by layer
// (a dag-pb node's children are known once it is stored), from whichever
// connected peers have them: with the blocks protocol (BlocksProtocol), and
// with bitswap when that brings nothing. Received blocks are checked against their CIDs
// and stored in batches (one synced write for many blocks). progress, when
// not nil, is called with the blocks stored and the blocks known so far.
func (x *Exchange) Fetch(ctx context.Context, root cid.Cid, progress func(have, known int)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sess := x.bs.NewSession(ctx)
	for {
		missing, have, err := Missing(ctx, x.store, root)
		if err != nil {
			return err
		}
		known := have + len(missing)
		if progress != nil {
			progress(have, known)
		}
		if len(missing) == 0 {
			return nil
		}
		// The blocks protocol first, from every connected peer; bitswap
		// for what it did not bring.
		n, _ := x.streamFetch(ctx, x.h.Network().Peers(), missing, func(k int) {
			if progress != nil {
				progress(have+k, known)
			}
		})
		if n > 0 {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		ch, err := sess.GetBlocks(ctx, missing)
		if err != nil {
			return err
		}
		got := 0
		var batch []blocks.Block
		size := 0
		flush := func() error {
			if len(batch) == 0 {
				return nil
			}
			for _, b := range batch {
				if err := check(b); err != nil {
					return err
				}
			}
			if err := x.store.PutMany(ctx, batch); err != nil {
				return err
			}
			if err := x.bs.NotifyNewBlocks(ctx, batch...); err != nil {
				return err
			}
			got += len(batch)
			if progress != nil {
				progress(have+got, known)
			}
			batch, size = batch[:0], 0
			return nil
		}
	recv:
		for {
			var b blocks.Block
			var ok bool
			select {
			case b, ok = <-ch:
			default:
				// Nothing waiting: store what came so far, then block.
				if err := flush(); err != nil {
					return err
				}
				b, ok = <-ch
			}
			if !ok {
				break recv
			}
			batch = append(batch, b)
			if size += len(b.RawData()); size >= 16<<20 {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		if err := flush(); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if got == 0 {
			return fmt.Errorf("dataset: no peer sent any of the %d missing blocks of %s", len(missing), root)
		}
	}
}
