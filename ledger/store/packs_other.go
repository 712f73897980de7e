//go:build !linux

package store

// directIO is 0 where O_DIRECT is not Linux's: pack writes are buffered.
const directIO = 0
