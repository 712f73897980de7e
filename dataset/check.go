package dataset

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/cshare/cshare/internal/text"
	"github.com/ipfs/boxo/ipld/merkledag"
	"github.com/ipfs/boxo/ipld/unixfs"
	"github.com/ipfs/boxo/ipld/unixfs/hamt"
	"github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
)

// ErrDAG says a DAG is not a dataset that writes out as the files it
// claims: a UnixFS size that its blocks do not hold, a directory entry that
// is not a plain name, or a node of a kind a dataset cannot hold.
var ErrDAG = errors.New("dataset: bad DAG")

// MaxEntries bounds the files, directories and symlinks a dataset writes
// out (an entry reached twice counts twice): a directory can name one
// subdirectory many times, and a few blocks would otherwise write out
// without end.
const MaxEntries = 1 << 24

// maxDepth bounds the nesting of a DAG's blocks.
const maxDepth = 1024

// Stats is what a dataset writes out.
type Stats struct {
	// Size is the bytes of file content, a file reached twice counted twice.
	Size int64
	// Entries is the files, directories and symlinks, the root among them.
	Entries int64
}

// Check reads the DAG under root, every block of which must be stored, and
// checks that it writes out as the files it claims: every file's size (in
// its UnixFS node and in its parent's block sizes) is the bytes its blocks
// hold, every directory entry is a plain name (not empty, ".", "..", nor
// holding "/" or NUL) that its directory names once, every node is a file,
// directory (plain or HAMT-sharded) or symlink, and the total stays within
// MaxEntries and an int64 of bytes. An error (ErrDAG, or ErrMissing for a
// block not stored) names the entry at fault by its path from the root.
func Check(ctx context.Context, bs *Blockstore, root cid.Cid) (Stats, error) {
	c := &checker{ctx: ctx, bs: bs, dag: DAGService(bs), entries: map[cid.Cid]Stats{}, files: map[cid.Cid]uint64{}}
	return c.entry(root, "", 0)
}

type checker struct {
	ctx     context.Context
	bs      *Blockstore
	dag     ipld.DAGService
	entries map[cid.Cid]Stats  // entries already checked
	files   map[cid.Cid]uint64 // file blocks already checked: the bytes under each
}

// at names the entry at path ("" is the root) for an error.
func at(path string) string {
	if path == "" {
		return "the root"
	}
	return "entry " + text.Quote(ellipsizeTail(path))
}

// ellipsizeTail keeps the last 64 characters of s, where a path's fault is.
func ellipsizeTail(s string) string {
	r := []rune(s)
	if len(r) <= 64 {
		return s
	}
	return "..." + string(r[len(r)-61:])
}

func bad(path, format string, a ...any) error {
	return fmt.Errorf("%w: %s %s", ErrDAG, at(path), fmt.Sprintf(format, a...))
}

func (c *checker) block(k cid.Cid, path string) ([]byte, error) {
	if err := c.ctx.Err(); err != nil {
		return nil, err
	}
	data, err := c.bs.s.DataBlock(k)
	if err != nil {
		return nil, fmt.Errorf("%w: %s (%s)", ErrMissing, k, at(path))
	}
	return data, nil
}

// node decodes a dag-pb block as UnixFS.
func (c *checker) node(k cid.Cid, path string) (*merkledag.ProtoNode, *unixfs.FSNode, error) {
	if k.Type() != cid.DagProtobuf {
		return nil, nil, bad(path, "has block %s of codec %#x; allowed: dag-pb or raw", k, k.Type())
	}
	data, err := c.block(k, path)
	if err != nil {
		return nil, nil, err
	}
	nd, err := merkledag.DecodeProtobuf(data)
	if err != nil {
		return nil, nil, bad(path, "has block %s that is not dag-pb: %v", k, err)
	}
	fsn, err := unixfs.FSNodeFromBytes(nd.Data())
	if err != nil {
		return nil, nil, bad(path, "has block %s that is not UnixFS: %v", k, err)
	}
	return nd, fsn, nil
}

// entry checks the file, directory or symlink k at path.
func (c *checker) entry(k cid.Cid, path string, depth int) (Stats, error) {
	if s, ok := c.entries[k]; ok {
		return s, nil
	}
	if depth > maxDepth {
		return Stats{}, bad(path, "is deeper than %d levels", maxDepth)
	}
	var s Stats
	if k.Type() == cid.Raw {
		data, err := c.block(k, path)
		if err != nil {
			return Stats{}, err
		}
		s = Stats{Size: int64(len(data)), Entries: 1}
	} else {
		nd, fsn, err := c.node(k, path)
		if err != nil {
			return Stats{}, err
		}
		switch fsn.Type() {
		case unixfs.TFile, unixfs.TRaw:
			size, err := c.file(k, nd, fsn, path, depth)
			if err != nil {
				return Stats{}, err
			}
			s = Stats{Size: int64(size), Entries: 1}
		case unixfs.TSymlink:
			if len(nd.Links()) > 0 {
				return Stats{}, bad(path, "is a symlink with %d links; allowed: none", len(nd.Links()))
			}
			s = Stats{Entries: 1}
		case unixfs.TDirectory:
			if s, err = c.dir(path, depth, func(f func(*ipld.Link) error) error {
				for _, l := range nd.Links() {
					if err := f(l); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				return Stats{}, err
			}
		case unixfs.THAMTShard:
			sh, err := hamt.NewHamtFromDag(c.dag, nd)
			if err != nil {
				return Stats{}, bad(path, "is a sharded directory that does not decode: %v", err)
			}
			if s, err = c.dir(path, depth, func(f func(*ipld.Link) error) error {
				return sh.ForEachLink(c.ctx, f)
			}); err != nil {
				return Stats{}, err
			}
		default:
			return Stats{}, bad(path, "is UnixFS of type %s; allowed: a file, directory or symlink", fsn.Type())
		}
	}
	c.entries[k] = s
	return s, nil
}

// dir checks the entries each lists.
func (c *checker) dir(path string, depth int, each func(func(*ipld.Link) error) error) (Stats, error) {
	s := Stats{Entries: 1}
	names := map[string]bool{}
	err := each(func(l *ipld.Link) error {
		p := l.Name
		if path != "" {
			p = path + "/" + l.Name
		}
		if why := CheckEntryName(l.Name); why != "" {
			return bad(p, "%s; allowed: a plain name, not empty, \".\" or \"..\", without \"/\" or NUL", why)
		}
		if names[l.Name] {
			return bad(p, "appears twice in its directory; allowed: each name once")
		}
		names[l.Name] = true
		cs, err := c.entry(l.Cid, p, depth+1)
		if err != nil {
			return err
		}
		if s.Size > math.MaxInt64-cs.Size {
			return bad(p, "takes the dataset past %d bytes", int64(math.MaxInt64))
		}
		s.Size += cs.Size
		if s.Entries += cs.Entries; s.Entries > MaxEntries {
			return bad(p, "takes the dataset past %d entries", MaxEntries)
		}
		return nil
	})
	if err != nil && !errors.Is(err, ErrDAG) && !errors.Is(err, ErrMissing) && c.ctx.Err() == nil {
		// The HAMT's own walk failed (a shard that does not decode, a
		// block not stored).
		if ipld.IsNotFound(err) {
			return Stats{}, fmt.Errorf("%w: %v (%s)", ErrMissing, err, at(path))
		}
		return Stats{}, bad(path, "is a sharded directory that does not decode: %v", err)
	}
	return s, err
}

// CheckEntryName is "" when name is a plain name for a directory entry,
// else what is wrong with it.
func CheckEntryName(name string) string {
	switch {
	case name == "":
		return "has an empty name"
	case name == "." || name == "..":
		return "is not a plain name"
	case strings.Contains(name, "/"):
		return "has a name holding \"/\""
	case strings.ContainsRune(name, 0):
		return "has a name holding NUL"
	}
	return ""
}

// file checks the file block k (decoded as nd and fsn) and returns the
// bytes under it.
func (c *checker) file(k cid.Cid, nd *merkledag.ProtoNode, fsn *unixfs.FSNode, path string, depth int) (uint64, error) {
	if v, ok := c.files[k]; ok {
		return v, nil
	}
	if depth > maxDepth {
		return 0, bad(path, "is deeper than %d levels", maxDepth)
	}
	links := nd.Links()
	sizes := fsn.BlockSizes()
	if len(sizes) != len(links) {
		return 0, bad(path, "has block %s with %d block sizes for %d links", k, len(sizes), len(links))
	}
	total := uint64(len(fsn.Data()))
	for i, l := range links {
		got, err := c.fileChild(l.Cid, path, depth+1)
		if err != nil {
			return 0, err
		}
		if got != sizes[i] {
			return 0, bad(path, "has block %s that says its link %d holds %d bytes; it holds %d", k, i, sizes[i], got)
		}
		if total > math.MaxInt64-got {
			return 0, bad(path, "is larger than %d bytes", int64(math.MaxInt64))
		}
		total += got
	}
	if fsn.FileSize() != total {
		return 0, bad(path, "claims %d bytes in block %s; its blocks hold %d", fsn.FileSize(), k, total)
	}
	c.files[k] = total
	return total, nil
}

// fileChild checks a block under a file and returns the bytes under it.
func (c *checker) fileChild(k cid.Cid, path string, depth int) (uint64, error) {
	if k.Type() == cid.Raw {
		if v, ok := c.files[k]; ok {
			return v, nil
		}
		data, err := c.block(k, path)
		if err != nil {
			return 0, err
		}
		c.files[k] = uint64(len(data))
		return uint64(len(data)), nil
	}
	nd, fsn, err := c.node(k, path)
	if err != nil {
		return 0, err
	}
	if t := fsn.Type(); t != unixfs.TFile && t != unixfs.TRaw {
		return 0, bad(path, "is a file whose block %s is UnixFS of type %s; allowed: file blocks", k, t)
	}
	return c.file(k, nd, fsn, path, depth)
}
