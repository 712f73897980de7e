package dataset

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
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
	// One store for every input (opening one per input would be most of
	// the work): what an input imports stays, as on a real machine.
	into := openStore(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = ImportCAR(ctx, into, bytes.NewReader(b))
	})
}
