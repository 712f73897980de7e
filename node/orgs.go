package node

import (
	"context"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/node/peersvc"
	"github.com/cshare/cshare/runtime"
)

// orgWiring is the node as the org service's Deps see it (package orgsvc).
type orgWiring Node

func (w *orgWiring) JoinTopics(org string) error { return (*Node)(w).joinTopics(org) }

func (w *orgWiring) TopicsJoined() bool { return (*Node)(w).topics() != nil }

// AfterJoin publishes this machine's hardware and limits and a heartbeat.
func (w *orgWiring) AfterJoin(ctx context.Context) {
	(*Node)(w).publishMachineUpdate(ctx)
	w.peers.Joined(ctx)
}

func (w *orgWiring) GossipPeers() (peers int, joined bool) {
	o := (*Node)(w).topics()
	if o == nil {
		return 0, false
	}
	return len(o.Peers()), true
}

func (w *orgWiring) MachineName() string { return machineName(w.opts, w.cfg) }

func (w *orgWiring) MachineInfo(st *ledger.State, m *ledger.Machine, now time.Time) api.MachineInfo {
	return (*Node)(w).machineInfo(st, m, now)
}

// MachineStatus is the peer service's, except that a machine whose every
// connection closed and that has been silent since is offline as soon as
// the events say so (eventState.silent), not 3 intervals after its last
// heartbeat.
func (w *orgWiring) MachineStatus(id string, now time.Time) string {
	st := w.peers.MachineStatus(id, now)
	if (st == peersvc.StatusAvailable || st == peersvc.StatusBusy) && w.ev.silent(id, now) {
		return peersvc.StatusOffline
	}
	return st
}

func (w *orgWiring) EachDriver(fn func(runtime.Driver)) bool {
	if w.drivers == nil {
		return false
	}
	w.drivers.Each(fn)
	return true
}

func (w *orgWiring) RemoveForeignContracts(ctx context.Context, foreign func(org string) bool) {
	w.market.RemoveForeign(ctx, foreign)
}

// Restart closes the node and starts it again with the same options, on
// the API address it had and with the same token. When the node was out of
// its org (Reset is closed) it first stops and removes this machine's runs
// of that org and moves the org's data aside (or deletes it), so the new
// node is in no org (orgsvc.Leaving.Carry). It returns the new node; on an
// error the old one is closed all the same.
func (n *Node) Restart(ctx context.Context) (*Node, error) {
	e := n.orgs.Leaving().Exit()
	if err := n.Close(); err != nil {
		n.log.Warn("closing the node before it starts again", "err", err)
	}
	if err := n.orgs.Leaving().Carry(e); err != nil {
		return nil, err
	}
	opts := n.opts
	opts.API, opts.token, opts.dash = n.apiAddr, n.token, n.web
	return Start(ctx, opts)
}

// Reset is closed when the node is out of its org and must be started
// again in no org: call Restart (node.Run does).
func (n *Node) Reset() <-chan struct{} { return n.orgs.Leaving().Reset() }

// usageFigures are org usage from the org's creation and org show's
// totals, for /metrics.
func (n *Node) usageFigures() (api.OrgUsage, api.OrgTotals, bool) {
	if n.orgs == nil {
		return api.OrgUsage{}, api.OrgTotals{}, false
	}
	u, err := n.orgs.Usage().OrgUsage(n.ctx, 0, 0)
	if err != nil {
		return api.OrgUsage{}, api.OrgTotals{}, false
	}
	t, err := n.orgs.Usage().Totals()
	return u, t, err == nil
}
