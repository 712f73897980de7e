package node

import (
	"context"
	"time"

	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/node/config"
	"github.com/cshare/cshare/p2p"
)

// Across NATs (issue 32; docs/design.md §23): what node.yaml's relay: and
// nat: sections and --bootstrap give the host, and what node status shows
// of its reachability and paths. The host does the work (p2p's nat.go).

// relayMode is node.yaml's relay.serve as the host takes it.
func relayMode(r config.Relay) p2p.RelayMode {
	switch {
	case r.Serve == nil:
		return p2p.RelayAuto
	case *r.Serve:
		return p2p.RelayOn
	}
	return p2p.RelayOff
}

// natStatus fills in the reachability part of node status.
func (n *Node) natStatus(s *api.NodeStatus) {
	s.Reachability = n.host.Reachability()
	s.PublicAddrs = n.host.PublicAddrs()
	s.RelayServing = n.host.RelayServing()
	s.Connections = []api.Connection{}
	for _, c := range n.host.Connections() {
		s.Connections = append(s.Connections, api.Connection{Machine: c.Machine, Path: c.Path, Addr: c.Addr})
	}
}

// bootstrapLoop dials --bootstrap's addresses while this node is in an org
// and has no peer at all (at start, and whenever it is cut off): a node
// whose address book went stale (its peers all moved) finds the org again
// through a name that stays (a /dns4 address of a relay, say).
func (n *Node) bootstrapLoop() {
	if len(n.opts.Bootstrap) == 0 {
		return
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
		if n.rep.Org() != "" && len(n.host.Peers()) == 0 {
			ctx, cancel := context.WithTimeout(n.ctx, max(n.interval, 5*time.Second))
			if err := n.host.Connect(ctx, n.opts.Bootstrap); err != nil && n.ctx.Err() == nil {
				n.log.Debug("bootstrap", "err", err)
			}
			cancel()
		}
		t.Reset(n.interval)
	}
}
