package p2p

import (
	"context"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"
)

// BenchmarkHeartbeatPropagation: 50 nodes in one process on 127.0.0.1 (TCP,
// Noise, yamux, real validators and peer scoring), each dialling 6 random
// others. Each iteration one node, in turn, publishes a heartbeat; the
// iteration ends when all 49 others have accepted and delivered it. Reports
// the p50, p99 and max of that time, and the CPU time per round.
//
//	go test -run '^$' -bench HeartbeatPropagation -benchtime 500x ./p2p/
func BenchmarkHeartbeatPropagation(b *testing.B) {
	const n = 50
	_, orgs := ptMesh(b, n, 6, 42)

	var mu sync.Mutex
	var want string // PlanHash of the heartbeat of this round
	got := 0
	done := make(chan struct{}, 1)
	for _, o := range orgs {
		self := o.h.ID().String()
		o.OnHeartbeat(func(hb Heartbeat) {
			if hb.Machine == self {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if hb.PlanHash == want {
				got++
				if got == n-1 {
					done <- struct{}{}
				}
			}
		})
	}
	ctx := context.Background()
	round := func(i int) (time.Duration, bool) {
		tag := "round-" + strconv.Itoa(i)
		mu.Lock()
		want, got = tag, 0
		mu.Unlock()
		start := time.Now()
		if err := orgs[i%n].PublishHeartbeat(ctx, Heartbeat{PlanHash: tag, Interval: 30000}); err != nil {
			b.Fatal(err)
		}
		select {
		case <-done:
			return time.Since(start), true
		case <-time.After(5 * time.Second):
			return 0, false
		}
	}
	// Warm up until the mesh has formed: n consecutive rounds under 100 ms.
	i := 0
	deadline := time.Now().Add(60 * time.Second)
	for ok := 0; ok < n; i++ {
		if time.Now().After(deadline) {
			b.Fatal("mesh did not form")
		}
		if d, complete := round(i); complete && d < 100*time.Millisecond {
			ok++
		} else {
			ok = 0
		}
	}
	var lat []time.Duration
	cpu0 := ptCPUTime()
	for b.Loop() {
		d, ok := round(i)
		if !ok {
			b.Fatalf("round %d: not all nodes got the heartbeat within 5s", i)
		}
		lat = append(lat, d)
		i++
	}
	cpu := ptCPUTime() - cpu0
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(p float64) float64 {
		return float64(lat[int(p*float64(len(lat)-1)+0.5)].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
	// CPU time of the whole process (all 50 nodes, incl. their background
	// GossipSub work) per round: what the latency figures cost on 1 machine.
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(len(lat)), "cpu-ms/op")
}
