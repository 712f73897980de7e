package dataset

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// OpenRegular opens the regular file at path for reading, or fails with
// ErrPath naming what path is instead. It opens without blocking
// (O_NONBLOCK: a named pipe with no writer would hold the opening thread
// for good) and checks the file it opened, not only the path before, so a
// path swapped for a pipe or a device in between is refused too.
func OpenRegular(path string) (*os.File, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%w: path %q: %v", ErrPath, path, unwrapPathErr(err))
	}
	if !fi.Mode().IsRegular() {
		return nil, notRegular(path, fi.Mode())
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: path %q: %v", ErrPath, path, unwrapPathErr(err))
	}
	fi, err = f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: path %q: %v", ErrPath, path, unwrapPathErr(err))
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, notRegular(path, fi.Mode())
	}
	return f, nil
}

func notRegular(path string, m fs.FileMode) error {
	return fmt.Errorf("%w: path %q is %s; allowed: a regular file", ErrPath, path, KindOf(m))
}

// KindOf names the kind of file m is, for a message.
func KindOf(m fs.FileMode) string {
	switch t := m.Type(); {
	case t == 0:
		return "a regular file"
	case t&fs.ModeDir != 0:
		return "a directory"
	case t&fs.ModeSymlink != 0:
		return "a symlink"
	case t&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case t&fs.ModeSocket != 0:
		return "a socket"
	case t&fs.ModeCharDevice != 0:
		return "a character device"
	case t&fs.ModeDevice != 0:
		return "a device"
	}
	return "not a regular file (" + m.Type().String() + ")"
}
