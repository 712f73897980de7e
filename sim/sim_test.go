package sim

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cshare/cshare/internal/cputime"
	"github.com/cshare/cshare/ledger"
)

// TestSimSmoke: a 50-machine org at rest, then running a 100-item job,
// every machine verifying every message itself and 3 folding with a
// ledger.Log: every heartbeat, heads
// announcement and ledger entry reaches every machine, no slot takes an
// item another took, every machine sees the job done, and nothing is
// rejected.
func TestSimSmoke(t *testing.T) {
	r, err := Run(Config{Machines: 50, Interval: 2 * time.Second, Rest: 2 * time.Second, JobItems: 100, ItemTime: time.Second,
		Folders: 3, VerifyAll: true, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := r.Write(&b); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + b.String())
	if len(r.Windows) != 2 {
		t.Fatalf("%d windows, want rest and job", len(r.Windows))
	}
	for _, w := range r.Windows {
		if w.Heartbeats == 0 || w.HeartbeatsToAll != w.Heartbeats || w.AnnouncementsToAll != w.Announcements || w.EntriesToAll != w.Entries {
			t.Errorf("%s: %d of %d heartbeats, %d of %d announcements, %d of %d entries reached every machine", w.Name,
				w.HeartbeatsToAll, w.Heartbeats, w.AnnouncementsToAll, w.Announcements, w.EntriesToAll, w.Entries)
		}
		if w.SentMsgs.Mean <= 0 || w.RecvBytes.Mean <= 0 {
			t.Errorf("%s: no traffic measured", w.Name)
		}
	}
	if job := r.Windows[1]; job.Entries < 20 {
		t.Errorf("the job wrote %d entries; its results alone need more", job.Entries)
	}
	if r.JobEntryReach <= 0 || r.JobAllDone <= 0 || r.JobAllDone < r.JobFirstDone {
		t.Errorf("job entry reached all in %s; done %s .. %s", r.JobEntryReach, r.JobFirstDone, r.JobAllDone)
	}
	if r.ItemsRunTwice != 0 || r.Rejected != 0 {
		t.Errorf("%d items run twice, %d messages rejected", r.ItemsRunTwice, r.Rejected)
	}
}

// TestSimDeterministic: one seed, one run.
func TestSimDeterministic(t *testing.T) {
	cfg := Config{Machines: 12, Interval: 2 * time.Second, JobItems: 60, ItemTime: time.Second, Seed: 3}
	a, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if a.Events != b.Events || a.JobAllDone != b.JobAllDone || a.Windows[1].SentBytes != b.Windows[1].SentBytes {
		t.Fatalf("two runs differ: %d/%d events, done %s/%s", a.Events, b.Events, a.JobAllDone, b.JobAllDone)
	}
}

// TestConfigRefused: a config out of range is refused, naming the field.
func TestConfigRefused(t *testing.T) {
	for _, c := range []Config{{Machines: 1}, {Machines: 3, Slots: 65}, {Machines: 3, D: 4, Dhi: 3}, {Machines: 3, Folders: 4}} {
		if _, err := Run(c); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}

// BenchmarkOrg simulates an org of CSHARE_SIM_MACHINES machines (default
// 50) at rest and under a job of CSHARE_SIM_ITEMS items (default 10 a
// machine: 10,000 for 1,000; -1: no job),
// and reports per machine and second what it sends at rest and under the
// job, and the time the job's entry takes to reach every machine. The
// figures in docs/scale.md:
//
//	CSHARE_SIM_MACHINES=1000 go test -run '^$' -bench Org -benchtime 1x -timeout 2h ./sim/
//
// CSHARE_SIM_D=6 uses GossipSub's default mesh (6, 5..12, lazy 6) and
// publishes to the mesh only; CSHARE_SIM_FOLDERS sets Config.Folders.
func BenchmarkOrg(b *testing.B) {
	machines := envInt(b, "CSHARE_SIM_MACHINES", 50)
	cfg := Config{Machines: machines, JobItems: envInt(b, "CSHARE_SIM_ITEMS", 10*machines),
		Folders: envInt(b, "CSHARE_SIM_FOLDERS", 0), Seed: 1}
	if envInt(b, "CSHARE_SIM_D", 0) == 6 {
		cfg.D, cfg.Dlo, cfg.Dhi, cfg.Dlazy, cfg.MeshPublish = 6, 5, 12, 6, true
	}
	start := time.Now()
	cfg.Progress = func(now time.Duration, events int) {
		fmt.Fprintf(os.Stderr, "sim: virtual %s, %d events, wall %s\n", now.Round(time.Second), events, time.Since(start).Round(time.Second))
	}
	var r *Report
	cpu0, wall0 := cputime.Now(), time.Now()
	for b.Loop() {
		var err error
		if r, err = Run(cfg); err != nil {
			b.Fatal(err)
		}
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	var out strings.Builder
	if err := r.Write(&out); err != nil {
		b.Fatal(err)
	}
	// To stderr: the testing package cuts a benchmark's log short.
	fmt.Fprintf(os.Stderr, "wall %s, cpu %s, heap in use %d MiB\n%s", time.Since(wall0).Round(time.Second), (cputime.Now() - cpu0).Round(time.Second), ms.HeapInuse>>20, out.String())
	for _, w := range r.Windows {
		b.ReportMetric(w.SentMsgs.Mean, w.Name+"-sent-msgs/s")
		b.ReportMetric(w.SentBytes.Mean/1e3, w.Name+"-sent-KB/s")
		b.ReportMetric(w.RecvBytes.Mean/1e3, w.Name+"-recv-KB/s")
	}
	b.ReportMetric(r.JobEntryReach.Seconds()*1e3, "job-entry-reach-ms")
}

func envInt(tb testing.TB, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		tb.Fatalf("%s: %q is not an integer", name, v)
	}
	return n
}

// BenchmarkChecks is what one machine spends on the first copy of a message
// (the checks every machine runs): a heartbeat at rest, one listing 8
// running instances and 8 finished items, and a heads announcement pushing
// a job.results entry (with the fold's decoding of that entry). The
// simulation's Config.CostHeartbeat and CostHeads defaults come from here.
func BenchmarkChecks(b *testing.B) {
	cfg := Config{Machines: 4, Seed: 1}
	if err := cfg.defaults(); err != nil {
		b.Fatal(err)
	}
	w := &world{cfg: cfg, rng: rand.New(rand.NewPCG(1, 2)), t0: time.UnixMilli(1_700_000_000_000),
		byID: map[string]int32{}, byPtr: map[*byte]int32{}, byCID: map[string]int32{}}
	if err := w.setup(); err != nil {
		b.Fatal(err)
	}
	m := w.ms[1]
	w.submitJob()
	hb := func(busy bool) []byte {
		if busy {
			for _, s := range m.slots {
				s.active, s.kind, s.item, s.inst = true, "secondary", int64(100+s.n), "0123456789abcdef"
			}
			m.results = make([]ledger.ItemResult, 8)
			for i := range m.results {
				m.results[i] = ledger.ItemResult{Item: int64(200 + i), Instance: "0123456789abcdef"}
			}
		}
		w.beat(m)
		return w.msgs[len(w.msgs)-1].data
	}
	rest, busy := hb(false), hb(true)
	if _, err := w.write(m, ledger.KindJobResults, ledger.JobResults{Job: w.job.id, Results: m.results}); err != nil {
		b.Fatal(err)
	}
	heads := w.msgs[len(w.msgs)-1].data
	for _, c := range []struct {
		name  string
		data  []byte
		check func([]byte) error
	}{
		{"heartbeat-rest", rest, func(d []byte) error { _, err := w.checkHeartbeat(d); return err }},
		{"heartbeat-busy", busy, func(d []byte) error { _, err := w.checkHeartbeat(d); return err }},
		{"heads+results", heads, func(d []byte) error { _, err := w.checkHeads(d); return err }},
	} {
		b.Run(c.name, func(b *testing.B) {
			cpu := cputime.Now()
			for b.Loop() {
				if err := c.check(c.data); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((cputime.Now()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(len(c.data)), "bytes")
		})
	}
}
