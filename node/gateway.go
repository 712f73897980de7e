package node

import (
	"context"
	"io"
	"net"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/node/gateway"
	"github.com/cshare/cshare/p2p"
)

// newGateway builds the SSH gateway (package gateway) over this node's
// parts: after the replica, the runtime and the scheduler. It listens
// only once started, and only when node.yaml has ssh.listen.
func (n *Node) newGateway() (*gateway.Service, error) {
	return gateway.New(gateway.Deps{Ledger: n.rep, Drivers: n.drivers, Machines: gatewayMachines{n}, Streams: n.host.LibP2P(),
		Machine: n.idStr, Person: n.orgs.Person, DataDir: n.opts.DataDir, Listen: n.cfg.SSH.Listen, Now: n.opts.Now, Log: n.log})
}

// gatewayMachines tells the gateway where machines' gateways are and
// which machine runs an item.
type gatewayMachines struct{ n *Node }

// Gateway is machine's gateway as its latest heartbeat announced it, while
// it is online, at the IP this node is connected to it on (see machineAt).
func (m gatewayMachines) Gateway(machine string) (p2p.SSHGateway, string, bool) {
	hb, host, ok := m.n.machineAt(machine)
	if !ok || hb.SSH == nil {
		return p2p.SSHGateway{}, "", false
	}
	return *hb.SSH, host, true
}

// machineAt is machine's latest heartbeat while it is online, and the IP
// this node is connected to it on (else the first address it announces
// that is not loopback, else loopback). This machine's own is what its
// heartbeat would say of its gateway and Jupyter proxy, at loopback.
func (n *Node) machineAt(machine string) (p2p.Heartbeat, string, bool) {
	if machine == n.idStr {
		return p2p.Heartbeat{SSH: n.gw.Announce(), Jupyter: n.jup.Announce(), JupyterDirect: n.jupyterDirect()}, "127.0.0.1", true
	}
	id, err := peer.Decode(machine)
	if err != nil {
		return p2p.Heartbeat{}, "", false
	}
	hb, _, ok := n.peers.Liveness(machine, n.opts.Now())
	if !ok {
		return p2p.Heartbeat{}, "", false
	}
	var addrs []ma.Multiaddr
	for _, c := range n.host.LibP2P().Network().ConnsToPeer(id) {
		addrs = append(addrs, c.RemoteMultiaddr())
	}
	for _, a := range hb.Addrs {
		if x, err := ma.NewMultiaddr(a); err == nil {
			addrs = append(addrs, x)
		}
	}
	host := ""
	for _, a := range addrs {
		ip := ipOf(a)
		if ip == nil {
			continue
		}
		if !ip.IsLoopback() && !ip.IsUnspecified() {
			host = ip.String()
			break
		}
		if host == "" && ip.IsLoopback() {
			host = ip.String()
		}
	}
	if host == "" {
		return p2p.Heartbeat{}, "", false
	}
	return hb, host, true
}

func ipOf(a ma.Multiaddr) net.IP {
	for _, p := range []int{ma.P_IP4, ma.P_IP6} {
		if v, err := a.ValueForProtocol(p); err == nil {
			return net.ParseIP(v)
		}
	}
	return nil
}

// RunningOn is the machine that runs item of job, as leases say.
func (m gatewayMachines) RunningOn(job string, item int64) string {
	return m.n.sched.RunningOn(job, item)
}

// The gateway's API (api.GatewayService) is the gateway service's.

var _ api.GatewayService = (*Node)(nil)

// AddSSHKey records a public key for this machine's person.
func (n *Node) AddSSHKey(ctx context.Context, req api.SSHKeyAdd) (api.SSHKeyInfo, error) {
	return n.gw.AddSSHKey(ctx, req)
}

// SSHKeys lists this machine's person's SSH keys.
func (n *Node) SSHKeys(ctx context.Context) ([]api.SSHKeyInfo, error) { return n.gw.SSHKeys(ctx) }

// RemoveSSHKey removes one of this machine's person's SSH keys.
func (n *Node) RemoveSSHKey(ctx context.Context, req api.SSHKeyRemove) (api.SSHKeyInfo, error) {
	return n.gw.RemoveSSHKey(ctx, req)
}

// ContractSSH is where to ssh into a contract.
func (n *Node) ContractSSH(ctx context.Context, ref string) (api.SSHTarget, error) {
	return n.gw.ContractSSH(ctx, ref)
}

// JobSSH is where to ssh into a running item of a job.
func (n *Node) JobSSH(ctx context.Context, ref string, item int64) (api.SSHTarget, error) {
	return n.gw.JobSSH(ctx, ref, item)
}

// PutArchive unpacks a tar archive into a container's directory.
func (n *Node) PutArchive(ctx context.Context, t api.ArchiveTarget, body io.Reader) (api.ArchiveResult, error) {
	return n.gw.PutArchive(ctx, t, body)
}

// GetArchive is a tar archive of a path in a container.
func (n *Node) GetArchive(ctx context.Context, t api.ArchiveTarget) (io.ReadCloser, error) {
	return n.gw.GetArchive(ctx, t)
}
