package sched

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/store"
	"github.com/cshare/cshare/runtime"
)

// recordsLog is write-ahead records in memory that log each call.
type recordsLog struct {
	mu     sync.Mutex
	events *[]string
	puts   [][]string // the keys of each PutRecords
}

func (r *recordsLog) PutRecord(key string, val []byte) error {
	return r.PutRecords([]store.Record{{Key: key, Val: val}})
}

func (r *recordsLog) PutRecords(recs []store.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var keys []string
	for _, x := range recs {
		keys = append(keys, x.Key)
		*r.events = append(*r.events, "put "+x.Key)
	}
	r.puts = append(r.puts, keys)
	return nil
}

func (r *recordsLog) DeleteRecords([]string) error { return nil }

func (r *recordsLog) ForEachRecord(string, func(string, []byte) error) error { return nil }

// gateDriver's Remove waits for its gate and logs the removal.
type gateDriver struct {
	runtime.Driver
	mu     *sync.Mutex
	events *[]string
	gate   chan struct{}
}

func (d gateDriver) Remove(ctx context.Context, id runtime.RunID) error {
	<-d.gate
	d.mu.Lock()
	defer d.mu.Unlock()
	*d.events = append(*d.events, "remove "+string(id))
	return nil
}

// TestRetirerRecordsBeforeRemoving: a finished run's result is written
// durably before its run is removed, the results finished meanwhile go in
// one write, and until its run is gone a result is not retired (flush
// leaves it out) and sweep leaves its run alone.
func TestRetirerRecordsBeforeRemoving(t *testing.T) {
	var events []string
	rec := &recordsLog{events: &events}
	gate := make(chan struct{})
	drv := gateDriver{Driver: runtime.NewFake(), mu: &rec.mu, events: &events, gate: gate}
	var wg sync.WaitGroup
	woken := make(chan struct{}, 16)
	r := newRetirer(context.Background(), resultLog{rec: rec, log: slog.New(slog.DiscardHandler)},
		func(fn func()) { wg.Add(1); go func() { defer wg.Done(); fn() }() },
		slog.New(slog.DiscardHandler), func() { woken <- struct{}{} })

	a := ledger.ItemResult{Item: 1, Instance: "j-s0-1", Started: 1}
	b := ledger.ItemResult{Item: 2, Instance: "j-s1-1", Started: 2}
	c := ledger.ItemResult{Item: 3, Instance: "j-s0-1", Started: 3, Code: -1, Error: "start failed"}
	r.add(retiree{job: "j", res: a, drv: drv, run: "run-a"})
	// The first batch (a) is held at its removal; b and c queue meanwhile.
	deadline := time.Now().Add(10 * time.Second)
	for {
		rec.mu.Lock()
		n := len(rec.puts)
		rec.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first result was never recorded")
		}
		time.Sleep(time.Millisecond)
	}
	r.add(retiree{job: "j", res: b, drv: drv, run: "run-b"})
	r.add(retiree{job: "j", res: c, drv: drv}) // no run: recorded, nothing to remove
	for _, x := range []ledger.ItemResult{a, b, c} {
		if r.retired("j", x) {
			t.Fatalf("result of item %d retired before its run was removed", x.Item)
		}
	}
	if !r.holds("run-a") || !r.holds("run-b") || r.holds("run-x") {
		t.Fatal("holds: want run-a and run-b held, run-x not")
	}
	close(gate)
	wg.Wait()
	for _, x := range []ledger.ItemResult{a, b, c} {
		if !r.retired("j", x) {
			t.Fatalf("result of item %d not retired after the queue drained", x.Item)
		}
	}
	if r.holds("run-a") || r.holds("run-b") {
		t.Fatal("a removed run is still held")
	}
	if len(woken) != 2 {
		t.Errorf("the scheduler was woken %d times, want once per batch (2)", len(woken))
	}
	ka, kb, kc := resultKey("j", a), resultKey("j", b), resultKey("j", c)
	want := []string{"put " + ka, "remove run-a", "put " + kb, "put " + kc, "remove run-b"}
	if len(events) != len(want) {
		t.Fatalf("events = %q, want %q", events, want)
	}
	for i := range want {
		if events[i] != want[i] {
			t.Fatalf("events = %q, want %q", events, want)
		}
	}
	if len(rec.puts) != 2 || len(rec.puts[1]) != 2 {
		t.Fatalf("record writes = %q, want [a] then [b c] in one", rec.puts)
	}
}
