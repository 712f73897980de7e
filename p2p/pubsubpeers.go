package p2p

import (
	"context"
	"sync"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Pubsub writers. GossipSub sends to a peer only through the stream it
// opened when the peer connected. When a machine restarts quickly (a
// graceful restart takes well under a second) its new connection can be up
// before the old stream's death is handled; GossipSub then takes the peer
// for "still connected" and respawns the writer with a backoff that grows
// to 10 s and, after 4 such respawns within 10 minutes (a machine restarted
// four times, or simultaneous dials closing a duplicate connection), gives
// up: it never writes to that peer again while the connection lasts. Both
// sides then lose each other's heartbeats (the peer's subscriptions never
// reach it either), see each other offline and run each other's items
// (make chaos, sigterm-restart). psPeers tracks which peers have a writer
// (the router's AddPeer and RemovePeer), so that the node can close a
// connection that has none and dial again: a fresh connection gets a fresh
// writer.
type psPeers struct {
	mu sync.Mutex
	m  map[peer.ID]bool
}

func (s *psPeers) set(p peer.ID, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[peer.ID]bool{}
	}
	if on {
		s.m[p] = true
	} else {
		delete(s.m, p)
	}
}

func (s *psPeers) has(p peer.ID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[p]
}

// GossipWriter reports whether GossipSub has a stream to write to p.
func (h *Host) GossipWriter(p peer.ID) bool { return h.psPeers.has(p) }

// ResetPeer closes every connection to p (GossipSub forgets it cleanly:
// it is not connected any more) and dials it again with addrs, so that
// GossipSub opens a new writer (see psPeers).
func (h *Host) ResetPeer(ctx context.Context, p peer.ID, addrs []string) error {
	_ = h.h.Network().ClosePeer(p)
	return h.DialPeer(ctx, p, addrs)
}

// StopGossip stops the GossipSub router at once, without leaving the
// topics: no PRUNE goes out. A PRUNE tells each mesh peer to leave this
// machine out for a backoff (10 s on leaving a topic); the restarted
// process knows nothing of it and grafts at once, and each GRAFT within a
// backoff is a behaviour penalty, which after a few restarts took this
// machine's score below the publish and graylist thresholds of its peers:
// they neither sent it gossip nor took its own, saw it offline and ran its
// items (make chaos, sigterm-restart). Without the PRUNE, peers drop this
// machine from their meshes when its connections close, with no backoff.
// Close calls it first; a node calls it before it closes its org.
func (h *Host) StopGossip() { h.cancel() }
