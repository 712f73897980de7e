package dataset

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCARRoundTrip(t *testing.T) {
	dir := t.TempDir()
	if err := writeGolden(dir, "tree"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a := openStore(t)
	res, err := Import(ctx, a, filepath.Join(dir, "tree"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	n, err := ExportCAR(ctx, a, res.CID, &buf)
	if err != nil || n != res.Blocks {
		t.Fatalf("export: %d blocks, %v; want %d", n, err, res.Blocks)
	}
	b := openStore(t)
	got, err := ImportCAR(ctx, b, bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if got != res {
		t.Fatalf("import gave %+v, the original import %+v", got, res)
	}
	// A CAR cut short does not hold every block: refused.
	c := openStore(t)
	if _, err := ImportCAR(ctx, c, bytes.NewReader(buf.Bytes()[:buf.Len()/2])); !errors.Is(err, ErrCAR) {
		t.Fatalf("truncated CAR: %v", err)
	}
	// A block whose bytes do not match its CID: refused.
	bad := bytes.Clone(buf.Bytes())
	bad[len(bad)-1] ^= 1
	if _, err := ImportCAR(ctx, openStore(t), bytes.NewReader(bad)); !errors.Is(err, ErrCAR) {
		t.Fatalf("corrupt CAR: %v", err)
	}
}

func FuzzImportCAR(f *testing.F) {
	ctx := context.Background()
	bs := openStore(f)
	dir := f.TempDir()
	if err := writeGolden(dir, "unicode"); err != nil {
		f.Fatal(err)
	}
	res, err := Import(ctx, bs, filepath.Join(dir, "unicode"), nil, nil)
	if err != nil {
		f.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := ExportCAR(ctx, bs, res.CID, &buf); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte{})
	// Hand-made DAGs: HAMT directories, and DAGs that lie (sizes, names).
	d := newDAG(f)
	leaf := d.raw("hello\n")
	f.Add(d.car(d.dir("h", d.hamtDir("x", leaf, "y", d.dir()), "f", d.file(-1, nil, leaf, leaf))))
	f.Add(d.car(d.file(1<<62, []uint64{1 << 62}, leaf)))
	f.Add(d.car(d.dir("../../x", leaf)))
	f.Add(d.car(d.dir("x", leaf, "x", d.dir())))
	// One store for every input (opening one per input would be most of
	// the work): what an input imports stays, as on a real machine.
	into := openStore(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		res, err := ImportCAR(ctx, into, bytes.NewReader(b))
		if err != nil {
			return
		}
		// Accepted: it writes out inside out, exactly the bytes it claims.
		st, err := Check(ctx, into, res.CID)
		if err != nil || st.Size != res.Size {
			t.Fatalf("accepted %+v, then Check = %+v, %v", res, st, err)
		}
		if st.Entries > 64 || st.Size > 1<<20 {
			return
		}
		dir := t.TempDir()
		out := filepath.Join(dir, "out")
		if err := WriteOut(ctx, into, res.CID, out); err != nil {
			t.Fatalf("accepted %+v, then WriteOut: %v", res, err)
		}
		var size, entries int64
		_ = filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
			if err != nil || p == dir {
				return err
			}
			if !strings.HasPrefix(p, out) {
				t.Errorf("wrote %s, outside %s", p, out)
			}
			entries++
			if e.Type().IsRegular() {
				fi, _ := e.Info()
				size += fi.Size()
			}
			return nil
		})
		if size != st.Size || entries != st.Entries {
			t.Fatalf("wrote %d bytes in %d entries, Check says %+v", size, entries, st)
		}
	})
}
