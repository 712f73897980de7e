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
