//go:build !linux

package dataset

// hugeBuf is n bytes of zeroed memory (huge pages are asked for on Linux).
func hugeBuf(n int) []byte { return make([]byte, n) }
