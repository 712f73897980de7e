package sim

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/cshare/cshare/internal/cputime"
	"github.com/cshare/cshare/p2p"
)

// BenchmarkMocknetFit measures what go-libp2p's mocknet with real GossipSub
// (cshare's parameters: D 2-3, flood publishing, no envelope signatures, the
// real heartbeat validator) costs this machine per host, in real time: the
// heap after the mesh forms, goroutines, and CPU while every host publishes
// a signed heartbeat every 30 s. It is how the 1,000-machine simulation
// chose its transport (docs/scale.md). Opt-in, since it runs in real time:
// CSHARE_MOCKNET_HOSTS=50,100,200 (default: skipped).
func BenchmarkMocknetFit(b *testing.B) {
	sizes := os.Getenv("CSHARE_MOCKNET_HOSTS")
	if sizes == "" {
		b.Skip("set CSHARE_MOCKNET_HOSTS=50,100,200 to measure (real time: about 30 s a size)")
	}
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 2 {
			b.Fatalf("CSHARE_MOCKNET_HOSTS: %q is not a host count of 2 or more", s)
		}
		b.Run(fmt.Sprintf("hosts=%d", n), func(b *testing.B) { mocknetFit(b, n) })
	}
}

func mocknetFit(b *testing.B, n int) {
	const (
		interval = 30 * time.Second
		window   = 20 * time.Second
		dial     = 32 // each host dials this many others: about 64 connections each
	)
	runtime.GC()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	g0 := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mn := mocknet.New()
	defer mn.Close()
	rng := rand.New(rand.NewPCG(uint64(n), 7))
	keys := make([]crypto.PrivKey, n)
	hosts := make([]host.Host, n)
	for i := range hosts {
		sk, _, err := crypto.GenerateEd25519Key(nil)
		if err != nil {
			b.Fatal(err)
		}
		h, err := mn.AddPeer(sk, ma.StringCast(fmt.Sprintf("/ip4/10.%d.%d.%d/tcp/4001", i>>16, (i>>8)&255, i&255)))
		if err != nil {
			b.Fatal(err)
		}
		keys[i], hosts[i] = sk, h
	}
	if err := mn.LinkAll(); err != nil {
		b.Fatal(err)
	}
	setup := time.Now()
	const org = "bafyreimocknetfitorg"
	var delivered atomic.Int64
	topics := make([]*pubsub.Topic, n)
	for i, h := range hosts {
		params := pubsub.DefaultGossipSubParams()
		params.D, params.Dlo, params.Dhi, params.Dout, params.Dscore, params.Dlazy = 2, 2, 3, 0, 1, 2
		params.GossipFactor = 0
		author, err := peer.IDFromPrivateKey(keys[(i+1)%n])
		if err != nil {
			b.Fatal(err)
		}
		ps, err := pubsub.NewGossipSub(ctx, h,
			pubsub.WithMessageIdFn(func(m *pb.Message) string { s := sha256.Sum256(m.GetData()); return string(s[:]) }),
			pubsub.WithMessageSignaturePolicy(pubsub.StrictNoSign),
			pubsub.WithMessageAuthor(author),
			pubsub.WithFloodPublish(true),
			pubsub.WithGossipSubParams(params),
			pubsub.WithValidateQueueSize(4096),
			pubsub.WithPeerOutboundQueueSize(1024))
		if err != nil {
			b.Fatal(err)
		}
		name := "/cshare/" + org + "/heartbeat"
		if err := ps.RegisterTopicValidator(name, func(_ context.Context, _ peer.ID, m *pubsub.Message) bool {
			_, err := p2p.DecodeVerifyHeartbeat(org, m.GetData())
			return err == nil
		}); err != nil {
			b.Fatal(err)
		}
		t, err := ps.Join(name)
		if err != nil {
			b.Fatal(err)
		}
		sub, err := t.Subscribe(pubsub.WithBufferSize(4096))
		if err != nil {
			b.Fatal(err)
		}
		topics[i] = t
		go func() {
			for {
				if _, err := sub.Next(ctx); err != nil {
					return
				}
				delivered.Add(1)
			}
		}()
	}
	for i := range hosts {
		for k := 0; k < min(dial, n-1); k++ {
			j := rng.IntN(n)
			if j == i {
				continue
			}
			if _, err := mn.ConnectPeers(hosts[i].ID(), hosts[j].ID()); err != nil {
				b.Fatal(err)
			}
		}
	}
	time.Sleep(3 * time.Second) // meshes form on GossipSub's 1 s heartbeat
	setupTime := time.Since(setup)
	runtime.GC()
	var m1 runtime.MemStats
	runtime.ReadMemStats(&m1)
	g1 := runtime.NumGoroutine()

	// Every host beats once per interval, staggered; measure a window.
	published := 0
	cpu0, wall0 := cputime.Now(), time.Now()
	deadline := wall0.Add(window)
	per := interval / time.Duration(n)
	seq := uint64(0)
	for i := 0; time.Now().Before(deadline); i = (i + 1) % n {
		seq++
		hb := p2p.Heartbeat{Machine: hosts[i].ID().String(), Seq: seq, Time: time.Now().UnixMilli(), Interval: interval.Milliseconds(),
			Total: p2p.Resources{Cores: 8000, MemoryMB: 32768, DiskMB: 500000, Slots: 8}, Heads: []string{"bafyreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"},
			PlanHash: strings.Repeat("ab", 32), Addrs: []string{"/ip4/10.0.0.1/tcp/4001/p2p/" + hosts[i].ID().String()}, Version: "sim", Name: fmt.Sprint("m", i)}
		if err := hb.Sign(org, keys[i]); err != nil {
			b.Fatal(err)
		}
		data, err := p2p.EncodeHeartbeat(&hb)
		if err != nil {
			b.Fatal(err)
		}
		if err := topics[i].Publish(ctx, data); err != nil {
			b.Fatal(err)
		}
		published++
		time.Sleep(per)
	}
	time.Sleep(2 * time.Second) // the last ones arrive
	wall := time.Since(wall0)
	cpu := cputime.Now() - cpu0
	want := int64(published) * int64(n)
	b.ReportMetric(float64(m1.HeapInuse-m0.HeapInuse)/float64(n)/(1<<20), "heap-MiB/host")
	b.ReportMetric(float64(g1-g0)/float64(n), "goroutines/host")
	b.ReportMetric(cpu.Seconds()/wall.Seconds(), "cpu-cores")
	b.ReportMetric(float64(delivered.Load())/float64(want), "delivered-fraction")
	b.ReportMetric(setupTime.Seconds(), "setup-s")
	b.Logf("%d hosts: %.1f MiB heap and %.0f goroutines a host; %.2f cores busy at %.1f heartbeats/s; %d of %d deliveries",
		n, float64(m1.HeapInuse-m0.HeapInuse)/float64(n)/(1<<20), float64(g1-g0)/float64(n), cpu.Seconds()/wall.Seconds(),
		float64(published)/wall.Seconds(), delivered.Load(), want)
}
