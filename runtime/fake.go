package runtime

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"
)

// FakeManual, given to [Fake.SetDuration], makes runs last until the test
// calls [Fake.Complete] or [Fake.Finish] (or stops them). It is the default.
const FakeManual time.Duration = -1

// Fake is an in-memory driver for in-process mesh tests and benchmarks. Start
// records the spec and returns at once; a run finishes after the configured
// duration (see SetDuration), when the test calls Complete or Finish, or when
// it is stopped (exit 137 with grace 0, else 143, as if the command died of
// the signal). Wait, Stop, Logs, List and Remove behave like a real driver's.
// It is safe for concurrent use and never sleeps; runs with a duration finish
// on a time.AfterFunc timer, which works inside testing/synctest bubbles.
type Fake struct {
	mu       sync.Mutex
	dur      time.Duration
	onStart  func(Spec)
	startErr error
	seq      int
	runs     map[RunID]*fakeRun
	ctrs     map[RunID]*fakeContract // contract instances (fake_contracts.go)
	disk     map[RunID]int64         // SetDiskUsage
}

type fakeRun struct {
	spec       Spec
	labels     map[string]string
	running    bool
	status     ExitStatus
	startedAt  time.Time
	finishedAt time.Time
	done       chan struct{}
	timer      *time.Timer
	logs       []byte
}

var _ Driver = (*Fake)(nil)

// NewFake returns a fake driver whose runs last until completed (FakeManual).
func NewFake() *Fake {
	return &Fake{dur: FakeManual, runs: make(map[RunID]*fakeRun)}
}

// Name returns "fake".
func (f *Fake) Name() string { return "fake" }

// SetDuration sets how long runs started from now on last before exiting
// with code 0: 0 means they exit during Start, FakeManual (any negative
// value) means only Complete, Finish or Stop ends them.
func (f *Fake) SetDuration(d time.Duration) {
	f.mu.Lock()
	f.dur = d
	f.mu.Unlock()
}

// OnStart sets a hook called (outside the fake's lock) with the spec of
// every successful Start, before the run can complete.
func (f *Fake) OnStart(fn func(Spec)) {
	f.mu.Lock()
	f.onStart = fn
	f.mu.Unlock()
}

// SetStartError makes every following Start fail with err (nil to stop).
func (f *Fake) SetStartError(err error) {
	f.mu.Lock()
	f.startErr = err
	f.mu.Unlock()
}

// Start records the spec and returns the new run's ID.
func (f *Fake) Start(ctx context.Context, s Spec) (RunID, error) {
	if err := s.Validate(); err != nil {
		return "", err
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	f.mu.Lock()
	if f.startErr != nil {
		err := f.startErr
		f.mu.Unlock()
		return "", err
	}
	f.seq++
	id := RunID(fmt.Sprintf("fake-%08d", f.seq))
	r := &fakeRun{
		spec:      cloneSpec(s),
		labels:    s.Labels(),
		running:   true,
		startedAt: time.Now(),
		done:      make(chan struct{}),
		logs:      fmt.Appendf(nil, "fake run: job=%s instance=%s item=%d\n", s.Job, s.Instance, s.Item),
	}
	f.runs[id] = r
	hook, dur := f.onStart, f.dur
	f.mu.Unlock()

	if hook != nil {
		hook(cloneSpec(s))
	}
	switch {
	case dur == 0:
		f.finish(id, ExitStatus{})
	case dur > 0:
		t := time.AfterFunc(dur, func() { f.finish(id, ExitStatus{}) })
		f.mu.Lock()
		r.timer = t
		f.mu.Unlock()
	}
	return id, nil
}

// Complete makes a running run exit with code. Completing an exited run
// changes nothing.
func (f *Fake) Complete(id RunID, code int) error {
	return f.Finish(id, ExitStatus{Code: code})
}

// Finish makes a running run exit with the given status (for example
// OOMKilled). Finishing an exited run changes nothing.
func (f *Fake) Finish(id RunID, st ExitStatus) error {
	f.mu.Lock()
	_, ok := f.runs[id]
	f.mu.Unlock()
	if !ok {
		return notFound(id)
	}
	f.finish(id, st)
	return nil
}

func (f *Fake) finish(id RunID, st ExitStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.runs[id]
	if !ok || !r.running {
		return
	}
	r.running = false
	r.status = st
	r.finishedAt = time.Now()
	if r.timer != nil {
		r.timer.Stop()
	}
	close(r.done)
}

// AppendLog adds output to the run's logs.
func (f *Fake) AppendLog(id RunID, b []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.runs[id]
	if !ok {
		return notFound(id)
	}
	r.logs = append(r.logs, b...)
	return nil
}

// Spec returns the spec a run was started with.
func (f *Fake) Spec(id RunID) (Spec, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.runs[id]
	if !ok {
		return Spec{}, false
	}
	return cloneSpec(r.spec), true
}

// Started returns how many runs were started since NewFake.
func (f *Fake) Started() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seq
}

// Running returns the IDs of the runs that have not exited, in start order.
func (f *Fake) Running() []RunID {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []RunID
	for id, r := range f.runs {
		if r.running {
			out = append(out, id)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Wait blocks until the run exits or ctx ends.
func (f *Fake) Wait(ctx context.Context, id RunID) (ExitStatus, error) {
	f.mu.Lock()
	r, ok := f.runs[id]
	f.mu.Unlock()
	if !ok {
		return ExitStatus{}, notFound(id)
	}
	select {
	case <-r.done:
	case <-ctx.Done():
		return ExitStatus{}, ctx.Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return r.status, nil
}

// Stop ends a running run at once: exit 137 with grace 0, else 143.
func (f *Fake) Stop(ctx context.Context, id RunID, grace time.Duration) error {
	f.mu.Lock()
	_, ok := f.runs[id]
	f.mu.Unlock()
	if !ok {
		return notFound(id)
	}
	code := 137
	if grace > 0 {
		code = 143
	}
	f.finish(id, ExitStatus{Code: code})
	return nil
}

// Logs returns the run's output: one line naming the run, then whatever
// AppendLog added.
func (f *Fake) Logs(ctx context.Context, id RunID) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.runs[id]
	if !ok {
		return nil, notFound(id)
	}
	b := r.logs
	if len(b) > LogCap {
		b = b[len(b)-LogCap:]
	}
	return append([]byte(nil), b...), nil
}

// List returns the runs carrying all labels, in start order.
func (f *Fake) List(ctx context.Context, labels map[string]string) ([]RunInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]RunInfo, 0, len(f.runs))
	for id, r := range f.runs {
		if !matchLabels(r.labels, labels) {
			continue
		}
		ri := RunInfo{
			ID:         id,
			Labels:     copyLabels(r.labels),
			Running:    r.running,
			StartedAt:  r.startedAt,
			FinishedAt: r.finishedAt,
		}
		if !r.running {
			ri.ExitCode = r.status.Code
		}
		out = append(out, ri)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Stats pretends a running run uses all the CPU it may and its memory
// baseline; an exited run uses nothing.
func (f *Fake) Stats(ctx context.Context, id RunID) (Stats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.runs[id]
	if !ok {
		return Stats{}, notFound(id)
	}
	if !r.running {
		return Stats{}, nil
	}
	return Stats{CPUPercent: float64(r.spec.NanoCPUs) / 1e7, MemoryBytes: r.spec.MemoryReservationBytes}, nil
}

// Remove forgets an exited run.
func (f *Fake) Remove(ctx context.Context, id RunID) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.runs[id]
	if !ok {
		return notFound(id)
	}
	if r.running {
		return stillRunning(id)
	}
	delete(f.runs, id)
	return nil
}

// cloneSpec deep-copies the slices and maps of s so that the fake's record
// and the caller's value do not alias.
func cloneSpec(s Spec) Spec {
	s.Cmd = append([]string(nil), s.Cmd...)
	s.GPUUUIDs = append([]string(nil), s.GPUUUIDs...)
	s.Mounts = append([]Mount(nil), s.Mounts...)
	if s.Env != nil {
		s.Env = copyLabels(s.Env)
	}
	if s.Auth != nil {
		a := *s.Auth
		s.Auth = &a
	}
	return s
}
