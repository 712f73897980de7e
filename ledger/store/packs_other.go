//go:build !linux

package store

import "os"

// directIO is 0 where O_DIRECT is not Linux's: pack writes are buffered.
const directIO = 0

// writeBufs writes bufs to f in order.
func writeBufs(f *os.File, bufs [][]byte) error {
	for _, b := range bufs {
		if _, err := f.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// syncData makes f's written bytes (and its size) durable.
func syncData(f *os.File) error { return f.Sync() }
