package node

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/runtime"
	"github.com/cshare/cshare/runtime/hw"
)

// catchUpEntries is the size of BenchmarkCatchUp's ledger (issue 2: 100,000);
// CSHARE_BENCH_ENTRIES overrides it for quick runs.
func catchUpEntries() int {
	if s := os.Getenv("CSHARE_BENCH_ENTRIES"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			return n
		}
	}
	return 100_000
}

// buildLedger writes, with signers directly (no API), a ledger of about
// total entries into node a, which has just created its org: a second
// machine registers and is approved, a job is submitted, and the rest are
// job.results batches by both machines on two interleaved branches that
// merge now and then, as concurrent writers make them.
func buildLedger(tb testing.TB, a *Node, total int) {
	tb.Helper()
	org := a.rep.Org()
	key, err := a.orgs.OrgKey(context.Background(), false)
	if err != nil {
		tb.Fatal(err)
	}
	tok, err := ledger.ParseToken(key.Key)
	if err != nil {
		tb.Fatal(err)
	}
	mk, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		tb.Fatal(err)
	}
	m, err := ledger.NewSigner(mk)
	if err != nil {
		tb.Fatal(err)
	}
	now := time.Now().UnixMilli()
	heads, clock := heads(a)
	total -= entryCount(a)
	var es []*ledger.Entry
	add := func(s *ledger.Signer, kind string, payload any, parents []*ledger.Entry) *ledger.Entry {
		var ps []cid.Cid
		var pc uint64
		if len(parents) == 0 {
			ps, pc = heads, clock
		}
		for _, p := range parents {
			ps = append(ps, p.CID())
			pc = max(pc, p.Clock)
		}
		e, err := s.Sign(org, kind, payload, ps, pc, now+int64(len(es)))
		if err != nil {
			tb.Fatal(err)
		}
		es = append(es, e)
		return e
	}
	reg := add(m, ledger.KindMachineReg, ledger.MachineRegister{Name: "m", Cap: tok.Cap}, nil)
	appr := add(a.signer, ledger.KindMachineApprove, ledger.MachineRef{Machine: m.ID().String()}, []*ledger.Entry{reg})
	items := min(total, ledger.MaxJobItems) // every result completes an item
	job := add(a.signer, ledger.KindJobSubmit, ledger.JobSpec{Driver: "docker", Image: "x", Cmd: []string{"true"},
		RangeStart: 1, RangeEnd: int64(items), Priority: 1, CPUs: 1}, []*ledger.Entry{appr})
	jobID := ledger.JobIDFor(job)
	tipA, tipM := job, job
	for i := 0; len(es) < total; i++ {
		item := int64(i%items) + 1
		rs := ledger.JobResults{Job: jobID, Results: []ledger.ItemResult{{Item: item, Code: 0, DurationMS: 1000, OutputSize: 42, Instance: "bench"}}}
		switch {
		case i%64 == 63: // a merge: both branches as parents
			tipA = add(a.signer, ledger.KindJobResults, rs, []*ledger.Entry{tipA, tipM})
			tipM = tipA
		case i%2 == 0:
			tipA = add(a.signer, ledger.KindJobResults, rs, []*ledger.Entry{tipA})
		default:
			tipM = add(m, ledger.KindJobResults, rs, []*ledger.Entry{tipM})
		}
	}
	before := entryCount(a)
	if err := a.importEntries(es); err != nil {
		tb.Fatal(err)
	}
	if got := entryCount(a); got < before+len(es) {
		tb.Fatalf("node A holds %d entries, want at least %d", got, before+len(es))
	}
}

// BenchmarkCatchUp: node A holds a ledger of catchUpEntries() entries; a
// fresh node B joins with A's org key and so fetches, verifies, stores and
// folds all of it from A over loopback (issue 2; target: at most 15 s).
// Reported as s/op: the Join call alone, node start-up excluded.
func BenchmarkCatchUp(b *testing.B) {
	total := catchUpEntries()
	a, err := Start(context.Background(), Options{DataDir: b.TempDir(), API: "127.0.0.1:0", Listen: []string{"/ip4/127.0.0.1/tcp/0"}, DisableMDNS: true,
		HeartbeatInterval: time.Second, Name: "a", NVML: hw.NoNVML{}, Driver: runtime.NewFake()})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	key, err := a.orgs.CreateOrg(context.Background(), api.OrgCreate{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	// No checkpoint below the ledger's size: node B fetches and folds every
	// entry, as before checkpoints (a join from a checkpoint is
	// BenchmarkCatchUp1M's).
	if _, err := a.orgs.SetSettings(context.Background(), api.SettingsRequest{Set: map[string]string{
		"ledger.checkpoint_every": strconv.Itoa(ledger.MaxCheckpointEvery)}}); err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	buildLedger(b, a, total)
	want := entryCount(a)
	b.Logf("node A: %d entries built and imported in %v", want, time.Since(t0).Round(time.Millisecond))
	b.ResetTimer()
	var secs, cpu float64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		nb, err := Start(context.Background(), Options{DataDir: b.TempDir(), API: "127.0.0.1:0", Listen: []string{"/ip4/127.0.0.1/tcp/0"}, DisableMDNS: true,
			HeartbeatInterval: time.Second, Name: fmt.Sprintf("b%d", i), NVML: hw.NoNVML{}, Driver: runtime.NewFake()})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		var stop func() // CSHARE_BENCH_JOINPROFILE=FILE: FILE.i, the CPU profile of join i alone
		if f := os.Getenv("CSHARE_BENCH_JOINPROFILE"); f != "" {
			stop = startProfile(b, fmt.Sprintf("%s.%d", f, i))
		}
		start, cpu0 := time.Now(), processCPU()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		_, err = nb.orgs.Join(ctx, api.JoinRequest{OrgKey: key.Key})
		cancel()
		d := time.Since(start)
		cpu += (processCPU() - cpu0).Seconds()
		if stop != nil {
			stop()
		}
		b.StopTimer()
		if err != nil {
			b.Fatalf("join: %v", err)
		}
		if got := entryCount(nb); got < want { // and its own registration
			b.Fatalf("node B holds %d entries after joining, want at least %d", got, want)
		}
		secs += d.Seconds()
		_ = nb.Close()
		b.StartTimer()
	}
	b.ReportMetric(secs/float64(b.N), "s/op")
	b.ReportMetric(cpu/float64(b.N), "cpu-s/op") // both nodes' (one process), and the GC's
	b.ReportMetric(float64(want)*float64(b.N)/secs, "entries/s")
}
