package node

import (
	"context"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/replica"
	"github.com/cshare/cshare/p2p"
)

// The ledger itself is n.rep (package ledger/replica); this file wires it to
// the node: its host, its gossip topic, its goroutines, metrics, the
// scheduler and the org service.

// openReplica opens the ledger replica over n.store.
func (n *Node) openReplica() error {
	rep, err := replica.Open(n.store, n.signer, replica.Config{
		Logger: n.log,
		Fetch: func(ctx context.Context, p peer.ID, org string, want []cid.Cid, floor uint64, fn func([][]byte) error) error {
			return p2p.FetchBlocks(ctx, n.host.LibP2P(), p, org, want, floor, fn)
		},
		FetchCheckpoint: func(ctx context.Context, p peer.ID, org string) (replica.Offer, error) {
			o, err := p2p.FetchCheckpoint(ctx, n.host.LibP2P(), p, org)
			return replica.Offer(o), err
		},
		Publish: func(ctx context.Context, payload []byte) error {
			o := n.topics()
			if o == nil {
				return nil
			}
			return o.PublishHeads(ctx, payload)
		},
		Spawn:   n.spawn,
		Dropped: func(reason string, k int) { n.metrics.dropped.WithLabelValues(reason).Add(float64(k)) },
		OnAdded: func(added []*ledger.Entry) {
			n.metrics.entries.Set(float64(n.rep.Len()))
			n.kickScheduler()
			n.ev.ledger(n.rep, added)
			if n.orgs != nil { // once the org service is built
				n.orgs.Leaving().CheckExit() // out of the org: ask for a reset
				n.orgs.CheckStanding()       // just approved: hold dispatch
			}
		},
		HeadsHook: n.opts.HeadsHook,
		Now:       n.opts.Now,
	})
	if err != nil {
		return err
	}
	n.rep = rep
	n.metrics.entries.Set(float64(rep.Len()))
	n.kickScheduler()
	return nil
}

// headsLoop announces heads periodically (the on-change announce is in
// replica.Replica.Write).
//
// Heartbeats carry heads too (see replica.Replica.WantHeads), so this
// periodic announcement is a backstop, for machines that do not heartbeat
// (pending ones) and for lost messages: every 3 intervals, and not more often
// than every 2 s. It would otherwise be most of the gossip in a small org.
func (n *Node) headsLoop() {
	t := time.NewTicker(max(3*n.interval, 2*time.Second))
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
			n.rep.Announce(n.ctx)
		}
	}
}
