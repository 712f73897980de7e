package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"time"
)

// ImageChecker is implemented by drivers that can make sure an image is
// present on this machine (pulling it if they may): the node asks before it
// accepts a job, so a typo in an image name is refused at submit.
type ImageChecker interface {
	EnsureImage(ctx context.Context, ref string, auth *RegistryAuth) error
}

// Registry holds a machine's drivers by name ("docker", "exec") and, for
// each name it lacks, why: the node starts instances through it, the API
// explains a refusal with it, and nobody outside this package needs to
// know which concrete driver serves a name. The zero value is empty; a
// Registry is not changed after it is built, so it needs no lock.
type Registry struct {
	drivers map[string]Driver
	why     map[string]string
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{drivers: map[string]Driver{}, why: map[string]string{}}
}

// Add makes d serve name.
func (r *Registry) Add(name string, d Driver) {
	r.drivers[name] = d
	delete(r.why, name)
}

// Unavailable records why name has no driver here.
func (r *Registry) Unavailable(name, why string) {
	delete(r.drivers, name)
	r.why[name] = why
}

// Get returns the driver serving name, if any.
func (r *Registry) Get(name string) (Driver, bool) {
	d, ok := r.drivers[name]
	return d, ok
}

// Why says why name has no driver here ("" and false when it has one, or
// when nothing is known of name).
func (r *Registry) Why(name string) (string, bool) {
	w, ok := r.why[name]
	return w, ok
}

// Each calls fn once per distinct driver (a driver serving several names
// is visited once), in the order of the names.
func (r *Registry) Each(fn func(Driver)) {
	names := make([]string, 0, len(r.drivers))
	for n := range r.drivers {
		names = append(names, n)
	}
	sort.Strings(names)
	seen := map[Driver]bool{}
	for _, n := range names {
		d := r.drivers[n]
		if !seen[d] {
			seen[d] = true
			fn(d)
		}
	}
}

// EnsureImage asks the driver serving name to make sure image is present,
// when that driver can (see ImageChecker). A machine without the driver,
// or whose driver cannot check images, says nothing: other machines may
// run it.
func (r *Registry) EnsureImage(ctx context.Context, name, image string, auth *RegistryAuth) error {
	d, ok := r.drivers[name]
	if !ok {
		return nil
	}
	ic, ok := d.(ImageChecker)
	if !ok {
		return nil
	}
	return ic.EnsureImage(ctx, image, auth)
}

// Setup says which drivers a machine enables (node.yaml `runtime:`).
type Setup struct {
	Docker  bool   // try the Docker engine from the environment
	Exec    bool   // run plain processes (not sandboxed: the owner's choice)
	ExecDir string // the exec driver's root directory
	// RecordGPUs makes the Docker driver record GPU device requests
	// instead of sending them (see Docker.RecordGPUs).
	RecordGPUs bool
	Log        *slog.Logger
}

// NewRegistryFor builds a machine's registry: Docker when enabled and its
// engine answers a ping within five seconds, exec when enabled. Each
// missing driver is recorded with the reason a user is told.
func NewRegistryFor(ctx context.Context, s Setup) *Registry {
	r := NewRegistry()
	log := s.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if s.Docker {
		d, err := NewDockerFromEnv()
		if err == nil {
			pctx, c := context.WithTimeout(ctx, 5*time.Second)
			err = d.Ping(pctx)
			c()
		}
		if err != nil {
			r.Unavailable("docker", fmt.Sprintf("no Docker engine reachable on this machine (%v)", err))
			log.Warn("docker driver unavailable", "err", err)
		} else {
			d.RecordGPUs(s.RecordGPUs)
			r.Add("docker", d)
		}
	} else {
		r.Unavailable("docker", "the docker driver is disabled in node.yaml (runtime: {docker: false})")
	}
	if s.Exec {
		r.Add("exec", NewExec(filepath.Clean(s.ExecDir), log))
	} else {
		r.Unavailable("exec", "the exec driver is not enabled on this machine: it is not sandboxed; enable it with `runtime: {exec: true}` in node.yaml")
	}
	return r
}
