package node

import (
	"context"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/node/orgsvc"
	"github.com/cshare/cshare/runtime"
)

// newOrgs builds the org service (package orgsvc) over this node's parts:
// after the replica and the host, before the protocols it serves.
func (n *Node) newOrgs() *orgsvc.Service {
	w := (*orgWiring)(n)
	return orgsvc.New(n.ctx, orgsvc.Deps{Ledger: n.rep, Host: n.host, Signer: n.signer,
		Topics: w, Peers: w, Machines: w, Runs: w, HoldDispatch: n.holdDispatch,
		Machine: n.id, DataDir: n.opts.DataDir, Interval: n.interval, Now: n.opts.Now, Log: n.log})
}

// orgWiring is the node as the org service's Deps see it.
type orgWiring Node

func (w *orgWiring) JoinTopics(org string) error { return (*Node)(w).joinTopics(org) }

func (w *orgWiring) TopicsJoined() bool {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.org != nil
}

func (w *orgWiring) AfterJoin(ctx context.Context) { (*Node)(w).afterJoin(ctx) }

func (w *orgWiring) GossipPeers() (peers int, joined bool) {
	w.mu.RLock()
	o := w.org
	w.mu.RUnlock()
	if o == nil {
		return 0, false
	}
	return len(o.Peers()), true
}

func (w *orgWiring) RememberPeer(id string, addrs []string) { (*Node)(w).rememberPeer(id, addrs) }

func (w *orgWiring) OrgMachines() []peer.ID { return (*Node)(w).orgMachines() }

func (w *orgWiring) MachineName() string { return (*Node)(w).machineName() }

func (w *orgWiring) MachineInfo(st *ledger.State, m *ledger.Machine, now time.Time) api.MachineInfo {
	return (*Node)(w).machineInfo(st, m, now)
}

func (w *orgWiring) MachineStatus(id string, now time.Time) string {
	return (*Node)(w).machineStatus(id, now)
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
	opts.API, opts.token = n.apiAddr, n.token
	return Start(ctx, opts)
}

// The org service's parts that the rest of the node calls.

// Reset is closed when the node is out of its org and must be started
// again in no org: call Restart (node.Run does).
func (n *Node) Reset() <-chan struct{} { return n.orgs.Leaving().Reset() }

// checkExit asks for a reset when the ledger says this node is out of its
// org; it runs after every ledger change (once the service is built) and
// at start.
func (n *Node) checkExit() {
	if n.orgs != nil {
		n.orgs.Leaving().CheckExit()
	}
}

// checkStanding holds dispatch when this machine has just been approved.
func (n *Node) checkStanding() {
	if n.orgs != nil {
		n.orgs.CheckStanding()
	}
}

// askTombstones runs at each turn of the redial loop (see
// orgsvc.Leaving.AskTombstones).
func (n *Node) askTombstones(now time.Time, ids []peer.ID, asked map[peer.ID]time.Time) {
	n.orgs.Leaving().AskTombstones(now, ids, asked)
}

func (n *Node) lastLeft() *api.PastOrg { return n.orgs.Leaving().LastLeft() }

// person is the person this machine acts for (orgsvc.Service.Person).
func (n *Node) person() string { return n.orgs.Person() }

// personIn is n.person() read from st.
func (n *Node) personIn(st *ledger.State) string { return n.orgs.PersonIn(st) }

// personName is st.PersonName(id).
func personName(st *ledger.State, id string) string { return st.PersonName(id) }

// The org's API (api.Service) is the org service's.

// CreateOrg implements api.Service.
func (n *Node) CreateOrg(ctx context.Context, req api.OrgCreate) (api.KeyResult, error) {
	return n.orgs.CreateOrg(ctx, req)
}

// Join implements api.Service.
func (n *Node) Join(ctx context.Context, req api.JoinRequest) (api.JoinResult, error) {
	return n.orgs.Join(ctx, n.withBootstrap(req))
}

// Org implements api.Service.
func (n *Node) Org(ctx context.Context) (api.OrgInfo, error) { return n.orgs.Org(ctx) }

// OrgKey implements api.Service.
func (n *Node) OrgKey(ctx context.Context, rotate bool) (api.KeyResult, error) {
	return n.orgs.OrgKey(ctx, rotate)
}

// Invite implements api.Service.
func (n *Node) Invite(ctx context.Context, req api.InviteRequest) (api.KeyResult, error) {
	return n.orgs.Invite(ctx, req)
}

// SetSettings implements api.Service.
func (n *Node) SetSettings(ctx context.Context, req api.SettingsRequest) (api.OrgInfo, error) {
	return n.orgs.SetSettings(ctx, req)
}

// TransferOrg implements api.Service.
func (n *Node) TransferOrg(ctx context.Context, to string) (api.OrgInfo, error) {
	return n.orgs.TransferOrg(ctx, to)
}

// Leave implements api.Service.
func (n *Node) Leave(ctx context.Context, req api.LeaveRequest) (api.LeftOrg, error) {
	return n.orgs.Leaving().Leave(ctx, req)
}

// DeleteOrg implements api.Service.
func (n *Node) DeleteOrg(ctx context.Context, req api.OrgDeleteRequest) (api.LeftOrg, error) {
	return n.orgs.Leaving().DeleteOrg(ctx, req)
}

// Machines implements api.Service.
func (n *Node) Machines(ctx context.Context) ([]api.MachineInfo, error) { return n.orgs.Machines(ctx) }

// Machine implements api.Service.
func (n *Node) Machine(ctx context.Context, id string) (api.MachineInfo, error) {
	return n.orgs.Machine(ctx, id)
}

// MachineAction implements api.Service.
func (n *Node) MachineAction(ctx context.Context, id, action string) (api.MachineInfo, error) {
	return n.orgs.MachineAction(ctx, id, action)
}

// Members implements api.Service.
func (n *Node) Members(ctx context.Context) ([]api.MemberInfo, error) { return n.orgs.Members(ctx) }

// SetRole implements api.Service.
func (n *Node) SetRole(ctx context.Context, id, role string) (api.MemberInfo, error) {
	return n.orgs.SetRole(ctx, id, role)
}

// RemoveMember implements api.Service.
func (n *Node) RemoveMember(ctx context.Context, id string) (string, error) {
	return n.orgs.RemoveMember(ctx, id)
}
