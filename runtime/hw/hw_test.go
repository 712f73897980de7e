package hw

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
)

// recorder is a slog.Handler that keeps every record.
type recorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec)
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

func (r *recorder) records() []slog.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]slog.Record(nil), r.recs...)
}

func newLog() (*slog.Logger, *recorder) {
	r := &recorder{}
	return slog.New(r), r
}

func TestDetectDGXA100(t *testing.T) {
	log, rec := newLog()
	server := dgxa100.New()
	h, err := Detect(t.TempDir(), server, log)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.GPUs) != 8 {
		t.Fatalf("got %d GPUs, want 8", len(h.GPUs))
	}
	seen := map[string]bool{}
	for i, g := range h.GPUs {
		if g.Index != i {
			t.Errorf("GPU %d has index %d; want sorted by index", i, g.Index)
		}
		want := server.Devices[i].(*dgxa100.Device).UUID
		if g.UUID != want || !strings.HasPrefix(g.UUID, "GPU-") {
			t.Errorf("GPU %d UUID %q, want %q", i, g.UUID, want)
		}
		if seen[g.UUID] {
			t.Errorf("duplicate UUID %q", g.UUID)
		}
		seen[g.UUID] = true
		if g.Name != "Mock NVIDIA A100-SXM4-40GB" {
			t.Errorf("GPU %d name %q", i, g.Name)
		}
		if g.MemoryMB != 40960 {
			t.Errorf("GPU %d memory %d MB, want 40960", i, g.MemoryMB)
		}
	}
	if n := len(rec.records()); n != 0 {
		t.Errorf("logged %d lines on a healthy GPU machine, want 0", n)
	}
}

// initOnly is a mock whose Init returns ret and whose other methods, if
// called, fail the test.
func initOnly(t *testing.T, ret nvml.Return) *mock.Interface {
	return &mock.Interface{
		InitFunc: func() nvml.Return { return ret },
		ShutdownFunc: func() nvml.Return {
			t.Error("Shutdown called after a failed Init")
			return nvml.SUCCESS
		},
		DeviceGetCountFunc: func() (int, nvml.Return) {
			t.Error("DeviceGetCount called after a failed Init")
			return 0, nvml.ERROR_UNINITIALIZED
		},
	}
}

func TestDetectLibraryNotFound(t *testing.T) {
	log, rec := newLog()
	h, err := Detect(t.TempDir(), initOnly(t, nvml.ERROR_LIBRARY_NOT_FOUND), log)
	if err != nil {
		t.Fatalf("Detect failed without the NVIDIA library: %v", err)
	}
	if h.GPUs == nil || len(h.GPUs) != 0 {
		t.Fatalf("GPUs = %#v, want empty non-nil", h.GPUs)
	}
	expectOneLine(t, rec, slog.LevelInfo, NoLibraryMessage)
}

func TestDetectInitPanics(t *testing.T) {
	log, rec := newLog()
	nv := &mock.Interface{InitFunc: func() nvml.Return { panic("dlopen exploded") }}
	h, err := Detect(t.TempDir(), nv, log)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.GPUs) != 0 {
		t.Fatalf("GPUs = %v, want none", h.GPUs)
	}
	expectOneLine(t, rec, slog.LevelInfo, NoLibraryMessage)
}

func TestDetectDriverNotLoaded(t *testing.T) {
	log, rec := newLog()
	h, err := Detect(t.TempDir(), initOnly(t, nvml.ERROR_DRIVER_NOT_LOADED), log)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.GPUs) != 0 {
		t.Fatalf("GPUs = %v, want none", h.GPUs)
	}
	expectOneLine(t, rec, slog.LevelWarn, "NVML did not start")
}

func TestDetectSkipsBrokenGPU(t *testing.T) {
	log, rec := newLog()
	server := dgxa100.New()
	broken := server.Devices[3].(*dgxa100.Device)
	broken.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return nvml.Memory{}, nvml.ERROR_GPU_IS_LOST }
	shutdowns := 0
	server.ShutdownFunc = func() nvml.Return { shutdowns++; return nvml.SUCCESS }
	h, err := Detect(t.TempDir(), server, log)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.GPUs) != 7 {
		t.Fatalf("got %d GPUs, want 7", len(h.GPUs))
	}
	for _, g := range h.GPUs {
		if g.Index == 3 {
			t.Fatal("broken GPU 3 reported")
		}
	}
	if shutdowns != 1 {
		t.Errorf("Shutdown called %d times, want 1", shutdowns)
	}
	expectOneLine(t, rec, slog.LevelWarn, "GPU skipped")
}

func TestDetectPanicAfterInit(t *testing.T) {
	log, rec := newLog()
	server := dgxa100.New()
	server.DeviceGetCountFunc = func() (int, nvml.Return) { panic("boom") }
	h, err := Detect(t.TempDir(), server, log)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.GPUs) != 0 {
		t.Fatalf("GPUs = %v, want none", h.GPUs)
	}
	expectOneLine(t, rec, slog.LevelWarn, "GPU detection failed")
}

func TestDetectNilNVML(t *testing.T) {
	log, rec := newLog()
	h, err := Detect(t.TempDir(), nil, log)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.GPUs) != 0 || len(rec.records()) != 0 {
		t.Fatalf("nil NVML: GPUs %v, %d log lines", h.GPUs, len(rec.records()))
	}
}

// TestDetectSystemNVML runs the real library binding. On this project's
// machines there is no NVIDIA library: no GPUs, no error, one info line. On
// a machine with GPUs it checks that what NVML reports is sane.
func TestDetectSystemNVML(t *testing.T) {
	log, rec := newLog()
	h, err := Detect(t.TempDir(), SystemNVML(), log)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.GPUs) == 0 {
		recs := rec.records()
		if len(recs) != 1 {
			t.Fatalf("no GPUs and %d log lines, want exactly 1", len(recs))
		}
		t.Logf("no GPUs: %s", recs[0].Message)
		return
	}
	for _, g := range h.GPUs {
		if g.UUID == "" || g.MemoryMB <= 0 {
			t.Errorf("implausible GPU %+v", g)
		}
	}
}

func TestDetectHost(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "not", "yet", "created")
	h, err := Detect(missing, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if h.CPUs < 1 || h.MemoryMB <= 0 || h.DiskMB <= 0 {
		t.Fatalf("implausible hardware %+v", h)
	}
	b, err := json.Marshal(Hardware{CPUs: 2, MemoryMB: 3, DiskMB: 4, GPUs: []GPU{{Index: 0, UUID: "GPU-x", Name: "n", MemoryMB: 5}}})
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"cpus":2,"memory_mb":3,"disk_mb":4,"gpus":[{"index":0,"uuid":"GPU-x","name":"n","memory_mb":5}]}`
	if string(b) != want {
		t.Errorf("JSON %s, want %s", b, want)
	}
}

func TestDetectBadDataDir(t *testing.T) {
	// A path under a regular file cannot be measured: ENOTDIR, not ENOENT.
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Detect(filepath.Join(f, "sub"), nil, nil); err == nil {
		t.Fatal("Detect under a regular file succeeded")
	}
}

func expectOneLine(t *testing.T, rec *recorder, level slog.Level, substr string) {
	t.Helper()
	recs := rec.records()
	if len(recs) != 1 {
		var msgs []string
		for _, r := range recs {
			msgs = append(msgs, r.Message)
		}
		t.Fatalf("logged %d lines %q, want exactly 1", len(recs), msgs)
	}
	if recs[0].Level != level || !strings.Contains(recs[0].Message, substr) {
		t.Fatalf("logged %s %q, want %s containing %q", recs[0].Level, recs[0].Message, level, substr)
	}
}
