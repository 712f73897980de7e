package dataset

import (
	"context"
	"fmt"
	"os"

	"github.com/ipfs/boxo/files"
	unixfile "github.com/ipfs/boxo/ipld/unixfs/file"
	"github.com/ipfs/go-cid"
)

// WriteOut writes the DAG under root to out, which must not exist: a file
// DAG becomes the file out, a directory DAG the directory out. Every block
// must be stored.
func WriteOut(ctx context.Context, bs *Blockstore, root cid.Cid, out string) error {
	if _, err := os.Lstat(out); err == nil {
		return fmt.Errorf("dataset: out %q exists; name a path that does not", out)
	}
	dag := DAGService(bs)
	nd, err := dag.Get(ctx, root)
	if err != nil {
		return fmt.Errorf("dataset: %s: %w", root, err)
	}
	f, err := unixfile.NewUnixfsFile(ctx, dag, nd)
	if err != nil {
		return fmt.Errorf("dataset: %s: %w", root, err)
	}
	defer f.Close()
	if err := files.WriteTo(f, out); err != nil {
		return fmt.Errorf("dataset: write %q: %w", out, err)
	}
	return nil
}
