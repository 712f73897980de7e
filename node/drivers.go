package node

import (
	"path/filepath"
	"strconv"

	"github.com/cshare/cshare/runtime"
	"github.com/cshare/cshare/runtime/hw"
)

func (n *Node) initRuntime() error {
	if n.opts.Driver != nil {
		n.drivers = runtime.NewRegistry()
		n.drivers.Add("docker", n.opts.Driver)
		n.drivers.Add("exec", n.opts.Driver)
		return nil
	}
	n.drivers = runtime.NewRegistryFor(n.ctx, runtime.Setup{Docker: n.cfg.Runtime.DockerEnabled(), Exec: n.cfg.Runtime.ExecEnabled(),
		ExecDir: filepath.Join(n.opts.DataDir, "exec"), Log: n.log, RecordGPUs: n.cfg.Runtime.RecordGPUs > 0})
	return nil
}

// registryAuth is this machine's node.yaml credentials for an image's
// registry, or nil.
func (n *Node) registryAuth(image string) *runtime.RegistryAuth {
	r := n.cfg.RegistryFor(image)
	if r == nil {
		return nil
	}
	return &runtime.RegistryAuth{Server: r.Server, Username: r.Username, Password: r.Password, Token: r.Token}
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
