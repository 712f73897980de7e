package dataset

import (
	"context"
	"errors"
	"fmt"

	"github.com/cshare/cshare/ledger/store"
	"github.com/ipfs/boxo/ipld/merkledag"
	"github.com/ipfs/go-cid"
)

// ErrMissing says a block of a DAG is not stored here.
var ErrMissing = errors.New("dataset: block not stored")

// Walk calls fn once for every distinct block of the DAG under root, parents
// before children, with whether the block is stored here. It reads stored
// dag-pb nodes to find their links; a dag-pb node that is not stored hides its
// children.
func Walk(ctx context.Context, bs *Blockstore, root cid.Cid, fn func(c cid.Cid, stored bool) error) error {
	seen := map[cid.Cid]bool{}
	stack := []cid.Cid{root}
	for len(stack) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		c := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[c] {
			continue
		}
		seen[c] = true
		switch c.Type() {
		case cid.Raw:
			if err := fn(c, bs.s.HasDataBlock(c)); err != nil {
				return err
			}
			continue
		case cid.DagProtobuf:
		default:
			return fmt.Errorf("dataset: block %s has codec %#x, not dag-pb or raw", c, c.Type())
		}
		data, err := bs.s.DataBlock(c)
		if errors.Is(err, store.ErrNotFound) {
			if err := fn(c, false); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		if err := fn(c, true); err != nil {
			return err
		}
		nd, err := merkledag.DecodeProtobuf(data)
		if err != nil {
			return fmt.Errorf("dataset: block %s: %w", c, err)
		}
		links := nd.Links()
		for i := len(links) - 1; i >= 0; i-- {
			stack = append(stack, links[i].Cid)
		}
	}
	return nil
}

// Missing returns the blocks under root that are not stored, as far as the
// stored dag-pb nodes tell (a missing dag-pb node hides its children), and
// how many blocks are known and stored.
func Missing(ctx context.Context, bs *Blockstore, root cid.Cid) (missing []cid.Cid, have int, err error) {
	err = Walk(ctx, bs, root, func(c cid.Cid, stored bool) error {
		if stored {
			have++
		} else {
			missing = append(missing, c)
		}
		return nil
	})
	return missing, have, err
}

// CountBlocks is the number of distinct blocks under root, all of which must
// be stored (else ErrMissing).
func CountBlocks(ctx context.Context, bs *Blockstore, root cid.Cid) (int, error) {
	missing, have, err := Missing(ctx, bs, root)
	if err != nil {
		return 0, err
	}
	if len(missing) > 0 {
		return 0, fmt.Errorf("%w: %s (%d missing)", ErrMissing, missing[0], len(missing))
	}
	return have, nil
}

// Complete reports whether every block under root is stored.
func Complete(ctx context.Context, bs *Blockstore, root cid.Cid) (bool, error) {
	missing, _, err := Missing(ctx, bs, root)
	return err == nil && len(missing) == 0, err
}
