package runtime

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Labels every run carries.
const (
	LabelOrg      = "cshare.org"
	LabelJob      = "cshare.job"
	LabelInstance = "cshare.instance"
	LabelItem     = "cshare.item"
	LabelMachine  = "cshare.machine"
)

// Environment variables the driver always sets for the command.
const (
	EnvJobID    = "CSHARE_JOB_ID"
	EnvItem     = "CSHARE_ITEM"
	EnvInstance = "CSHARE_INSTANCE"
	EnvMachine  = "CSHARE_MACHINE"
)

// TestImage is the tiny busybox image that Docker tests run. It is built
// locally, without a registry, by scripts/testimage.sh.
const TestImage = "cshare-busybox:latest"

// MinMemoryBytes is the smallest memory limit or reservation a run may ask
// for. Docker 25 and later refuse less than 6 MiB (older engines 4 MiB), so
// the stricter bound is used everywhere.
const MinMemoryBytes = 6 << 20

// MinNanoCPUs is the smallest CPU limit (0.01 cores) Docker accepts.
const MinNanoCPUs = 10_000_000

// LogCap is the most output [Driver.Logs] returns for one run.
const LogCap = 16 << 20

// Errors callers branch on.
var (
	// ErrNotFound: the run ID is unknown to the driver (never started, or removed).
	ErrNotFound = errors.New("runtime: run not found")
	// ErrImageNotFound: the image is not present and could not be pulled.
	ErrImageNotFound = errors.New("runtime: image not found")
	// ErrInvalidSpec: Spec.Validate rejected the spec.
	ErrInvalidSpec = errors.New("runtime: invalid spec")
	// ErrRunning: Remove was called on a run that has not exited; stop it first.
	ErrRunning = errors.New("runtime: run is still running")
)

// Mount makes a host path visible to the run at Target.
type Mount struct {
	Source, Target string
	ReadOnly       bool
}

// RegistryAuth are optional credentials for pulling a private image: a user
// name and password, or an identity token.
type RegistryAuth struct {
	Server, Username, Password, Token string
}

// String names the server only: credentials never print (%v, %+v, logs).
func (a RegistryAuth) String() string { return "credentials for " + a.Server + " (not shown)" }

// GoString is String.
func (a RegistryAuth) GoString() string { return a.String() }

// AuthSource gives the credentials to pull an image with: a contract's or
// job's own (sealed, opened for its person; an error when this machine
// cannot open them), else the machine's node.yaml ones, else nil.
type AuthSource func(image string, sealed []byte, person string) (*RegistryAuth, error)

// Spec describes one run: one agenda item of a job executed by one instance.
type Spec struct {
	Org, Job, Instance, Machine string
	// Item is the agenda item number.
	Item int
	// Image is the container image (docker driver only).
	Image string
	// Cmd is the argv. Docker: empty means the image's default command.
	Cmd []string
	// Entrypoint replaces the image's entrypoint (docker), Cmd being its
	// arguments; exec: the program, run with Cmd as its arguments.
	Entrypoint string
	// Env is extra environment. The driver always adds CSHARE_JOB_ID,
	// CSHARE_ITEM, CSHARE_INSTANCE and CSHARE_MACHINE, which Env may not set.
	Env map[string]string
	// NanoCPUs is the CPU limit in cores*1e9; 0 = no limit.
	NanoCPUs int64
	// MemoryBytes is the hard memory limit; 0 = none.
	MemoryBytes int64
	// MemoryReservationBytes is the baseline the run is guaranteed; 0 = none.
	MemoryReservationBytes int64
	// ShmBytes is the size of /dev/shm; 0 = the engine's default.
	ShmBytes int64
	// PidsLimit caps the number of processes; 0 = no limit.
	PidsLimit int64
	// GPUUUIDs are the exact GPU devices the run gets.
	GPUUUIDs []string
	// Mounts are datasets and the like, read-only when ReadOnly.
	Mounts []Mount
	// Auth are optional registry credentials for pulling Image.
	Auth *RegistryAuth
	// WorkDir is the exec driver's per-instance working directory; empty
	// means a directory named after the instance under the driver's root.
	// It is created if missing.
	WorkDir string
	// Network is the docker network: "" or "bridge" for the default bridge,
	// or "none" for no network. "host" is always refused.
	Network string
}

// RunID is a driver-specific handle: a container ID, or an exec run ID.
type RunID string

// RunInfo describes a run found by [Driver.List].
type RunInfo struct {
	ID         RunID
	Labels     map[string]string
	Running    bool
	ExitCode   int
	StartedAt  time.Time
	FinishedAt time.Time
}

// ExitStatus is how a run ended. Code follows the shell convention: 128+N
// when the command was killed by signal N. Err is set when the run could not
// start its command or its exit code was lost.
type ExitStatus struct {
	Code      int
	OOMKilled bool
	Err       string
}

// Stats is a run's current resource use. CPUPercent counts 100 per fully used
// core.
type Stats struct {
	CPUPercent  float64
	MemoryBytes int64
}

// Driver runs instances. Implementations are safe for concurrent use.
type Driver interface {
	// Name is "docker", "exec" or "fake".
	Name() string
	// Start creates and starts the run (pulling the image if needed) and
	// returns once it is running.
	Start(ctx context.Context, s Spec) (RunID, error)
	// Wait blocks until the run exits or ctx ends.
	Wait(ctx context.Context, id RunID) (ExitStatus, error)
	// Stop ends the run: with grace 0 it is killed at once; otherwise it gets
	// SIGTERM and is killed when grace has passed. Stopping an exited run is
	// not an error.
	Stop(ctx context.Context, id RunID, grace time.Duration) error
	// Logs returns the combined stdout and stderr of the run, at most LogCap bytes.
	Logs(ctx context.Context, id RunID) ([]byte, error)
	// List returns the runs (running or exited) that carry all the given
	// labels; nil labels lists every run of this driver. The node uses it to
	// adopt its runs after a crash.
	List(ctx context.Context, labels map[string]string) ([]RunInfo, error)
	// Stats samples the run's resource use.
	Stats(ctx context.Context, id RunID) (Stats, error)
	// Remove deletes an exited run's container or directory. A running run
	// gives ErrRunning.
	Remove(ctx context.Context, id RunID) error
}

// SpecError is a Spec.Validate failure. It matches ErrInvalidSpec.
type SpecError struct {
	Field string // e.g. "memory", "mounts[0].source"
	Msg   string // what is wrong and what is allowed
}

func (e *SpecError) Error() string { return e.Field + ": " + e.Msg }

// Is makes errors.Is(err, ErrInvalidSpec) true.
func (e *SpecError) Is(target error) bool { return target == ErrInvalidSpec }

// ImageError says an image is not present locally and could not be pulled.
// It matches ErrImageNotFound and unwraps to the pull error.
type ImageError struct {
	Image string
	Err   error
}

func (e *ImageError) Error() string {
	return fmt.Sprintf("runtime: image %q not found locally and pull failed: %v", e.Image, e.Err)
}

// Unwrap returns ErrImageNotFound and the pull error.
func (e *ImageError) Unwrap() []error { return []error{ErrImageNotFound, e.Err} }

func specErr(field, format string, args ...any) error {
	return &SpecError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

func notFound(id RunID) error { return fmt.Errorf("%w: %q", ErrNotFound, string(id)) }

func stillRunning(id RunID) error {
	return fmt.Errorf("%w: %q (stop it before removing)", ErrRunning, string(id))
}

var reservedEnv = map[string]bool{EnvJobID: true, EnvItem: true, EnvInstance: true, EnvMachine: true}

// Validate checks the fields every driver relies on. Errors are one line,
// name the field and match ErrInvalidSpec. Driver-specific requirements (an
// image for docker, a command for exec) are checked by the driver's Start.
func (s Spec) Validate() error {
	if strings.TrimSpace(s.Job) == "" {
		return specErr("job", "is required")
	}
	if strings.TrimSpace(s.Instance) == "" {
		return specErr("instance", "is required")
	}
	for _, f := range []struct{ name, v string }{{"org", s.Org}, {"job", s.Job}, {"instance", s.Instance}, {"machine", s.Machine}} {
		if strings.ContainsAny(f.v, "\x00\n\r") {
			return specErr(f.name, "%q contains a control character", f.v)
		}
	}
	if s.Item < 0 {
		return specErr("item", "%d is negative; items are numbered from 0", s.Item)
	}
	for i, a := range s.Cmd {
		if strings.ContainsRune(a, 0) {
			return specErr(fmt.Sprintf("cmd[%d]", i), "contains a NUL byte")
		}
	}
	if strings.ContainsRune(s.Entrypoint, 0) {
		return specErr("entrypoint", "contains a NUL byte")
	}
	for k, v := range s.Env {
		switch {
		case k == "":
			return specErr("env", "empty variable name")
		case strings.ContainsAny(k, "=\x00"):
			return specErr("env", "variable name %q may not contain '=' or NUL", k)
		case reservedEnv[k]:
			return specErr("env", "%s is set by the driver and may not be overridden", k)
		case strings.ContainsRune(v, 0):
			return specErr("env", "value of %s contains a NUL byte", k)
		}
	}
	if s.NanoCPUs < 0 {
		return specErr("cpus", "%d nano-CPUs is negative; use 0 for no limit", s.NanoCPUs)
	}
	if s.NanoCPUs > 0 && s.NanoCPUs < MinNanoCPUs {
		return specErr("cpus", "%d nano-CPUs is below the minimum of 0.01 cores (%d)", s.NanoCPUs, MinNanoCPUs)
	}
	if s.MemoryBytes < 0 {
		return specErr("memory", "%d bytes is negative; use 0 for no limit", s.MemoryBytes)
	}
	if s.MemoryBytes > 0 && s.MemoryBytes < MinMemoryBytes {
		return specErr("memory", "%d bytes is below the 6MiB minimum", s.MemoryBytes)
	}
	if s.MemoryReservationBytes < 0 {
		return specErr("memory_reservation", "%d bytes is negative; use 0 for none", s.MemoryReservationBytes)
	}
	if s.MemoryReservationBytes > 0 && s.MemoryReservationBytes < MinMemoryBytes {
		return specErr("memory_reservation", "%d bytes is below the 6MiB minimum", s.MemoryReservationBytes)
	}
	if s.MemoryBytes > 0 && s.MemoryReservationBytes > s.MemoryBytes {
		return specErr("memory_reservation", "%d bytes is above the memory limit of %d bytes", s.MemoryReservationBytes, s.MemoryBytes)
	}
	if s.ShmBytes < 0 {
		return specErr("shm", "%d bytes is negative; use 0 for the default", s.ShmBytes)
	}
	if s.PidsLimit < 0 {
		return specErr("pids", "%d is negative; use 0 for no limit", s.PidsLimit)
	}
	seen := make(map[string]bool, len(s.GPUUUIDs))
	for i, u := range s.GPUUUIDs {
		if strings.TrimSpace(u) == "" || strings.ContainsAny(u, ", \t\n") {
			return specErr(fmt.Sprintf("gpus[%d]", i), "%q is not a GPU UUID", u)
		}
		if seen[u] {
			return specErr(fmt.Sprintf("gpus[%d]", i), "%q is listed twice", u)
		}
		seen[u] = true
	}
	targets := make(map[string]bool, len(s.Mounts))
	for i, m := range s.Mounts {
		if !path.IsAbs(m.Source) {
			return specErr(fmt.Sprintf("mounts[%d].source", i), "%q is not an absolute path", m.Source)
		}
		if !path.IsAbs(m.Target) {
			return specErr(fmt.Sprintf("mounts[%d].target", i), "%q is not an absolute path", m.Target)
		}
		t := path.Clean(m.Target)
		if t == "/" {
			return specErr(fmt.Sprintf("mounts[%d].target", i), "may not be /")
		}
		if strings.ContainsAny(m.Source+m.Target, ",\x00") {
			return specErr(fmt.Sprintf("mounts[%d]", i), "paths may not contain ',' or NUL")
		}
		if targets[t] {
			return specErr(fmt.Sprintf("mounts[%d].target", i), "%q is mounted twice", m.Target)
		}
		targets[t] = true
	}
	switch s.Network {
	case "", "bridge", "none":
	case "host":
		return specErr("network", `"host" is not allowed; use "" (the default bridge) or "none"`)
	default:
		return specErr("network", `%q is not supported; use "" (the default bridge) or "none"`, s.Network)
	}
	return nil
}

// Labels returns the labels a run of s carries: with GPUs, LabelGPUs too,
// so that a restarted node adopting the run knows which GPUs it holds
// (see GPUsOf).
func (s Spec) Labels() map[string]string {
	l := map[string]string{
		LabelOrg:      s.Org,
		LabelJob:      s.Job,
		LabelInstance: s.Instance,
		LabelItem:     strconv.Itoa(s.Item),
		LabelMachine:  s.Machine,
	}
	if len(s.GPUUUIDs) > 0 {
		l[LabelGPUs] = strings.Join(s.GPUUUIDs, ",")
	}
	return l
}

// GPUsOf returns the GPU devices a run or contract instance with these
// labels holds (its LabelGPUs), nil for none.
func GPUsOf(labels map[string]string) []string {
	if g := labels[LabelGPUs]; g != "" {
		return strings.Split(g, ",")
	}
	return nil
}

// Environ returns the run's environment as sorted KEY=VALUE pairs: base
// (e.g. PATH), then Env, then the contract variables, which always win.
func (s Spec) Environ(base map[string]string) []string {
	m := make(map[string]string, len(base)+len(s.Env)+4)
	for k, v := range base {
		m[k] = v
	}
	for k, v := range s.Env {
		m[k] = v
	}
	m[EnvJobID] = s.Job
	m[EnvItem] = strconv.Itoa(s.Item)
	m[EnvInstance] = s.Instance
	m[EnvMachine] = s.Machine
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// matchLabels reports whether have carries every label in want.
func matchLabels(have, want map[string]string) bool {
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			return false
		}
	}
	return true
}

func copyLabels(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
