package ledger

import (
	"crypto/ed25519"
	"fmt"
	"testing"

	"github.com/cshare/cshare/ledger/store"
)

// BenchmarkEd25519Verify is the floor: one stdlib Ed25519 verification of an
// entry-sized message on one core.
func BenchmarkEd25519Verify(b *testing.B) {
	a := newActor(b, 1)
	msg := make([]byte, 400)
	for i := range msg {
		msg[i] = byte(i)
	}
	sig := ed25519.Sign(a.s.priv, msg)
	pub := ed25519.PublicKey(a.s.pub)
	b.ReportAllocs()
	b.ResetTimer()
	stop := cpuClock(b)
	for i := 0; i < b.N; i++ {
		if !ed25519.Verify(pub, msg, sig) {
			b.Fatal("verify failed")
		}
	}
	stop()
}

// cpuClock starts a CPU clock; calling the result stops it and reports, besides
// ns/op (wall time), cpu-ns/op: the CPU time the process used (user+system,
// all threads, so Badger's goroutines count) per op. On a shared, loaded
// machine wall time also measures the neighbours; CPU time is the stable
// figure to compare (a sync's wait for the disk is not in it).
func cpuClock(b *testing.B) (stop func()) {
	start := cpuNow()
	return func() {
		if start > 0 {
			b.ReportMetric(float64((cpuNow()-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
		}
	}
}

const (
	benchItemsPerEntry = 4
	benchItemsPerJob   = 100_000
	benchStoreBatch    = 1000
)

// benchLedger builds an org with an approved machine and n encoded entries
// that follow it: job.results batches from the machine (one job.submit by the
// owner whenever the current job is used up), each entry's parent the previous
// head.
func benchLedger(b testing.TB, n int) (setup []*Entry, raws [][]byte) {
	owner, mach := newActor(b, 1), newActor(b, 2)
	var t int64 = 1_700_000_000_000
	gen := sign(b, owner, "", KindGenesis, Genesis{Name: "bench", OrgKeyID: "k1", Settings: DefaultSettings()}, t)
	org := gen.CID().String()
	inv := owner.s.SignCapability(Capability{Org: org, Kind: CapInvite, ID: "inv", Role: RoleMember})
	wit := owner.s.SignWitness(inv, mach.id, t)
	reg := sign(b, mach, org, KindMachineReg, MachineRegister{Name: "m", Cap: inv, Witness: &wit}, t, gen)
	setup = []*Entry{gen, reg}
	head := reg
	var job string
	item := int64(benchItemsPerJob)
	for len(raws) < n {
		t++
		var e *Entry
		if item+benchItemsPerEntry > benchItemsPerJob {
			e = sign(b, owner, org, KindJobSubmit, JobSpec{Driver: "exec", Cmd: []string{"sh", "-c", "work $ITEM"},
				RangeStart: 1, RangeEnd: benchItemsPerJob, Priority: 5, CPUs: 1, Nonce: []byte(fmt.Sprint(t))}, t, head)
			job, item = JobIDFor(e), 1
		} else {
			p := JobResults{Job: job}
			for k := 0; k < benchItemsPerEntry; k++ {
				p.Results = append(p.Results, ItemResult{Item: item, Code: 0, DurationMS: 1234 + item, OutputSize: 5678,
					Instance: "0123456789abcdef"})
				item++
			}
			e = sign(b, mach, org, KindJobResults, p, t, head)
		}
		raws = append(raws, e.Bytes())
		head = e
	}
	return setup, raws
}

// BenchmarkLedgerApply measures the whole write path of one entry received
// from a peer: decode and verify it from bytes, add it to the Log (fold), and
// store it in Badger in batches of 1000 with one sync per batch.
func BenchmarkLedgerApply(b *testing.B) {
	setup, raws := benchLedger(b, b.N)
	st, err := store.Open(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	l := NewLog()
	for _, e := range setup {
		if ae, err := l.Add(e); err != nil || ae != nil {
			b.Fatal(ae, err)
		}
	}
	batch := make([]store.Block, 0, benchStoreBatch)
	b.ReportAllocs()
	b.ResetTimer()
	stop := cpuClock(b)
	for i := 0; i < b.N; i++ {
		e, err := Decode(raws[i])
		if err != nil {
			b.Fatal(err)
		}
		if ae, err := l.Add(e); err != nil || ae != nil {
			b.Fatal(i, ae, err)
		}
		batch = append(batch, store.Block{CID: e.CID(), Data: e.Bytes()})
		if len(batch) == benchStoreBatch || i == b.N-1 {
			if err := st.PutBlocks(batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	stop()
	b.StopTimer()
	if got := l.Len(); got != b.N+len(setup) {
		b.Fatalf("log has %d entries, want %d", got, b.N+len(setup))
	}
}
