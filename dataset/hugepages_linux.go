package dataset

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

const hugePage = 2 << 20

// hugeBuf is n bytes of zeroed memory on a 2 MiB boundary that the kernel
// is asked to back with transparent huge pages (n a multiple of 2 MiB).
// Chunk buffers live in it: an O_DIRECT write of them to a pack goes to
// the disk in a few large requests, not one per 4 KiB page, which wrote
// about twice as fast on a virtio disk; reading and hashing them take
// fewer TLB misses.
func hugeBuf(n int) []byte {
	b := make([]byte, n+hugePage)
	k := int(uintptr(unsafe.Pointer(unsafe.SliceData(b))) % hugePage)
	if k != 0 {
		k = hugePage - k
	}
	b = b[k : k+n : k+n]
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
	// Pages the runtime reused are already mapped, small; dropped, they
	// read as zeros again (as make left them) and the first touch maps
	// huge ones.
	_ = unix.Madvise(b, unix.MADV_DONTNEED)
	return b
}
