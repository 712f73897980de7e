// Package tarcopy owns the tar archives that `contract cp` and `job cp`
// move (issue 31): packing a local file or directory under a name,
// unpacking an archive into a directory without letting an entry land
// outside it, and renaming an archive's top entry on the way. Docker's
// archive API speaks the same form: every entry's path starts with the
// name of the file or directory copied.
package tarcopy

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Pack writes src (a file, or a directory and everything under it) to w
// as a tar archive whose entries' paths start with name: regular files
// with their bytes, directories, and symbolic links; modes and
// modification times as they are. Other files (sockets, devices) are left
// out.
func Pack(ctx context.Context, w io.Writer, src, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		if !fi.Mode().IsRegular() && !fi.IsDir() && link == "" {
			return nil
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		h.Name = path.Join(name, filepath.ToSlash(rel))
		if fi.IsDir() {
			h.Name += "/"
		}
		h.Uname, h.Gname = "", ""
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := io.CopyN(tw, f, h.Size); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// checkName: a name is one path element.
func checkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("tarcopy: name %q is not one path element", name)
	}
	return nil
}

// Unpack writes the regular files, directories and symbolic links of the
// tar archive r under directory dst, with their modes and modification
// times. An entry whose path leaves dst (absolute, or through ..), or
// goes through a symbolic link the archive made, is refused, and so is
// anything but those three kinds.
func Unpack(ctx context.Context, dst string, r io.Reader) error {
	tr := tar.NewReader(r)
	links := map[string]bool{} // symbolic links this archive made
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("tarcopy: the archive: %w", err)
		}
		rel, err := entryPath(h.Name)
		if err != nil {
			return err
		}
		if rel == "." {
			continue
		}
		for p := path.Dir(rel); p != "."; p = path.Dir(p) {
			if links[p] {
				return fmt.Errorf("tarcopy: %q goes through the symbolic link %q", h.Name, p)
			}
		}
		target := filepath.Join(dst, filepath.FromSlash(rel))
		mode := fs.FileMode(h.Mode).Perm()
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o700); err != nil {
				return err
			}
			if err := os.Chmod(target, mode|0o700); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			if err := writeFile(target, tr, h.Size, mode); err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			_ = os.Remove(target)
			if err := os.Symlink(h.Linkname, target); err != nil {
				return err
			}
			links[rel] = true
			continue
		default:
			continue // hard links, devices, fifos: not copied
		}
		_ = os.Chtimes(target, h.ModTime, h.ModTime)
	}
}

// entryPath is an entry's path relative to the destination, clean, with
// slashes.
func entryPath(name string) (string, error) {
	if strings.ContainsRune(name, 0) || path.IsAbs(name) || strings.HasPrefix(name, "\\") {
		return "", fmt.Errorf("tarcopy: entry %q is not a relative path", name)
	}
	rel := path.Clean(name)
	if rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("tarcopy: entry %q leaves the destination", name)
	}
	return rel, nil
}

func writeFile(target string, r io.Reader, size int64, mode fs.FileMode) error {
	if fi, err := os.Lstat(target); err == nil && !fi.Mode().IsRegular() {
		if err := os.Remove(target); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	_, err = io.CopyN(f, r, size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Chmod(target, mode)
}

// Rename is the tar archive r with the first element of every entry's
// path replaced by name: an archive of /data/a copied to /out/b.
func Rename(r io.Reader, name string) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(rename(pw, r, name)) }()
	return pr
}

func rename(w io.Writer, r io.Reader, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	tr, tw := tar.NewReader(r), tar.NewWriter(w)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return tw.Close()
		}
		if err != nil {
			return fmt.Errorf("tarcopy: the archive: %w", err)
		}
		_, rest, _ := strings.Cut(strings.TrimPrefix(h.Name, "./"), "/")
		h.Name = name
		if rest != "" || h.Typeflag == tar.TypeDir {
			h.Name += "/" + rest
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return err
		}
	}
}
