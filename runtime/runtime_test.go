package runtime

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func validSpec() Spec {
	return Spec{Org: "org", Job: "job", Instance: "inst", Machine: "m", Item: 1, Cmd: []string{"true"}}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Spec)
		want   string // substring of the error; "" = valid
	}{
		{"minimal", func(s *Spec) {}, ""},
		{"all limits", func(s *Spec) {
			s.NanoCPUs, s.MemoryBytes, s.MemoryReservationBytes = 2e9, 1<<30, 512<<20
			s.ShmBytes, s.PidsLimit = 64<<20, 100
			s.GPUUUIDs = []string{"GPU-a", "GPU-b"}
			s.Mounts = []Mount{{Source: "/srv/ds", Target: "/data", ReadOnly: true}}
			s.Network = "none"
		}, ""},
		{"no job", func(s *Spec) { s.Job = "" }, "job: is required"},
		{"no instance", func(s *Spec) { s.Instance = " " }, "instance: is required"},
		{"negative item", func(s *Spec) { s.Item = -1 }, "item: -1 is negative"},
		{"memory too small", func(s *Spec) { s.MemoryBytes = 1 << 20 }, "memory: 1048576 bytes is below the 6MiB minimum"},
		{"memory negative", func(s *Spec) { s.MemoryBytes = -1 }, "memory: -1 bytes is negative"},
		{"reservation above limit", func(s *Spec) { s.MemoryBytes, s.MemoryReservationBytes = 64<<20, 128<<20 }, "memory_reservation: 134217728 bytes is above the memory limit"},
		{"reservation too small", func(s *Spec) { s.MemoryReservationBytes = 1024 }, "memory_reservation: 1024 bytes is below"},
		{"cpus negative", func(s *Spec) { s.NanoCPUs = -5 }, "cpus: -5 nano-CPUs is negative"},
		{"cpus too small", func(s *Spec) { s.NanoCPUs = 1000 }, "cpus: 1000 nano-CPUs is below the minimum"},
		{"shm negative", func(s *Spec) { s.ShmBytes = -1 }, "shm:"},
		{"pids negative", func(s *Spec) { s.PidsLimit = -1 }, "pids:"},
		{"gpu empty", func(s *Spec) { s.GPUUUIDs = []string{""} }, "gpus[0]:"},
		{"gpu duplicate", func(s *Spec) { s.GPUUUIDs = []string{"GPU-a", "GPU-a"} }, `gpus[1]: "GPU-a" is listed twice`},
		{"mount relative source", func(s *Spec) { s.Mounts = []Mount{{Source: "data", Target: "/data"}} }, `mounts[0].source: "data" is not an absolute path`},
		{"mount root target", func(s *Spec) { s.Mounts = []Mount{{Source: "/x", Target: "/"}} }, "mounts[0].target: may not be /"},
		{"mount twice", func(s *Spec) {
			s.Mounts = []Mount{{Source: "/x", Target: "/data"}, {Source: "/y", Target: "/data/"}}
		}, "mounts[1].target:"},
		{"host network", func(s *Spec) { s.Network = "host" }, `network: "host" is not allowed`},
		{"other network", func(s *Spec) { s.Network = "container:abc" }, "network:"},
		{"reserved env", func(s *Spec) { s.Env = map[string]string{EnvItem: "9"} }, "env: CSHARE_ITEM is set by the driver"},
		{"bad env name", func(s *Spec) { s.Env = map[string]string{"A=B": "x"} }, "env: variable name"},
		{"newline in job", func(s *Spec) { s.Job = "a\nb" }, "job:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := validSpec()
			tt.mutate(&s)
			err := s.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want error containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate() = %q, want it to contain %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q spans lines", err)
			}
			if !errors.Is(err, ErrInvalidSpec) {
				t.Errorf("errors.Is(%v, ErrInvalidSpec) = false", err)
			}
		})
	}
}

func TestLabelsAndEnviron(t *testing.T) {
	s := Spec{Org: "o", Job: "j", Instance: "i", Machine: "m", Item: 42, Env: map[string]string{"B": "2", "A": "1"}}
	got := s.Labels()
	want := map[string]string{LabelOrg: "o", LabelJob: "j", LabelInstance: "i", LabelItem: "42", LabelMachine: "m"}
	if len(got) != len(want) {
		t.Fatalf("Labels() = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("Labels()[%s] = %q, want %q", k, got[k], v)
		}
	}
	// A run with GPUs names them, so a restarted node knows what it holds.
	if g := GPUsOf(got); g != nil {
		t.Errorf("GPUsOf(no GPUs) = %v, want nil", g)
	}
	gs := s
	gs.GPUUUIDs = []string{"GPU-a", "GPU-b"}
	if l := gs.Labels(); l[LabelGPUs] != "GPU-a,GPU-b" || !slices.Equal(GPUsOf(l), gs.GPUUUIDs) {
		t.Errorf("Labels() with GPUs = %v; GPUsOf = %v", l, GPUsOf(l))
	}
	env := s.Environ(map[string]string{"PATH": "/bin", "A": "base"})
	wantEnv := []string{"A=1", "B=2", "CSHARE_INSTANCE=i", "CSHARE_ITEM=42", "CSHARE_JOB_ID=j", "CSHARE_MACHINE=m", "PATH=/bin"}
	if !slices.Equal(env, wantEnv) {
		t.Errorf("Environ() = %v, want %v", env, wantEnv)
	}
}

func TestImageErrorMatches(t *testing.T) {
	pullErr := errors.New("manifest unknown")
	err := error(&ImageError{Image: "foo:1", Err: pullErr})
	if !errors.Is(err, ErrImageNotFound) || !errors.Is(err, pullErr) {
		t.Fatalf("ImageError does not match ErrImageNotFound and its cause")
	}
	if want := `runtime: image "foo:1" not found locally and pull failed: manifest unknown`; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err, want)
	}
}

func TestTailBuffer(t *testing.T) {
	w := &tailBuffer{max: 10}
	for i := 0; i < 100; i++ {
		_, _ = w.Write([]byte("abc"))
	}
	_, _ = w.Write([]byte("0123456789XYZ"))
	if got := string(w.Bytes()); got != "3456789XYZ" {
		t.Errorf("Bytes() = %q, want the last 10 bytes", got)
	}
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
