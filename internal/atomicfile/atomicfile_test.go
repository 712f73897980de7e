package atomicfile

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "api.token")
	if err := os.WriteFile(p, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(p, []byte("new\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil || string(b) != "new\n" {
		t.Fatalf("content %q (%v)", b, err)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v; want 0600", fi.Mode().Perm())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("%d entries in the directory; want the file alone (no temporary left)", len(ents))
	}
	if err := WriteFile(filepath.Join(dir, "missing", "f"), nil, 0o600); err == nil {
		t.Fatal("a file in a missing directory: no error")
	}
}

// Writers racing each leave a whole version: a reader never sees a mix or
// a short file.
func TestWriteFileConcurrent(t *testing.T) {
	p := filepath.Join(t.TempDir(), "left.json")
	var wg sync.WaitGroup
	versions := map[string]bool{}
	for i := range 8 {
		v := bytes.Repeat([]byte(fmt.Sprintf("%d", i)), 64<<10)
		versions[string(v)] = true
		wg.Go(func() {
			for range 10 {
				if err := WriteFile(p, v, 0o600); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Go(func() {
		for range 50 {
			if b, err := os.ReadFile(p); err == nil && !versions[string(b)] {
				t.Errorf("read %d bytes that no writer wrote whole", len(b))
				return
			}
		}
	})
	wg.Wait()
}
