package dataset

import (
	"context"
	"crypto/rand"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// BenchmarkDatasetTransfer moves a 1 GiB dataset between hosts on loopback:
// "one" is a single fetcher, "three" is one seeder serving three fetchers at
// once (each fetcher's rate is reported). A fetch ends when every block is
// verified and stored. cpu-s/GB is the CPU time of both ends per GB moved.
func BenchmarkDatasetTransfer(b *testing.B) {
	const size = 1 << 30
	path := filepath.Join(b.TempDir(), "random")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.CopyN(f, rand.Reader, size); err != nil {
		b.Fatal(err)
	}
	f.Close()
	seed := newNode(b, all)
	res, err := Import(context.Background(), seed.bs, path, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, fetchers := range []int{1, 3} {
		name := map[int]string{1: "one", 3: "three"}[fetchers]
		b.Run(name, func(b *testing.B) {
			var total, cpu time.Duration
			var slowest float64
			for range b.N {
				b.StopTimer()
				fs := make([]*node, fetchers)
				for i := range fs {
					fs[i] = newNode(b, all)
					connect(b, fs[i].h, seed.h)
					if i == 0 {
						for _, c := range fs[i].h.Network().ConnsToPeer(seed.h.ID()) {
							b.Logf("connection over %s", c.RemoteMultiaddr())
						}
					}
				}
				b.StartTimer()
				var wg sync.WaitGroup
				rates := make([]float64, fetchers)
				errs := make([]error, fetchers)
				t0, c0 := time.Now(), cpuTime()
				for i, fn := range fs {
					wg.Add(1)
					go func() {
						defer wg.Done()
						t := time.Now()
						errs[i] = fn.x.Fetch(context.Background(), res.CID, nil)
						rates[i] = size / 1e6 / time.Since(t).Seconds()
					}()
				}
				wg.Wait()
				total += time.Since(t0)
				cpu += cpuTime() - c0
				for i, err := range errs {
					if err != nil {
						b.Fatal(err)
					}
					if slowest == 0 || rates[i] < slowest {
						slowest = rates[i]
					}
				}
				b.StopTimer()
				for _, fn := range fs {
					fn.x.Close()
					fn.h.Close()
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(size)*float64(fetchers)*float64(b.N)/1e6/total.Seconds(), "total-MB/s")
			b.ReportMetric(slowest, "slowest-fetcher-MB/s")
			b.ReportMetric(cpu.Seconds()/(float64(size)*float64(fetchers)*float64(b.N)/1e9), "cpu-s/GB")
		})
	}
}
