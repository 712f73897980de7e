package dataset

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cshare/cshare/ledger/store"
)

// The golden set: each case is a file or directory that writeGolden makes
// deterministically, and testdata/golden.txt holds the root CID that kubo
// v0.42.0 printed for it with `ipfs add -r --cid-version 1 -Q` (see
// testdata/README). Regenerate the tree with
// DATASET_GOLDEN_DIR=/some/dir go test ./dataset -run TestWriteGoldenTree.
var goldenCases = []string{
	"empty", "one-byte", "one-chunk", "chunk-plus-one", "several-mb",
	"two-levels", "tree", "unicode", "wide",
}

// stream writes n deterministic bytes derived from seed.
func stream(path string, seed string, n int) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var ctr [8]byte
	for i := uint64(0); n > 0; i++ {
		binary.BigEndian.PutUint64(ctr[:], i)
		h := sha256.Sum256(append([]byte(seed), ctr[:]...))
		k := min(n, len(h))
		if _, err := w.Write(h[:k]); err != nil {
			f.Close()
			return err
		}
		n -= k
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func writeGolden(dir, name string) error {
	p := filepath.Join(dir, name)
	switch name {
	case "empty":
		return stream(p, name, 0)
	case "one-byte":
		return stream(p, name, 1)
	case "one-chunk":
		return stream(p, name, ChunkSize)
	case "chunk-plus-one":
		return stream(p, name, ChunkSize+1)
	case "several-mb":
		return stream(p, name, 5<<20+17)
	case "two-levels": // more chunks than one node links: a second layer
		return stream(p, name, 174*ChunkSize+1)
	case "tree":
		for _, f := range []struct {
			rel string
			n   int
		}{
			{"a/b/c.txt", 12}, {"a/b/d.bin", ChunkSize + 5}, {"a/x.bin", 300000},
			{"top.txt", 3}, {"z/zz/zzz/deep.txt", 40}, {".hidden", 9}, {"a/.dot/skip", 9},
		} {
			if err := stream(filepath.Join(p, f.rel), f.rel, f.n); err != nil {
				return err
			}
		}
		if err := os.MkdirAll(filepath.Join(p, "emptydir"), 0o755); err != nil {
			return err
		}
		return os.Symlink("a/b/c.txt", filepath.Join(p, "link"))
	case "unicode":
		for _, rel := range []string{"héllo wörld.txt", "日本語/データ.txt", "emoji-🙂.bin", "Ωmega/ñ/ü.txt", "space name/tab\tname"} {
			if err := stream(filepath.Join(p, rel), rel, len(rel)*7); err != nil {
				return err
			}
		}
		return nil
	case "wide": // enough entries to pass kubo's 256 KiB HAMT threshold
		for i := range 6000 {
			if err := stream(filepath.Join(p, fmt.Sprintf("entry-%05d", i)), fmt.Sprint(i), 1+i%50); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("unknown golden case %q", name)
}

func TestWriteGoldenTree(t *testing.T) {
	dir := os.Getenv("DATASET_GOLDEN_DIR")
	if dir == "" {
		t.Skip("set DATASET_GOLDEN_DIR to write the golden tree for kubo")
	}
	for _, c := range goldenCases {
		if err := writeGolden(dir, c); err != nil {
			t.Fatal(err)
		}
	}
}

func readGolden(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile("testdata/golden.txt")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			t.Fatalf("golden.txt: bad line %q", line)
		}
		out[f[0]] = f[1]
	}
	return out
}

func openStore(t testing.TB) *Blockstore {
	t.Helper()
	s, err := store.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return NewBlockstore(s)
}

// TestGoldenCIDs imports every golden case and compares the root CID with
// the one kubo printed.
func TestGoldenCIDs(t *testing.T) {
	golden := readGolden(t)
	dir := t.TempDir()
	bs := openStore(t)
	for _, c := range goldenCases {
		t.Run(c, func(t *testing.T) {
			want, ok := golden[c]
			if !ok {
				t.Fatalf("no golden CID for %s", c)
			}
			if err := writeGolden(dir, c); err != nil {
				t.Fatal(err)
			}
			res, err := Import(context.Background(), bs, filepath.Join(dir, c), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := res.CID.String(); got != want {
				t.Fatalf("CID %s, kubo says %s", got, want)
			}
		})
	}
}
