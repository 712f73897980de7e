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

// TestChunkPool: the pool takes back only buffers it lent, once each; a
// foreign buffer of the same size is left alone, and a buffer it lends
// is whole.
func TestChunkPool(t *testing.T) {
	p := newChunkPool()
	a := p.get()
	if len(a) != ChunkSize {
		t.Fatalf("lent %d bytes, want %d", len(a), ChunkSize)
	}
	foreign := make([]byte, ChunkSize)
	if p.put(foreign) {
		t.Fatal("the pool took a foreign buffer")
	}
	if !p.put(a[:10]) { // a short chunk read into a
		t.Fatal("the pool did not take back its buffer")
	}
	if p.put(a) {
		t.Fatal("the pool took back a buffer twice")
	}
	for range 4 {
		b := p.get()
		if &b[0] == &foreign[0] || len(b) != ChunkSize {
			t.Fatal("the pool lent a foreign or short buffer")
		}
	}
}
