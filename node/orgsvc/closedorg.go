package orgsvc

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
//     it connects (TellFormer): one that was offline then learns it is out
//     when it comes back, and leaves the org as one removed while online
//     does (CheckExit), with nothing written since.
//   - A pending machine gets no heartbeat (topic or stream): once approved,
//     it catches up with a peer (ledger and heartbeats, which carry the
//     leases) before it takes an item, as after a start
//     (node/peersvc/catchup.go): CheckStanding.

// SyncSource is the replica as the node serves it on p2p.SyncProtocol: an
// admitted joiner that was once a machine of the org (a removed machine
// joining again) gets the whole ledger, like any joiner.
type SyncSource struct {
	*replica.Replica
	Gate *p2p.Gate
}

// Horizon implements p2p.SyncHorizon.
func (s SyncSource) Horizon(p peer.ID) (cid.Cid, bool) {
	if s.Gate.IsJoiner(p) {
		return cid.Undef, false
	}
	return s.Replica.Horizon(p)
}

// tellFormerTimeout bounds telling a former machine it is out.
const tellFormerTimeout = 10 * time.Second

// TellFormer pushes to p, a removed or rejected machine connected to this
// node, the entry that put it out: it fetches it (and its ancestors, all it
// is served) at once.
func (s *Service) TellFormer(p peer.ID) {
	org := s.orgID()
	last, out := s.d.Ledger.Horizon(p)
	if org == "" || !out || !last.Defined() || s.d.Host.Gate().IsJoiner(p) {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, tellFormerTimeout)
	defer cancel()
	if err := p2p.AnnounceHeads(ctx, s.d.Host.LibP2P(), p, org, []cid.Cid{last}); err != nil {
		s.d.Log.Debug("could not tell a removed machine that it is out", "machine", p.String(), "err", err)
	}
}

// approvedNow reports whether this machine is approved in the ledger.
func (s *Service) approvedNow() bool { return s.d.Ledger.IsApproved(s.d.Machine) }

// approval tracks this machine's approval across ledger changes, from
// the end of Start (armed).
type approval struct{ armed, was atomic.Bool }

// ArmStanding starts CheckStanding's tracking, from this machine's
// approval now: the node calls it at the end of its start.
func (s *Service) ArmStanding() {
	s.approved.was.Store(s.approvedNow())
	s.approved.armed.Store(true)
}

// CheckStanding runs after every ledger change (from ArmStanding on).
// It holds dispatch until caught up when this machine has just been
// approved: as a pending machine it got no heartbeat, so it knows no
// machine's leases yet.
func (s *Service) CheckStanding() {
	if !s.approved.armed.Load() {
		return
	}
	now := s.approvedNow()
	if was := s.approved.was.Swap(now); now && !was {
		s.d.HoldDispatch("approval")
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
