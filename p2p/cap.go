package p2p

import "github.com/libp2p/go-libp2p/core/peer"

// Capper is optionally implemented by a Membership and a SyncSource:
// Capped reports a machine the ledger's budget of entries without effect
// has capped in its current window (docs/design.md §5.8). Every node folds
// the same cap, so every node refuses the same machine: its heads
// announcements on the ledger topic are ignored (counted as
// IgnoreCapped; not rejected, since a forwarder whose ledger has not yet
// folded the cap is honest) and its sync requests are refused. The fold
// does not look at the cap: its entries that reach a node from another
// machine (pushed in that machine's announcement, or in its sync answer)
// are taken as any entry is, so the honest nodes end on one DAG
// (ledger/replica/cap.go).
type Capper interface {
	Capped(id peer.ID) bool
}

// IgnoreCapped: the sender is a capped machine (Capper).
const IgnoreCapped = "capped"

// errCapped answers a capped machine's sync request.
const errCapped = "this machine is capped: too many ledger entries without effect since the last checkpoint"

// isCapped reports whether x is a Capper that caps p.
func isCapped(x any, p peer.ID) bool {
	c, ok := x.(Capper)
	return ok && c.Capped(p)
}
