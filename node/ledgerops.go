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
// the node: its host, its gossip topic, its goroutines, metrics and scheduler.

// openReplica opens the ledger replica over n.store.
func (n *Node) openReplica() error {
	rep, err := replica.Open(n.store, n.signer, replica.Config{
		Logger: n.log,
		Fetch: func(ctx context.Context, p peer.ID, org string, want []cid.Cid, floor uint64, fn func([][]byte) error) error {
			return p2p.FetchBlocks(ctx, n.host.LibP2P(), p, org, want, floor, fn)
		},
		Publish: func(ctx context.Context, payload []byte) error {
			n.mu.RLock()
			o := n.org
			n.mu.RUnlock()
			if o == nil {
				return nil
			}
			return o.PublishHeads(ctx, payload)
		},
		Spawn:   n.spawn,
		Dropped: func(reason string, k int) { n.metrics.dropped.WithLabelValues(reason).Add(float64(k)) },
		OnAdded: func([]*ledger.Entry) {
			n.metrics.entries.Set(float64(n.rep.Len()))
			n.kickScheduler()
			n.checkExit()
			n.checkStanding()
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

// write signs a new entry with this node's key, stores it durably, folds it,
// and announces the new heads (see replica.Replica.Write).
func (n *Node) write(ctx context.Context, kind string, payload any) (*ledger.Entry, error) {
	return n.rep.Write(ctx, kind, payload)
}

// snapshot runs fn with the state under the read lock.
func (n *Node) snapshot(fn func(st *ledger.State)) { n.rep.View(fn) }

// orgID is the org this node belongs to, or "".
func (n *Node) orgID() string { return n.rep.Org() }

// announce publishes our heads on the org's ledger topic.
func (n *Node) announce(ctx context.Context) { n.rep.Announce(ctx) }

// headsLoop announces heads periodically (the on-change announce is in write).
//
// Heartbeats carry heads too (see replica.Replica.WantHeads), so this
// periodic announcement is a backstop, for machines that do not heartbeat
// (pending ones) and for lost messages: every 3 intervals, and not more often
// than every 2 s. It would otherwise be most of the gossip in a small org.
func (n *Node) headsLoop() {
	defer n.wg.Done()
	t := time.NewTicker(max(3*n.interval, 2*time.Second))
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
			n.announce(n.ctx)
		}
	}
}
