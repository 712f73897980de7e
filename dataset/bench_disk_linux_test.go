package dataset

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// diskWriteTime is the time this machine's disk takes to make size bytes
// durable as an import's packs do (O_DIRECT from huge-page memory, 16 MiB
// writes, one fdatasync): the ceiling an import's speed meets once hashing
// is faster than the disk. BenchmarkDatasetImport reports it beside sha256.
func diskWriteTime(b *testing.B, data []byte) time.Duration {
	buf := hugeBuf(len(data) &^ (hugePage - 1))
	copy(buf, data)
	f, err := os.OpenFile(filepath.Join(b.TempDir(), "disk"), os.O_WRONLY|os.O_CREATE|unix.O_DIRECT, 0o600)
	if err != nil {
		b.Skipf("no O_DIRECT here: %v", err)
	}
	defer f.Close()
	t0 := time.Now()
	for off := 0; off < len(buf); off += 16 << 20 {
		if _, err := f.Write(buf[off:min(off+16<<20, len(buf))]); err != nil {
			b.Fatal(err)
		}
	}
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		b.Fatal(err)
	}
	return time.Since(t0)
}
