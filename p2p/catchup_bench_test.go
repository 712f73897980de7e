package p2p_test

import (
	"context"
	"crypto/ed25519"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/replica"
	"github.com/cshare/cshare/ledger/store"
	"github.com/cshare/cshare/p2p"
)

var _ p2p.CheckpointSource = (*replica.Replica)(nil)

// BenchmarkCatchUp1M: a new node joins an org whose ledger holds
// CSHARE_CHAIN_ENTRIES (default 1,000,000; the 'make bench' run sets
// fewer) real signed entries, with a checkpoint every
// CSHARE_CHECKPOINT_EVERY (default 10,000), over loopback TCP: it fetches
// the newest checkpoint (p2p.FetchCheckpoint), starts there
// (replica.JoinAt) and reaches the serving node's state hash. The serving
// node built its ledger entry by entry into its store, compacting as a
// node does (replica.CompactTo the barrier before the newest: the entries
// below go to the store's history), then was closed and opened again
// (replica.Open from the stored checkpoint) before serving. Metrics:
// join-s, datadir-MiB (the serving node's), rest-heap-MiB (the process's
// heap in use after a GC with the serving node at rest after building,
// before the restart; settledHeap), restart-s (opening its store and
// replica again), restart-rest-heap-MiB (the heap in use after a GC with
// the restarted node at rest, before the join), serve-peak-heap-MiB (the
// process's peak heap during the join: the serving node and the joiner
// together), join-peak-heap-MiB (that peak less the rest heap after the
// restart: what the join added on both sides), compact-ms (the mean time
// of one CompactTo while building, the fold's lock held).
func BenchmarkCatchUp1M(b *testing.B) {
	n := envInt(b, "CSHARE_CHAIN_ENTRIES", 1_000_000)
	every := envInt(b, "CSHARE_CHECKPOINT_EVERY", 10_000)
	ctx := context.Background()
	dir := b.TempDir()
	st, err := store.Open(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	compactS, compactions = 0, 0
	src, org := buildLedgerIn(b, st, n, every)
	want := src.StateHash()
	rest := settledHeap()
	src, restartS := restart(b, src, st, dir)
	if src.StateHash() != want {
		b.Fatal("the restarted node reached another state")
	}
	restRestart := settledHeap()
	if f := os.Getenv("CSHARE_HEAP_PROFILE"); f != "" { // where the rest heap goes
		writeHeapProfile(b, f)
	}

	h1, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableRelay())
	if err != nil {
		b.Fatal(err)
	}
	defer h1.Close()
	h2, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableRelay())
	if err != nil {
		b.Fatal(err)
	}
	defer h2.Close()
	p2p.ServeCheckpoints(h1, src)
	if err := h2.Connect(ctx, peer.AddrInfo{ID: h1.ID(), Addrs: h1.Addrs()}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var joinS, peak float64
	for i := 0; i < b.N; i++ {
		jdir := filepath.Join(b.TempDir(), strconv.Itoa(i))
		jst, err := store.Open(jdir, nil)
		if err != nil {
			b.Fatal(err)
		}
		j, err := replica.Open(jst, signer(b, 2), replica.Config{})
		if err != nil {
			b.Fatal(err)
		}
		stop := sampleHeap()
		t0 := time.Now()
		o, err := p2p.FetchCheckpoint(ctx, h2, h1.ID(), org)
		if err != nil {
			b.Fatal(err)
		}
		if err := j.JoinAt(org, replica.Offer(o)); err != nil {
			b.Fatal(err)
		}
		if j.StateHash() != want {
			b.Fatal("the joiner reached another state")
		}
		joinS += time.Since(t0).Seconds()
		peak = max(peak, float64(stop()))
		j.Close()
		_ = jst.Close()
	}
	b.StopTimer()
	b.ReportMetric(joinS/float64(b.N), "join-s")
	b.ReportMetric(float64(dirSize(b, dir))/(1<<20), "datadir-MiB")
	b.ReportMetric(float64(rest)/(1<<20), "rest-heap-MiB")
	b.ReportMetric(restartS, "restart-s")
	if compactions > 0 {
		b.ReportMetric(1000*compactS/float64(compactions), "compact-ms")
	}
	b.ReportMetric(float64(restRestart)/(1<<20), "restart-rest-heap-MiB")
	b.ReportMetric(peak/(1<<20), "serve-peak-heap-MiB")
	b.ReportMetric((peak-float64(restRestart))/(1<<20), "join-peak-heap-MiB")
}

// restart closes r and the store of dir under it and opens both again,
// and reports the seconds the opening took.
func restart(tb testing.TB, r *replica.Replica, st *store.Store, dir string) (*replica.Replica, float64) {
	r.Close()
	if err := st.Close(); err != nil {
		tb.Fatal(err)
	}
	t0 := time.Now()
	st, err := store.Open(dir, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	again, err := replica.Open(st, signer(tb, 1), replica.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(again.Close)
	return again, time.Since(t0).Seconds()
}

func envInt(tb testing.TB, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	k, err := strconv.Atoi(v)
	if err != nil || k < 1 {
		tb.Fatalf("%s=%q: want a positive whole number", name, v)
	}
	return k
}

func signer(tb testing.TB, seed byte) *ledger.Signer {
	var s [32]byte
	s[0] = seed
	k, err := crypto.UnmarshalEd25519PrivateKey(ed25519.NewKeyFromSeed(s[:]))
	if err != nil {
		tb.Fatal(err)
	}
	sg, err := ledger.NewSigner(k)
	if err != nil {
		tb.Fatal(err)
	}
	return sg
}

// buildLedger opens a replica in dir whose ledger is a genesis and n org
// key rotations by its owner, each naming the one before, stored and
// folded in chunks, with a checkpoint written every `every` entries; after
// each, the Log is compacted to the barrier before it, as a node does.
func buildLedger(tb testing.TB, dir string, n, every int) (*replica.Replica, string) {
	st, err := store.Open(dir, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	r, org := buildLedgerIn(tb, st, n, every)
	tb.Cleanup(r.Close)
	return r, org
}

// compactS and compactions are the time buildLedgerIn spent in CompactTo
// and how many times it called it.
var (
	compactS    float64
	compactions int
)

// buildLedgerIn is buildLedger in store st, which the caller closes (after
// closing the replica).
func buildLedgerIn(tb testing.TB, st *store.Store, n, every int) (*replica.Replica, string) {
	s := signer(tb, 1)
	r, err := replica.Open(st, s, replica.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	g, err := r.Write(ctx, ledger.KindGenesis, ledger.Genesis{Name: "big", OrgKeyID: "k", Settings: ledger.DefaultSettings()})
	if err != nil {
		tb.Fatal(err)
	}
	org := g.CID().String()
	last, written := g, 1
	for written < n {
		k := min(every-1, n-written)
		chunk := make([]*ledger.Entry, 0, k)
		for range k {
			e, err := s.Sign(org, ledger.KindOrgKey, ledger.OrgKey{KeyID: "k" + strconv.Itoa(written)}, []cid.Cid{last.CID()}, last.Clock, int64(1+written))
			if err != nil {
				tb.Fatal(err)
			}
			chunk = append(chunk, e)
			last = e
			written++
		}
		if err := r.Import(chunk); err != nil {
			tb.Fatal(err)
		}
		if written < n {
			if last, err = r.WriteCheckpoint(ctx); err != nil {
				tb.Fatal(err)
			}
			written++
			if _, top := r.Start(); top > 1 {
				t0 := time.Now()
				if err := r.CompactTo(top - 1); err != nil {
					tb.Fatal(err)
				}
				compactS += time.Since(t0).Seconds()
				compactions++
			}
		}
	}
	return r, org
}

func writeHeapProfile(tb testing.TB, path string) {
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		tb.Fatal(err)
	}
}

// settledHeap is the heap in use after a GC once it has settled: the
// store's allocator pool (Badger's, ristretto's z.AllocatorPool) keeps the
// buffers of finished table builds, tens of MiB each, and lets one go
// every 2 s while none is asked for; a restarted store's first compactions
// fill it. Settled: three samples 2.5 s apart within 2 % of each other;
// at most two minutes, then the least sample.
func settledHeap() uint64 {
	runtime.GC()
	least := heapInUse()
	window := []uint64{least}
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); {
		time.Sleep(2500 * time.Millisecond)
		runtime.GC()
		h := heapInUse()
		least = min(least, h)
		if window = append(window, h); len(window) > 3 {
			window = window[1:]
		}
		lo, hi := slices.Min(window), slices.Max(window)
		if len(window) == 3 && hi <= lo+lo/50 {
			return h
		}
	}
	return least
}

func heapInUse() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// sampleHeap samples the heap in use every 10 ms until the returned stop,
// which gives the highest sample.
func sampleHeap() (stop func() uint64) {
	var peak atomic.Uint64
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			if h := heapInUse(); h > peak.Load() {
				peak.Store(h)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 {
		close(done)
		<-finished
		if h := heapInUse(); h > peak.Load() {
			peak.Store(h)
		}
		return peak.Load()
	}
}

func dirSize(tb testing.TB, dir string) int64 {
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			total += info.Size()
		}
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return total
}
