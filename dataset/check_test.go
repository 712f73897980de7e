package dataset

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ipfs/boxo/ipld/merkledag"
	"github.com/ipfs/boxo/ipld/unixfs"
	"github.com/ipfs/boxo/ipld/unixfs/hamt"
	ipld "github.com/ipfs/go-ipld-format"
)

// dagBuilder stores hand-made UnixFS nodes (CIDv1) in a store, as a
// hostile CAR or another program would make them.
type dagBuilder struct {
	t   testing.TB
	bs  *Blockstore
	dag ipld.DAGService
}

func newDAG(t testing.TB) *dagBuilder {
	bs := openStore(t)
	return &dagBuilder{t: t, bs: bs, dag: DAGService(bs)}
}

func (b *dagBuilder) add(nd ipld.Node) ipld.Node {
	b.t.Helper()
	if err := b.dag.Add(context.Background(), nd); err != nil {
		b.t.Fatal(err)
	}
	return nd
}

func (b *dagBuilder) raw(data string) ipld.Node {
	b.t.Helper()
	return b.add(merkledag.NewRawNode([]byte(data)))
}

// file is a file node over children (raw leaves), whose block sizes and
// file size are sizes and size (the truth when they are nil and -1).
func (b *dagBuilder) file(size int64, sizes []uint64, children ...ipld.Node) ipld.Node {
	b.t.Helper()
	fsn := unixfs.NewFSNode(unixfs.TFile)
	nd := merkledag.NodeWithData(nil)
	for i, c := range children {
		s := uint64(len(c.RawData()))
		if pn, ok := c.(*merkledag.ProtoNode); ok {
			cf, err := unixfs.FSNodeFromBytes(pn.Data())
			if err != nil {
				b.t.Fatal(err)
			}
			s = cf.FileSize()
		}
		if sizes != nil {
			s = sizes[i]
		}
		fsn.AddBlockSize(s)
		if err := nd.AddNodeLink("", c); err != nil {
			b.t.Fatal(err)
		}
	}
	if size >= 0 {
		fsn.UpdateFilesize(size - int64(fsn.FileSize()))
	}
	data, err := fsn.GetBytes()
	if err != nil {
		b.t.Fatal(err)
	}
	nd.SetData(data)
	b.pb(nd)
	return b.add(nd)
}

func (b *dagBuilder) pb(nd *merkledag.ProtoNode) {
	b.t.Helper()
	if err := nd.SetCidBuilder(cidBuilder); err != nil {
		b.t.Fatal(err)
	}
}

// dir is a plain directory of the entries (name, node, name, node, ...),
// in the order given.
func (b *dagBuilder) dir(entries ...any) ipld.Node {
	b.t.Helper()
	nd := merkledag.NodeWithData(unixfs.FolderPBData())
	for i := 0; i < len(entries); i += 2 {
		if err := nd.AddNodeLink(entries[i].(string), entries[i+1].(ipld.Node)); err != nil {
			b.t.Fatal(err)
		}
	}
	b.pb(nd)
	return b.add(nd)
}

// hamtDir is a HAMT-sharded directory of the entries (name, node, ...).
func (b *dagBuilder) hamtDir(entries ...any) ipld.Node {
	b.t.Helper()
	ctx := context.Background()
	sh, err := hamt.NewShard(b.dag, 256)
	if err != nil {
		b.t.Fatal(err)
	}
	sh.SetCidBuilder(cidBuilder)
	for i := 0; i < len(entries); i += 2 {
		if err := sh.Set(ctx, entries[i].(string), entries[i+1].(ipld.Node)); err != nil {
			b.t.Fatal(err)
		}
	}
	nd, err := sh.Node()
	if err != nil {
		b.t.Fatal(err)
	}
	return b.add(nd)
}

// car is root's DAG as a CAR.
func (b *dagBuilder) car(root ipld.Node) []byte {
	b.t.Helper()
	var buf bytes.Buffer
	if _, err := ExportCAR(context.Background(), b.bs, root.Cid(), &buf); err != nil {
		b.t.Fatal(err)
	}
	return buf.Bytes()
}

// TestImportCARRefusesBadDAGs: a CAR whose sizes are not what its blocks
// hold (a file claiming 2^62 bytes over a 6-byte leaf imported as a 4 EiB
// dataset), or whose directory entries are not plain names, is refused,
// naming the entry; and WriteOut of such a DAG already stored (imported
// before the check) writes nothing.
func TestImportCARRefusesBadDAGs(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		root func(b *dagBuilder) ipld.Node
		want string // in the error
	}{
		{"file claiming 2^62 bytes", func(b *dagBuilder) ipld.Node {
			return b.file(1<<62, []uint64{1 << 62}, b.raw("hello\n"))
		}, "the root has block"},
		{"file size over true block sizes", func(b *dagBuilder) ipld.Node {
			return b.dir("big", b.file(1<<62, nil, b.raw("hello\n")))
		}, `entry "big" claims 4611686018427387904 bytes`},
		{"block size lying", func(b *dagBuilder) ipld.Node {
			return b.dir("d", b.dir("f", b.file(-1, []uint64{7}, b.raw("hello\n"))))
		}, `entry "d/f" has block`},
		{"inner file node lying", func(b *dagBuilder) ipld.Node {
			inner := b.file(100, []uint64{100}, b.raw("hello\n"))
			return b.file(-1, []uint64{100}, inner)
		}, "says its link 0 holds 100 bytes; it holds 6"},
		{"dot dot", func(b *dagBuilder) ipld.Node {
			return b.dir("ok", b.raw("x"), "../../x", b.raw("evil"))
		}, `entry "../../x" has a name holding "/"`},
		{"parent", func(b *dagBuilder) ipld.Node { return b.dir("..", b.raw("evil")) }, `entry ".." is not a plain name`},
		{"dot", func(b *dagBuilder) ipld.Node { return b.dir(".", b.dir()) }, `entry "." is not a plain name`},
		{"empty", func(b *dagBuilder) ipld.Node { return b.dir("", b.raw("x")) }, "has an empty name"},
		{"slash deep", func(b *dagBuilder) ipld.Node {
			return b.dir("sub", b.dir("a/b", b.raw("x")))
		}, `entry "sub/a/b" has a name holding "/"`},
		{"nul", func(b *dagBuilder) ipld.Node { return b.dir("a\x00b", b.raw("x")) }, "holding NUL"},
		{"duplicate", func(b *dagBuilder) ipld.Node {
			return b.dir("x", b.raw("one"), "x", b.dir("y", b.raw("two")))
		}, `entry "x" appears twice`},
		{"hamt dot dot", func(b *dagBuilder) ipld.Node {
			return b.dir("h", b.hamtDir("fine", b.raw("x"), "..", b.raw("evil")))
		}, `entry "h/.." is not a plain name`},
		{"directory bomb", func(b *dagBuilder) ipld.Node {
			d := b.dir("f", b.raw("x"))
			for range 24 { // 2^25 entries from 26 blocks
				d = b.dir("a", d, "b", d)
			}
			return d
		}, "past 16777216 entries"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := newDAG(t)
			root := c.root(b)
			_, err := ImportCAR(ctx, openStore(t), bytes.NewReader(b.car(root)))
			if !errors.Is(err, ErrCAR) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("ImportCAR = %v; want ErrCAR naming %q", err, c.want)
			}
			// Stored already (a ledger's dataset from before the check):
			// writing it out makes nothing, here or beside.
			dir := t.TempDir()
			out := filepath.Join(dir, "sub", "out")
			if err := os.Mkdir(filepath.Dir(out), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := WriteOut(ctx, b.bs, root.Cid(), out); !errors.Is(err, ErrDAG) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("WriteOut = %v; want ErrDAG naming %q", err, c.want)
			}
			assertTree(t, dir, "sub/")
		})
	}
}

// assertTree fails unless the tree under dir is exactly want (paths
// relative to dir, directories ending in "/", sorted as WalkDir walks).
func assertTree(t *testing.T, dir string, want ...string) {
	t.Helper()
	var got []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if p == dir || err != nil {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			rel += "/"
		}
		got = append(got, filepath.ToSlash(rel))
		return nil
	})
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("tree %v, want %v", got, want)
	}
}

// TestGoodDAGsWriteOut: hand-made DAGs that tell the truth pass, HAMT
// directories among them, and write out as they say.
func TestGoodDAGsWriteOut(t *testing.T) {
	ctx := context.Background()
	b := newDAG(t)
	leaf := b.raw("hello\n")
	inner := b.file(-1, nil, leaf, leaf)
	root := b.dir("a", b.file(-1, nil, inner, leaf), "h", b.hamtDir("x", leaf, "y", b.dir()), "same", leaf, "same2", leaf)
	res, err := ImportCAR(ctx, openStore(t), bytes.NewReader(b.car(root)))
	if err != nil {
		t.Fatal(err)
	}
	if res.Size != 18+6+6+6 {
		t.Fatalf("size %d, want 36", res.Size)
	}
	st, err := Check(ctx, b.bs, root.Cid())
	if err != nil || st.Entries != 7 {
		t.Fatalf("Check = %+v, %v; want 7 entries", st, err)
	}
	dir := t.TempDir()
	if err := WriteOut(ctx, b.bs, root.Cid(), filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	assertTree(t, dir, "out/", "out/a", "out/h/", "out/h/x", "out/h/y/", "out/same", "out/same2")
	if got, _ := os.ReadFile(filepath.Join(dir, "out", "a")); string(got) != strings.Repeat("hello\n", 3) {
		t.Fatalf("a holds %q", got)
	}
}

// TestWriteOutFailureRemovesOut: a write that fails part way (a name too
// long for the file system, after out was made) removes out, so a retry
// is not refused for an out that exists; an out that existed is not
// touched.
func TestWriteOutFailureRemovesOut(t *testing.T) {
	ctx := context.Background()
	b := newDAG(t)
	root := b.dir("a", b.raw("x"), strings.Repeat("n", 300), b.raw("y"))
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	if err := WriteOut(ctx, b.bs, root.Cid(), out); err == nil {
		t.Fatal("a 300-byte name was written")
	}
	assertTree(t, dir)
	if err := os.WriteFile(out, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteOut(ctx, b.bs, b.raw("z").Cid(), out); err == nil {
		t.Fatal("wrote over an out that exists")
	}
	if got, _ := os.ReadFile(out); string(got) != "mine" {
		t.Fatalf("an out that existed holds %q", got)
	}
}

// TestOpenRegularRefusesAPipe: opening a named pipe (no writer) returns at
// once, refused; os.Open would wait for a writer for good.
func TestOpenRegularRefusesAPipe(t *testing.T) {
	p := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Skip("no named pipes here:", err)
	}
	done := make(chan error, 1)
	go func() {
		f, err := OpenRegular(p)
		if f != nil {
			f.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrPath) || !strings.Contains(err.Error(), "is a named pipe; allowed: a regular file") {
			t.Fatalf("OpenRegular(fifo) = %v", err)
		}
	case <-time.After(20 * time.Second):
		// Unblock the opener, or the test binary keeps a thread in open(2).
		if w, err := os.OpenFile(p, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
		t.Fatal("OpenRegular of a named pipe blocked")
	}
	if _, err := OpenRegular(filepath.Dir(p)); !errors.Is(err, ErrPath) || !strings.Contains(err.Error(), "is a directory") {
		t.Fatalf("OpenRegular(dir) = %v", err)
	}
}
