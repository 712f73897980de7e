package node

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/replica"
	"github.com/cshare/cshare/p2p"
)

// The node's side of the closed org (p2p/gate.go) where machines change
// standing:
//
//   - A removed or rejected machine is served the ledger only up to the
//     entry that put it out (replica.Horizon), and is told that entry when
//     it connects (tellFormer): one that was offline then learns it is out
//     when it comes back, and leaves the org as one removed while online
//     does (checkExit), with nothing written since.
//   - A pending machine gets no heartbeat (topic or stream): once approved,
//     it catches up with a peer (ledger and heartbeats, which carry the
//     leases) before it takes an item, as after a start (catchup.go).

// syncSource is the replica as the node serves it on p2p.SyncProtocol: an
// admitted joiner that was once a machine of the org (a removed machine
// joining again) gets the whole ledger, like any joiner.
type syncSource struct {
	*replica.Replica
	gate *p2p.Gate
}

// Horizon implements p2p.SyncHorizon.
func (s syncSource) Horizon(p peer.ID) (cid.Cid, bool) {
	if s.gate.IsJoiner(p) {
		return cid.Undef, false
	}
	return s.Replica.Horizon(p)
}

// tellFormerTimeout bounds telling a former machine it is out.
const tellFormerTimeout = 10 * time.Second

// tellFormer pushes to p, a removed or rejected machine connected to this
// node, the entry that put it out: it fetches it (and its ancestors, all it
// is served) at once.
func (n *Node) tellFormer(p peer.ID) {
	org := n.orgID()
	last, out := n.rep.Horizon(p)
	if org == "" || !out || !last.Defined() || n.host.Gate().IsJoiner(p) {
		return
	}
	ctx, cancel := context.WithTimeout(n.ctx, tellFormerTimeout)
	defer cancel()
	if err := p2p.AnnounceHeads(ctx, n.host.LibP2P(), p, org, []cid.Cid{last}); err != nil {
		n.log.Debug("could not tell a removed machine that it is out", "machine", p.String(), "err", err)
	}
}

// approvedNow reports whether this machine is approved in the ledger.
func (n *Node) approvedNow() bool { return n.rep.IsApproved(n.id) }

// approval tracks this machine's approval across ledger changes, from
// the end of Start (armed).
type approval struct{ armed, was atomic.Bool }

// checkStanding runs after every ledger change (from the end of Start).
// It holds dispatch until caught up when this machine has just been
// approved: as a pending machine it got no heartbeat, so it knows no
// machine's leases yet.
func (n *Node) checkStanding() {
	if !n.approved.armed.Load() {
		return
	}
	now := n.approvedNow()
	if was := n.approved.was.Swap(now); now && !was {
		n.holdDispatch("approval")
	}
}

// ownStanding is this machine's status in st and the entry that set it
// (its last history event), for the log of a node that is out.
func ownStanding(st *ledger.State, me string) (ev ledger.MachineEvent, ok bool) {
	m := st.Machines[me]
	if m == nil || len(m.History) == 0 {
		return ev, false
	}
	return m.History[len(m.History)-1], true
}
