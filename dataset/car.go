package dataset

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/cshare/cshare/ledger/store"
	"github.com/ipfs/go-cid"
	carv2 "github.com/ipld/go-car/v2"
	"github.com/ipld/go-car/v2/storage"
)

// ErrCAR says a CAR file is malformed or not a dataset.
var ErrCAR = errors.New("dataset: bad CAR")

// ExportCAR writes the DAG under root to w as a CARv1 whose only root is
// root, blocks parents first (as ipfs dag export orders them). Every block
// must be stored. It returns the number of blocks written.
func ExportCAR(ctx context.Context, bs *Blockstore, root cid.Cid, w io.Writer) (int, error) {
	car, err := storage.NewWritable(w, []cid.Cid{root}, carv2.WriteAsCarV1(true))
	if err != nil {
		return 0, fmt.Errorf("dataset: CAR: %w", err)
	}
	n := 0
	err = Walk(ctx, bs, root, func(c cid.Cid, stored bool) error {
		if !stored {
			return fmt.Errorf("%w: %s", ErrMissing, c)
		}
		data, err := bs.s.DataBlock(c)
		if err != nil {
			return err
		}
		n++
		return car.Put(ctx, c.KeyString(), data)
	})
	if err != nil {
		return n, err
	}
	return n, car.Finalize()
}

// maxCARSection bounds one block of an imported CAR (bitswap's own limit
// is 2 MiB; the importer's chunks are 256 KiB).
const maxCARSection = 4 << 20

// ImportCAR reads a CAR (v1 or v2) with exactly one root, checks every block
// against its CID, stores the blocks, and returns the root with its size and
// block count once every block under it is stored and the DAG passes Check
// (its sizes are the bytes its blocks hold, its entries plain names). A CAR
// refused leaves its blocks stored, unreferenced, for the collector.
func ImportCAR(ctx context.Context, bs *Blockstore, r io.Reader) (Result, error) {
	br, err := carv2.NewBlockReader(r, carv2.MaxAllowedSectionSize(maxCARSection))
	if err != nil {
		return Result{}, fmt.Errorf("%w: %v", ErrCAR, err)
	}
	if len(br.Roots) != 1 {
		return Result{}, fmt.Errorf("%w: %d roots; allowed: exactly one (a dataset's root)", ErrCAR, len(br.Roots))
	}
	root := br.Roots[0]
	if root.Version() != 1 || (root.Type() != cid.DagProtobuf && root.Type() != cid.Raw) {
		return Result{}, fmt.Errorf("%w: root %s is not a CIDv1 of dag-pb or raw (a UnixFS DAG)", ErrCAR, root)
	}
	var batch []store.Block
	var batchBytes int
	flush := func() error {
		if _, err := bs.s.PutDataBlocks(batch, nil); err != nil {
			return err
		}
		batch, batchBytes = batch[:0], 0
		return nil
	}
	for {
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		b, err := br.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Result{}, fmt.Errorf("%w: %v", ErrCAR, err)
		}
		if err := check(b); err != nil {
			return Result{}, fmt.Errorf("%w: %v", ErrCAR, err)
		}
		batch = append(batch, store.Block{CID: b.Cid(), Data: b.RawData()})
		batchBytes += len(b.RawData())
		if batchBytes >= 16<<20 {
			if err := flush(); err != nil {
				return Result{}, err
			}
		}
	}
	if err := flush(); err != nil {
		return Result{}, err
	}
	n, err := CountBlocks(ctx, bs, root)
	if err != nil {
		return Result{}, fmt.Errorf("%w: the CAR does not hold every block of its root: %v", ErrCAR, err)
	}
	st, err := Check(ctx, bs, root)
	if err != nil {
		if ctx.Err() != nil {
			return Result{}, err
		}
		return Result{}, fmt.Errorf("%w: %v", ErrCAR, strings.TrimPrefix(err.Error(), ErrDAG.Error()+": "))
	}
	return Result{CID: root, Size: st.Size, Blocks: n}, nil
}
