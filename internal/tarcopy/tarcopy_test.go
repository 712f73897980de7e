package tarcopy

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tree is every file under dir: its path, its mode and its bytes (a
// symlink: its target).
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, _ := d.Info()
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			out[rel] = "link " + l
		case fi.IsDir():
			out[rel] = fmt.Sprintf("dir %o", fi.Mode().Perm())
		default:
			b, _ := os.ReadFile(p)
			out[rel] = fmt.Sprintf("file %o %x", fi.Mode().Perm(), b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRoundTrip: a directory packed and unpacked elsewhere, or renamed on
// the way, is the same tree, byte for byte.
func TestRoundTrip(t *testing.T) {
	src := filepath.Join(t.TempDir(), "data")
	for i := 0; i < 30; i++ {
		p := filepath.Join(src, fmt.Sprintf("d%d", i%4), fmt.Sprintf("f%d", i))
		_ = os.MkdirAll(filepath.Dir(p), 0o750)
		b := make([]byte, i*100)
		_, _ = rand.Read(b)
		if err := os.WriteFile(p, b, fs.FileMode(0o600+i%2*0o40)); err != nil {
			t.Fatal(err)
		}
	}
	big := make([]byte, 3<<20+7)
	_, _ = rand.Read(big)
	_ = os.WriteFile(filepath.Join(src, "big"), big, 0o644)
	_ = os.Symlink("d0/f0", filepath.Join(src, "ln"))
	var buf bytes.Buffer
	if err := Pack(context.Background(), &buf, src, "data"); err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	if err := Unpack(context.Background(), dst, bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	want, got := tree(t, src), tree(t, filepath.Join(dst, "data"))
	if fmt.Sprint(want) != fmt.Sprint(got) {
		t.Fatalf("unpacked tree differs:\nwant %v\ngot  %v", want, got)
	}
	dst2 := t.TempDir()
	if err := Unpack(context.Background(), dst2, Rename(bytes.NewReader(buf.Bytes()), "other")); err != nil {
		t.Fatal(err)
	}
	if got := tree(t, filepath.Join(dst2, "other")); fmt.Sprint(want) != fmt.Sprint(got) {
		t.Fatalf("renamed tree differs")
	}
	// A single file, renamed.
	buf.Reset()
	if err := Pack(context.Background(), &buf, filepath.Join(src, "big"), "big"); err != nil {
		t.Fatal(err)
	}
	if err := Unpack(context.Background(), dst2, Rename(&buf, "copy")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dst2, "copy")); !bytes.Equal(b, big) {
		t.Fatal("the renamed file differs")
	}
}

func archive(t testing.TB, entries ...tar.Header) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range entries {
		body := ""
		if h.Typeflag == tar.TypeReg {
			body = "x"
			h.Size = 1
		}
		h.Mode = 0o644
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(tw, body)
	}
	_ = tw.Close()
	return buf.Bytes()
}

// TestUnpackRefuses: entries that would land outside the destination.
func TestUnpackRefuses(t *testing.T) {
	for name, a := range map[string][]byte{
		"dot-dot":  archive(t, tar.Header{Name: "../x", Typeflag: tar.TypeReg}),
		"deep":     archive(t, tar.Header{Name: "a/../../x", Typeflag: tar.TypeReg}),
		"absolute": archive(t, tar.Header{Name: "/etc/x", Typeflag: tar.TypeReg}),
		"via link": archive(t, tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/"}, tar.Header{Name: "l/x", Typeflag: tar.TypeReg}),
	} {
		t.Run(name, func(t *testing.T) {
			outer := t.TempDir()
			dst := filepath.Join(outer, "in")
			_ = os.Mkdir(dst, 0o755)
			if err := Unpack(context.Background(), dst, bytes.NewReader(a)); err == nil {
				t.Fatal("unpacked")
			}
			if _, err := os.Stat(filepath.Join(outer, "x")); err == nil {
				t.Fatal("wrote outside the destination")
			}
		})
	}
}

// FuzzUnpack: any bytes as an archive never panic Unpack and never put a
// file outside the destination.
func FuzzUnpack(f *testing.F) {
	f.Add(archive(f, tar.Header{Name: "a/b", Typeflag: tar.TypeReg}))
	f.Add(archive(f, tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: ".."}, tar.Header{Name: "l/x", Typeflag: tar.TypeReg}))
	f.Add(archive(f, tar.Header{Name: "d/", Typeflag: tar.TypeDir}, tar.Header{Name: "d/../../y", Typeflag: tar.TypeReg}))
	f.Fuzz(func(t *testing.T, b []byte) {
		outer := t.TempDir()
		dst := filepath.Join(outer, "in")
		_ = os.Mkdir(dst, 0o755)
		_ = Unpack(context.Background(), dst, bytes.NewReader(b))
		ents, _ := os.ReadDir(outer)
		if len(ents) != 1 || ents[0].Name() != "in" {
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			t.Fatalf("wrote outside the destination: %s", strings.Join(names, ","))
		}
	})
}
