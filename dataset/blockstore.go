package dataset

import (
	"context"
	"errors"
	"fmt"

	"github.com/cshare/cshare/ledger/store"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
)

// Blockstore is boxo's blockstore interface over the dataset namespace of
// the node's store. Put verifies nothing (the importer made the block, or
// bitswap verified it against its CID before handing it over).
type Blockstore struct {
	s *store.Store
}

// NewBlockstore wraps s.
func NewBlockstore(s *store.Store) *Blockstore { return &Blockstore{s: s} }

// Store is the store beneath.
func (b *Blockstore) Store() *store.Store { return b.s }

// DeleteBlock removes a block.
func (b *Blockstore) DeleteBlock(_ context.Context, c cid.Cid) error {
	return b.s.DeleteDataBlocks([]cid.Cid{c})
}

// Has reports whether a block is stored.
func (b *Blockstore) Has(_ context.Context, c cid.Cid) (bool, error) {
	return b.s.HasDataBlock(c), nil
}

// Get returns a block, or ipld.ErrNotFound.
func (b *Blockstore) Get(_ context.Context, c cid.Cid) (blocks.Block, error) {
	data, err := b.s.DataBlock(c)
	if errors.Is(err, store.ErrNotFound) {
		return nil, ipld.ErrNotFound{Cid: c}
	}
	if err != nil {
		return nil, err
	}
	return blocks.NewBlockWithCid(data, c)
}

// GetSize returns a block's size, or ipld.ErrNotFound.
func (b *Blockstore) GetSize(_ context.Context, c cid.Cid) (int, error) {
	n, err := b.s.DataBlockSize(c)
	if errors.Is(err, store.ErrNotFound) {
		return -1, ipld.ErrNotFound{Cid: c}
	}
	return n, err
}

// Put stores a block.
func (b *Blockstore) Put(ctx context.Context, blk blocks.Block) error {
	return b.PutMany(ctx, []blocks.Block{blk})
}

// PutMany stores blocks in few transactions; stored ones are skipped.
func (b *Blockstore) PutMany(_ context.Context, bs []blocks.Block) error {
	in := make([]store.Block, len(bs))
	for i, blk := range bs {
		in[i] = store.Block{CID: blk.Cid(), Data: blk.RawData()}
	}
	_, err := b.s.PutDataBlocks(in, nil)
	return err
}

// AllKeysChan lists every stored block's CID.
func (b *Blockstore) AllKeysChan(ctx context.Context) (<-chan cid.Cid, error) {
	var all []cid.Cid
	if err := b.s.ForEachDataCID(func(c cid.Cid) error {
		all = append(all, c)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("dataset: list blocks: %w", err)
	}
	ch := make(chan cid.Cid)
	go func() {
		defer close(ch)
		for _, c := range all {
			select {
			case ch <- c:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch, nil
}
