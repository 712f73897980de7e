package p2p_test

import (
	"testing"

	"github.com/cshare/cshare/ledger/replica"
	"github.com/cshare/cshare/p2p"
)

// The node hands its ledger replica to the host as the sync protocol's
// source and the gossip's membership. The replica does not import p2p
// (p2p imports ledger: the layers point one way), so what it must satisfy is
// asserted here.
var (
	_ p2p.SyncSource  = (*replica.Replica)(nil)
	_ p2p.SyncHorizon = (*replica.Replica)(nil)
	_ p2p.Membership  = (*replica.Replica)(nil)
	_ p2p.LagAware    = (*replica.Replica)(nil)
	_ p2p.Former      = (*replica.Replica)(nil)
	_ p2p.Capper      = (*replica.Replica)(nil)
)

// TestReplicaSyncBatch: the replica's tests fake p2p's sync answers in frames
// of 2048 blocks; a change of p2p.SyncBatch must change them too.
func TestReplicaSyncBatch(t *testing.T) {
	if p2p.SyncBatch != 2048 {
		t.Fatalf("p2p.SyncBatch = %d: update syncBatch in ledger/replica/replica_test.go and bigchain_test.go", p2p.SyncBatch)
	}
}
