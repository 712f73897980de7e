package ledger

import (
	"crypto/ed25519"
	"fmt"
	"testing"

	"github.com/cshare/cshare/internal/cputime"
	"github.com/cshare/cshare/internal/edkey"
	"github.com/cshare/cshare/ledger/store"
)

// BenchmarkEd25519Verify is the floor: one verification of an entry-sized
// message as Decode checks an entry's signature (curve25519-voi, the key
// expanded and cached: edkey.VerifyCofactored), on one core.
func BenchmarkEd25519Verify(b *testing.B) {
	a := newActor(b, 1)
	msg := make([]byte, 400)
	for i := range msg {
		msg[i] = byte(i)
	}
	sig := ed25519.Sign(a.s.priv, msg)
	k, err := edkey.Of(a.s.pub)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	stop := cpuClock(b)
	for i := 0; i < b.N; i++ {
		if !k.VerifyCofactored(msg, sig) {
			b.Fatal("verify failed")
		}
	}
	stop()
}

// BenchmarkEd25519VerifyStdlib is one crypto/ed25519 verification of the
// same message, for reference.
func BenchmarkEd25519VerifyStdlib(b *testing.B) {
	a := newActor(b, 1)
	msg := make([]byte, 400)
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
	start := cputime.Now()
	return func() {
		if start > 0 {
			b.ReportMetric(float64((cputime.Now()-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
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

// BenchmarkLedgerApply measures the whole write path of entries received
// from a peer in batches of 1000, as a sync answer or a catch-up brings
// them: decode and verify them from bytes (DecodeBatch: one signature batch),
// add them to the Log (one fold), and store them in Badger with one sync.
// ns/op is per entry.
func BenchmarkLedgerApply(b *testing.B) {
	benchApply(b, benchStoreBatch)
}

// BenchmarkLedgerApplyOne is BenchmarkLedgerApply for entries that arrive
// one at a time (pushed in a heads announcement): Decode and Add each
// entry, still storing them 1000 at a time.
func BenchmarkLedgerApplyOne(b *testing.B) {
	benchApply(b, 1)
}

func benchApply(b *testing.B, per int) {
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
	for lo := 0; lo < b.N; lo += per {
		hi := min(lo+per, b.N)
		var es []*Entry
		if per == 1 {
			e, err := Decode(raws[lo])
			if err != nil {
				b.Fatal(err)
			}
			if ae, err := l.Add(e); err != nil || ae != nil {
				b.Fatal(lo, ae, err)
			}
			es = []*Entry{e}
		} else {
			var errs []error
			es, errs = DecodeBatch(raws[lo:hi])
			for i, err := range errs {
				if err != nil {
					b.Fatal(lo+i, err)
				}
			}
			aes, err := l.AddBatch(es)
			if err != nil {
				b.Fatal(lo, err)
			}
			for i, ae := range aes {
				if ae != nil {
					b.Fatal(lo+i, ae)
				}
			}
		}
		for _, e := range es {
			batch = append(batch, store.Block{CID: e.CID(), Data: e.Bytes()})
		}
		if len(batch) >= benchStoreBatch || hi == b.N {
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
