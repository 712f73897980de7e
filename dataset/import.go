package dataset

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cshare/cshare/ledger/store"
	"github.com/ipfs/boxo/blockservice"
	"github.com/ipfs/boxo/ipld/merkledag"
	"github.com/ipfs/boxo/ipld/unixfs"
	"github.com/ipfs/boxo/ipld/unixfs/importer/balanced"
	ihelper "github.com/ipfs/boxo/ipld/unixfs/importer/helpers"
	uio "github.com/ipfs/boxo/ipld/unixfs/io"
	"github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
	"github.com/multiformats/go-multihash"
)

// ChunkSize is kubo's default fixed chunk size (size-262144).
const ChunkSize = 256 << 10

// cidBuilder is kubo's builder for --cid-version 1: CIDv1, sha2-256.
var cidBuilder = cid.V1Builder{Codec: cid.DagProtobuf, MhType: multihash.SHA2_256}

// Result is what an import made.
type Result struct {
	CID cid.Cid
	// Size is the bytes of file content imported.
	Size int64
	// Blocks is the number of distinct blocks of the DAG.
	Blocks int
}

// DAGService is an offline DAG service over bs.
func DAGService(bs *Blockstore) ipld.DAGService {
	return merkledag.NewDAGService(blockservice.New(bs, nil))
}

// ErrPath says the path to import is missing, unreadable or of a kind that
// cannot be imported.
var ErrPath = errors.New("dataset: bad path")

// Import imports the file or directory at path into bs and returns its root.
// Hidden entries (names starting with ".") inside a directory are left out,
// as `ipfs add -r` does. Symlinks are stored as UnixFS symlinks. progress,
// when not nil, is called with the bytes of content read so far. An import
// that fails leaves only blocks behind, which a later import reuses; with
// pin they are pinned (store.Pin), so the collector keeps them meanwhile.
func Import(ctx context.Context, bs *Blockstore, path string, pin *store.Pin, progress func(done int64)) (Result, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return Result{}, fmt.Errorf("%w: path %q: %v", ErrPath, path, unwrapPathErr(err))
	}
	pool := newChunkPool()
	dag, err := newBlockWriter(ctx, bs, pin, pool)
	if err != nil {
		return Result{}, err
	}
	defer dag.stop()
	im := &importer{ctx: ctx, dag: dag, pool: pool, progress: progress}
	nd, err := im.node(path, fi)
	if err != nil {
		return Result{}, err
	}
	if err := dag.Commit(); err != nil {
		return Result{}, fmt.Errorf("dataset: store blocks: %w", err)
	}
	n, err := CountBlocks(ctx, bs, nd.Cid())
	if err != nil {
		return Result{}, err
	}
	return Result{CID: nd.Cid(), Size: im.done, Blocks: n}, nil
}

func unwrapPathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

type importer struct {
	ctx      context.Context
	dag      *blockWriter
	pool     *chunkPool
	progress func(int64)
	done     int64
}

func (im *importer) node(path string, fi os.FileInfo) (ipld.Node, error) {
	if err := im.ctx.Err(); err != nil {
		return nil, err
	}
	switch m := fi.Mode(); {
	case m.IsRegular():
		return im.file(path)
	case m.IsDir():
		return im.dir(path)
	case m&os.ModeSymlink != 0:
		target, err := os.Readlink(path)
		if err != nil {
			return nil, fmt.Errorf("%w: path %q: %v", ErrPath, path, unwrapPathErr(err))
		}
		data, err := unixfs.SymlinkData(target)
		if err != nil {
			return nil, err
		}
		nd := merkledag.NodeWithData(data)
		if err := nd.SetCidBuilder(cidBuilder); err != nil {
			return nil, err
		}
		if err := im.dag.Add(im.ctx, nd); err != nil {
			return nil, err
		}
		return nd, nil
	default:
		return nil, fmt.Errorf("%w: path %q is %s; allowed: a regular file, directory or symlink", ErrPath, path, KindOf(m))
	}
}

// countingSplitter reports the bytes of content the layout has taken.
type countingSplitter struct {
	*hashingSplitter
	im   *importer
	base int64
}

func (c countingSplitter) NextBytes() ([]byte, error) {
	b, err := c.hashingSplitter.NextBytes()
	if len(b) > 0 {
		c.im.done = c.base + c.hashingSplitter.done
		if c.im.progress != nil {
			c.im.progress(c.im.done)
		}
	}
	return b, err
}

func (im *importer) file(path string) (ipld.Node, error) {
	f, err := OpenRegular(path) // swapped for a pipe since Lstat: refused, not waited on
	if err != nil {
		return nil, err
	}
	defer f.Close()
	spl := newHashingSplitter(f, im.pool)
	defer spl.close()
	params := ihelper.DagBuilderParams{
		Dagserv:    im.dag,
		Maxlinks:   ihelper.DefaultLinksPerBlock,
		RawLeaves:  true,
		CidBuilder: fileBuilder{spl},
	}
	db, err := params.New(countingSplitter{hashingSplitter: spl, im: im, base: im.done})
	if err != nil {
		return nil, err
	}
	nd, err := balanced.Layout(db)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("%w: path %q: %v", ErrPath, path, pe.Err)
		}
		return nil, fmt.Errorf("dataset: import %q: %w", path, err)
	}
	return nd, nil
}

func (im *importer) dir(path string) (ipld.Node, error) {
	ents, err := os.ReadDir(path) // sorted by name
	if err != nil {
		return nil, fmt.Errorf("%w: path %q: %v", ErrPath, path, unwrapPathErr(err))
	}
	d, err := uio.NewDirectory(im.dag, uio.WithCidBuilder(cidBuilder))
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		p := filepath.Join(path, e.Name())
		fi, err := os.Lstat(p)
		if err != nil {
			return nil, fmt.Errorf("%w: path %q: %v", ErrPath, p, unwrapPathErr(err))
		}
		child, err := im.node(p, fi)
		if err != nil {
			return nil, err
		}
		if err := d.AddChild(im.ctx, e.Name(), child); err != nil {
			return nil, fmt.Errorf("dataset: directory %q: %w", path, err)
		}
	}
	nd, err := d.GetNode()
	if err != nil {
		return nil, err
	}
	if err := im.dag.Add(im.ctx, nd); err != nil {
		return nil, err
	}
	return nd, nil
}
