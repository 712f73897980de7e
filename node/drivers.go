package node

import (
	"context"
	"path/filepath"
	"strconv"

	"filippo.io/age"

	"github.com/cshare/cshare/internal/regauth"
	"github.com/cshare/cshare/node/config"
	"github.com/cshare/cshare/runtime"
	"github.com/cshare/cshare/runtime/hw"
)

// newDrivers is the runtime's driver registry: Options.Driver for both
// names in tests, else docker and exec as node.yaml enables them.
func newDrivers(ctx context.Context, opts Options, cfg config.File) *runtime.Registry {
	if opts.Driver != nil {
		r := runtime.NewRegistry()
		r.Add("docker", opts.Driver)
		r.Add("exec", opts.Driver)
		return r
	}
	return runtime.NewRegistryFor(ctx, runtime.Setup{Docker: cfg.Runtime.DockerEnabled(), Exec: cfg.Runtime.ExecEnabled(),
		ExecDir: filepath.Join(opts.DataDir, "exec"), Log: opts.Logger, RecordGPUs: cfg.Runtime.RecordGPUs > 0})
}

// registryAuth is the credentials to pull an image with: those sealed in
// a contract's or job's spec, opened with this machine's age identity for
// its person (internal/regauth), else this machine's node.yaml ones, else
// nil.
func registryAuth(cfg config.File, id age.Identity) runtime.AuthSource {
	return func(image string, sealed []byte, person string) (*runtime.RegistryAuth, error) {
		if len(sealed) > 0 {
			c, err := regauth.Open(sealed, id, person, image)
			if err != nil {
				return nil, err
			}
			return &runtime.RegistryAuth{Server: c.Server, Username: c.Username, Password: c.Password, Token: c.IdentityToken}, nil
		}
		r := cfg.RegistryFor(image)
		if r == nil {
			return nil, nil
		}
		return &runtime.RegistryAuth{Server: r.Server, Username: r.Username, Password: r.Password, Token: r.Token}, nil
	}
}

// recordedGPUs adds the n GPUs node.yaml's runtime.record_gpus declares to
// a machine that has none (see config.Runtime.RecordGPUs).
func recordedGPUs(h hw.Hardware, n int) hw.Hardware {
	if n <= 0 || len(h.GPUs) > 0 {
		return h
	}
	h.GPUs = make([]hw.GPU, n)
	for i := range h.GPUs {
		h.GPUs[i] = hw.GPU{Index: i, UUID: "GPU-recorded-" + strconv.Itoa(i), Name: "Recorded GPU", MemoryMB: 16384}
	}
	return h
}
