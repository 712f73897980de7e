package dataset

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/ipfs/boxo/files"
	unixfile "github.com/ipfs/boxo/ipld/unixfs/file"
	"github.com/ipfs/go-cid"
)

// WriteOut writes the DAG under root to out, which must not exist: a file
// DAG becomes the file out, a directory DAG the directory out. Every block
// must be stored, and the DAG must pass Check (a dataset in a ledger may
// have been imported before imports checked, or by another program): a
// DAG that fails it writes nothing. Nothing is written outside out: every
// name is checked again as it is written, and each file and directory is
// created anew, never opened through a symlink. A write that fails removes
// what it made, out included; an out that appeared meanwhile is left alone.
func WriteOut(ctx context.Context, bs *Blockstore, root cid.Cid, out string) error {
	if _, err := os.Lstat(out); err == nil {
		return fmt.Errorf("dataset: out %q exists; name a path that does not", out)
	}
	if _, err := Check(ctx, bs, root); err != nil {
		return err
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
	created, err := writeNode(ctx, f, out, "")
	if err != nil {
		if created {
			_ = os.RemoveAll(out)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("dataset: write %q: %w", out, err)
	}
	return nil
}

// writeNode writes nd at path (rel: its path inside the dataset, for
// errors) and reports whether it created path.
func writeNode(ctx context.Context, nd files.Node, path, rel string) (created bool, err error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	switch nd := nd.(type) {
	case *files.Symlink:
		if err := os.Symlink(nd.Target, path); err != nil {
			return false, err
		}
		return true, nil
	case files.File:
		w, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o666)
		if err != nil {
			return false, err
		}
		_, err = io.Copy(w, nd)
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		return true, err
	case files.Directory:
		if err := os.Mkdir(path, 0o777); err != nil {
			return false, err
		}
		it := nd.Entries()
		for it.Next() {
			name := it.Name()
			p := name
			if rel != "" {
				p = rel + "/" + name
			}
			if why := CheckEntryName(name); why != "" {
				return true, bad(p, "%s", why)
			}
			if _, err := writeNode(ctx, it.Node(), filepath.Join(path, name), p); err != nil {
				return true, err
			}
		}
		return true, it.Err()
	}
	return false, errors.New("dataset: " + at(rel) + " is not a file, directory or symlink")
}
