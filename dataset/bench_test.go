package dataset

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkDatasetImport imports 256 MiB of random data into a fresh store
// and, in the same run, hashes the same bytes with sha256; it reports both
// rates and their ratio (the target is an import at ≥ 0.8 × sha256), and
// the CPU time each took per GB (which a busy machine does not change much).
func BenchmarkDatasetImport(b *testing.B) {
	const size = 256 << 20
	path := filepath.Join(b.TempDir(), "random")
	data := make([]byte, size)
	if _, err := rand.Read(data); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(size)
	b.ResetTimer()
	var importTime, shaTime, diskTime, importCPU, shaCPU time.Duration
	for range b.N {
		b.StopTimer()
		bs := openStore(b)
		b.StartTimer()
		t0, c0 := time.Now(), cpuTime()
		if _, err := Import(context.Background(), bs, path, nil, nil); err != nil {
			b.Fatal(err)
		}
		importTime += time.Since(t0)
		importCPU += cpuTime() - c0
		t0, c0 = time.Now(), cpuTime()
		sha256.Sum256(data)
		shaTime += time.Since(t0)
		shaCPU += cpuTime() - c0
		b.StopTimer()
		diskTime += diskWriteTime(b, data)
		b.StartTimer()
	}
	mb := float64(size) * float64(b.N) / 1e6
	b.ReportMetric(mb/importTime.Seconds(), "import-MB/s")
	b.ReportMetric(mb/shaTime.Seconds(), "sha256-MB/s")
	b.ReportMetric(shaTime.Seconds()/importTime.Seconds(), "import/sha256")
	if diskTime > 0 {
		// The disk's durable write rate: the ceiling once hashing is faster.
		b.ReportMetric(mb/diskTime.Seconds(), "disk-MB/s")
		b.ReportMetric(diskTime.Seconds()/importTime.Seconds(), "import/disk")
	}
	gb := mb / 1e3
	b.ReportMetric(importCPU.Seconds()/gb, "import-cpu-s/GB")
	b.ReportMetric(shaCPU.Seconds()/gb, "sha256-cpu-s/GB")
}
