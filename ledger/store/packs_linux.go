package store

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// directIO is O_DIRECT: pack writes go from the block's memory to the disk
// without a copy into (and throttling by) the page cache.
const directIO = syscall.O_DIRECT

// syncData makes f's written bytes (and its size) durable
// (fdatasync: not the times an fsync would also write).
func syncData(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			if serr = unix.Fdatasync(int(fd)); !errors.Is(serr, unix.EINTR) {
				return
			}
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: serr}
	}
	return nil
}

// iovMax is how many buffers one writev takes (Linux's IOV_MAX).
const iovMax = 1024

// writeBufs writes bufs to f in order with as few writev calls as it can:
// one O_DIRECT write per block kept one block in flight, so the disk waited
// on every call; one call for a whole batch lets it take them all at once.
func writeBufs(f *os.File, bufs [][]byte) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var werr error
	err = rc.Write(func(fd uintptr) bool {
		for len(bufs) > 0 {
			n, err := unix.Writev(int(fd), bufs[:min(len(bufs), iovMax)])
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				werr = &os.PathError{Op: "writev", Path: f.Name(), Err: err}
				return true
			}
			if n == 0 {
				werr = &os.PathError{Op: "writev", Path: f.Name(), Err: unix.EIO}
				return true
			}
			bufs = advance(bufs, n)
		}
		return true
	})
	if err != nil {
		return err
	}
	return werr
}

// advance drops the first n bytes of bufs.
func advance(bufs [][]byte, n int) [][]byte {
	for n > 0 && len(bufs) > 0 {
		if n < len(bufs[0]) {
			bufs[0] = bufs[0][n:]
			return bufs
		}
		n -= len(bufs[0])
		bufs = bufs[1:]
	}
	for len(bufs) > 0 && len(bufs[0]) == 0 {
		bufs = bufs[1:]
	}
	return bufs
}
