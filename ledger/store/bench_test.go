//go:build unix

package store

import (
	"syscall"
	"testing"
	"time"
)

// BenchmarkPutBlocks: per block, in batches of 1000 entry-sized blocks with
// one sync per batch (the ledger's write path).
func BenchmarkPutBlocks(b *testing.B) {
	s, err := Open(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	bs := make([]Block, 0, 1000)
	var ru0, ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		bs = append(bs, block(i, 400))
		if len(bs) == cap(bs) || i == b.N-1 {
			if err := s.PutBlocks(bs); err != nil {
				b.Fatal(err)
			}
			bs = bs[:0]
		}
	}
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
}
