// Package logs is the node's store of item output: one file per (job,
// item) under the data dir's logs/ directory. Supervision writes an item's
// output when its run ends; the API (`cshare job logs`) and the p2p logs
// protocol read it. It owns the layout on disk and keeps every path inside
// its directory: a job ID from a peer cannot name a file elsewhere.
package logs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ErrNoLog: the store holds no output for that item.
var ErrNoLog = errors.New("logs: no output kept for this item")

// Store keeps item output under one directory. Its methods are safe for
// concurrent use (each write replaces a file atomically).
type Store struct {
	dir string
	cap int64
}

// New returns a store under dir, whose reads return at most limit bytes
// (the last ones) of an item's output; limit <= 0 means no limit.
func New(dir string, limit int64) *Store { return &Store{dir: dir, cap: limit} }

// path is where an item's output lives, or an error if job cannot be a
// single path element.
func (s *Store) path(job string, item int64) (string, error) {
	if job == "" || job == "." || job == ".." || job == emptyFile || strings.ContainsAny(job, `/\`+"\x00") {
		return "", fmt.Errorf("logs: job %q is not a valid job ID", job)
	}
	return filepath.Join(s.dir, job, strconv.FormatInt(item, 10)+".log"), nil
}

// Save replaces an item's output. An empty output is a hard link to one
// shared empty file (emptyFile): creating an inode per item was the
// costliest part of finishing a short item that prints nothing.
func (s *Store) Save(job string, item int64, out []byte) error {
	p, err := s.path(job, item)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	if len(out) == 0 && s.linkEmpty(p) == nil {
		return nil
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, out, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// emptyFile is the file every empty output links to, in the store's
// directory (a job's outputs are in a directory of their own, and a job ID
// never starts with a dot).
const emptyFile = ".empty"

// linkEmpty makes p a link to the shared empty file; an error (no
// hard links there, or too many links to it) leaves p to a file of its own.
func (s *Store) linkEmpty(p string) error {
	e, tmp := filepath.Join(s.dir, emptyFile), p+".tmp"
	link := func() error {
		if err := os.Link(e, p); !errors.Is(err, fs.ErrExist) {
			return err // linked, or not: no file there
		}
		// Replaced: a link aside, renamed over it.
		_ = os.Remove(tmp) // left by a crash
		if err := os.Link(e, tmp); err != nil {
			return err
		}
		return os.Rename(tmp, p)
	}
	err := link()
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.EMLINK) {
		// The first empty output; or too many links to the file: a fresh
		// one, made aside and renamed into place.
		if err = s.newEmpty(e); err == nil {
			err = link()
		}
	}
	return err
}

func (s *Store) newEmpty(e string) error {
	tmp := e + ".tmp"
	if err := os.WriteFile(tmp, nil, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, e)
}

// Open opens an item's output for reading, positioned so that at most the
// store's limit remains; size is what remains to be read.
func (s *Store) Open(job string, item int64) (r io.ReadCloser, size int64, err error) {
	p, err := s.path(job, item)
	if err != nil {
		return nil, 0, err
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, fmt.Errorf("%w: item %d of job %s", ErrNoLog, item, job)
	}
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	size = fi.Size()
	if s.cap > 0 && size > s.cap {
		if _, err := f.Seek(size-s.cap, io.SeekStart); err != nil {
			f.Close()
			return nil, 0, err
		}
		size = s.cap
	}
	return f, size, nil
}

// Read returns an item's output (at most the store's limit, the last bytes).
func (s *Store) Read(job string, item int64) ([]byte, error) {
	r, size, err := s.Open(job, item)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(io.LimitReader(r, size))
}
