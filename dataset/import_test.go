package dataset

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestImportCancelled: an import whose context ends stops with its error
// part way through a file (the progress callback cancels after the first
// chunk) and records no root.
func TestImportCancelled(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	data := make([]byte, 40*ChunkSize)
	_, _ = rand.Read(data)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var seen int64
	_, err := Import(ctx, openStore(t), path, nil, func(done int64) {
		seen = done
		cancel()
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Import = %v, want context.Canceled", err)
	}
	if seen >= int64(len(data)) {
		t.Errorf("the import read all %d bytes after its context ended", seen)
	}
}

// TestChunkPool: the pool takes back only buffers it lent, once each, and
// lends them again; a foreign buffer of the same size is left alone.
func TestChunkPool(t *testing.T) {
	p := newChunkPool()
	a := p.get()
	foreign := make([]byte, ChunkSize)
	p.put(foreign)
	p.put(a[:10]) // a short chunk read into a
	p.put(a)      // twice: taken back once
	if len(p.free) != 1 || &p.free[0][0] != &a[0] || len(p.free[0]) != ChunkSize {
		t.Fatalf("free = %d buffers, want a alone, whole", len(p.free))
	}
	if b := p.get(); &b[0] != &a[0] {
		t.Fatal("the pool did not lend its free buffer again")
	}
	if b := p.get(); &b[0] == &foreign[0] {
		t.Fatal("the pool lent a foreign buffer")
	}
}
