package node

import (
	"path/filepath"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/runtime"
)

func (n *Node) initRuntime() error {
	n.sched = &scheduler{n: n, slots: map[int]*instance{}, results: map[string][]ledger.ItemResult{}, wake: make(chan struct{})}
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
