package node

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/runtime"
)

func (n *Node) initRuntime() error {
	s := &scheduler{n: n, drivers: map[string]Driver{}, noDrv: map[string]string{}, slots: map[int]*instance{},
		results: map[string][]ledger.ItemResult{}, wake: make(chan struct{})}
	n.sched = s
	if n.opts.Driver != nil {
		s.drivers["docker"] = n.opts.Driver
		s.drivers["exec"] = n.opts.Driver
		return nil
	}
	if n.cfg.Runtime.DockerEnabled() {
		d, err := runtime.NewDockerFromEnv()
		if err == nil {
			pctx, c := context.WithTimeout(n.ctx, 5*time.Second)
			err = d.Ping(pctx)
			c()
		}
		if err != nil {
			s.noDrv["docker"] = fmt.Sprintf("no Docker engine reachable on this machine (%v)", err)
			n.log.Warn("docker driver unavailable", "err", err)
		} else {
			s.drivers["docker"] = d
		}
	} else {
		s.noDrv["docker"] = "the docker driver is disabled in node.yaml (runtime: {docker: false})"
	}
	if n.cfg.Runtime.ExecEnabled() {
		s.drivers["exec"] = runtime.NewExec(filepath.Join(n.opts.DataDir, "exec"), n.log)
	} else {
		s.noDrv["exec"] = "the exec driver is not enabled on this machine: it is not sandboxed; enable it with `runtime: {exec: true}` in node.yaml"
	}
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
