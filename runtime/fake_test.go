package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestFakeLifecycle(t *testing.T) {
	ctx := context.Background()
	f := NewFake()
	var hooked atomic.Int32
	f.OnStart(func(s Spec) { hooked.Add(1) })

	s := validSpec()
	s.NanoCPUs, s.MemoryReservationBytes = 2e9, 64<<20
	s.GPUUUIDs = []string{"GPU-recorded-0"}
	id, err := f.Start(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if hooked.Load() != 1 {
		t.Errorf("OnStart called %d times, want 1", hooked.Load())
	}
	if got, _ := f.Spec(id); got.Job != s.Job || got.Item != s.Item {
		t.Errorf("Spec(%s) = %+v", id, got)
	}
	runs, _ := f.List(ctx, map[string]string{LabelJob: "job"})
	if len(runs) != 1 || !runs[0].Running || runs[0].Labels[LabelItem] != "1" || strings.Join(GPUsOf(runs[0].Labels), ",") != "GPU-recorded-0" {
		t.Fatalf("List = %+v, want one running run with item 1 holding GPU-recorded-0", runs)
	}
	if st, _ := f.Stats(ctx, id); st.CPUPercent != 200 || st.MemoryBytes != 64<<20 {
		t.Errorf("Stats = %+v", st)
	}
	if err := f.Remove(ctx, id); !errors.Is(err, ErrRunning) {
		t.Errorf("Remove(running) = %v, want ErrRunning", err)
	}
	if err := f.Complete(id, 3); err != nil {
		t.Fatal(err)
	}
	es, err := f.Wait(ctx, id)
	if err != nil || es.Code != 3 {
		t.Fatalf("Wait = %+v, %v; want code 3", es, err)
	}
	if err := f.Complete(id, 9); err != nil {
		t.Fatal(err)
	}
	if es, _ := f.Wait(ctx, id); es.Code != 3 {
		t.Errorf("second Complete changed the code to %d", es.Code)
	}
	runs, _ = f.List(ctx, nil)
	if len(runs) != 1 || runs[0].Running || runs[0].ExitCode != 3 {
		t.Fatalf("List after exit = %+v", runs)
	}
	if logs, _ := f.Logs(ctx, id); len(logs) == 0 {
		t.Error("Logs empty")
	}
	if err := f.Remove(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Wait(ctx, id); !errors.Is(err, ErrNotFound) {
		t.Errorf("Wait(removed) = %v, want ErrNotFound", err)
	}
	if err := f.Complete("nope", 0); !errors.Is(err, ErrNotFound) {
		t.Errorf("Complete(unknown) = %v, want ErrNotFound", err)
	}
}

func TestFakeStopAndDurations(t *testing.T) {
	ctx := context.Background()
	f := NewFake()
	a, _ := f.Start(ctx, validSpec())
	b, _ := f.Start(ctx, validSpec())
	if err := f.Stop(ctx, a, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Stop(ctx, b, time.Second); err != nil {
		t.Fatal(err)
	}
	if es, _ := f.Wait(ctx, a); es.Code != 137 {
		t.Errorf("killed run code = %d, want 137", es.Code)
	}
	if es, _ := f.Wait(ctx, b); es.Code != 143 {
		t.Errorf("terminated run code = %d, want 143", es.Code)
	}

	f.SetDuration(0)
	c, _ := f.Start(ctx, validSpec())
	if runs := f.Running(); len(runs) != 0 {
		t.Errorf("duration 0: running = %v, want none", runs)
	}
	if es, err := f.Wait(ctx, c); err != nil || es.Code != 0 {
		t.Errorf("duration 0: Wait = %+v, %v", es, err)
	}

	f.SetStartError(&ImageError{Image: "x:1", Err: errors.New("boom")})
	if _, err := f.Start(ctx, validSpec()); !errors.Is(err, ErrImageNotFound) {
		t.Errorf("Start with start error = %v", err)
	}
	f.SetStartError(nil)
	bad := validSpec()
	bad.Network = "host"
	if _, err := f.Start(ctx, bad); !errors.Is(err, ErrInvalidSpec) {
		t.Errorf("Start(host network) = %v, want ErrInvalidSpec", err)
	}
}

func TestFakeDurationTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		f := NewFake()
		f.SetDuration(time.Hour)
		start := time.Now()
		id, _ := f.Start(ctx, validSpec())
		short, cancel := context.WithTimeout(ctx, 30*time.Minute)
		defer cancel()
		if _, err := f.Wait(short, id); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Wait before the duration = %v, want deadline exceeded", err)
		}
		es, err := f.Wait(ctx, id)
		if err != nil || es.Code != 0 {
			t.Fatalf("Wait = %+v, %v", es, err)
		}
		if el := time.Since(start); el != time.Hour {
			t.Errorf("run took %v of fake time, want 1h", el)
		}
	})
}

func TestFakeConcurrent(t *testing.T) {
	ctx := context.Background()
	f := NewFake()
	var hooked atomic.Int64
	f.OnStart(func(Spec) { hooked.Add(1) })
	f.SetDuration(time.Millisecond)

	const workers, perWorker = 8, 50
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				s := validSpec()
				s.Instance = fmt.Sprintf("inst-%d", w)
				s.Item = i
				id, err := f.Start(ctx, s)
				if err != nil {
					errs <- err
					return
				}
				switch i % 3 {
				case 0:
					_ = f.Complete(id, i%7)
				case 1:
					_ = f.Stop(ctx, id, 0)
				}
				if _, err := f.List(ctx, map[string]string{LabelInstance: s.Instance}); err != nil {
					errs <- err
					return
				}
				wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				_, err = f.Wait(wctx, id)
				cancel()
				if err != nil {
					errs <- fmt.Errorf("wait %s: %w", id, err)
					return
				}
				if _, err := f.Logs(ctx, id); err != nil {
					errs <- err
					return
				}
				if i%2 == 0 {
					if err := f.Remove(ctx, id); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := hooked.Load(); got != workers*perWorker {
		t.Errorf("OnStart called %d times, want %d", got, workers*perWorker)
	}
	if f.Started() != workers*perWorker {
		t.Errorf("Started() = %d", f.Started())
	}
	runs, _ := f.List(ctx, nil)
	if want := workers * perWorker / 2; len(runs) != want {
		t.Errorf("List = %d runs, want %d (the unremoved ones)", len(runs), want)
	}
	for _, r := range runs {
		if r.Running {
			t.Errorf("run %s still running", r.ID)
		}
	}
}

func BenchmarkFakeStartWait(b *testing.B) {
	ctx := context.Background()
	f := NewFake()
	f.SetDuration(0)
	s := validSpec()
	for b.Loop() {
		id, err := f.Start(ctx, s)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.Wait(ctx, id); err != nil {
			b.Fatal(err)
		}
		_ = f.Remove(ctx, id)
	}
}
