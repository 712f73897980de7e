package p2p

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/p2p/protocol/holepunch"
)

// Connection is one connected peer and the path of its best connection.
type Connection struct {
	Machine string // peer ID
	Path    string // PathDirect or PathRelayed
	Addr    string // the remote address of that connection
}

// Connections are the connected peers, sorted, each with its best
// connection: a direct one if there is one, else one through a relay.
func (h *Host) Connections() []Connection {
	var out []Connection
	for _, p := range h.Peers() {
		if c := bestConn(h.h.Network().ConnsToPeer(p)); c != nil {
			out = append(out, Connection{Machine: p.String(), Path: connPath(c), Addr: c.RemoteMultiaddr().String()})
		}
	}
	return out
}

// Path is how this host reaches p now: PathDirect, PathRelayed, or "" when
// it is not connected.
func (h *Host) Path(p peer.ID) string {
	if c := bestConn(h.h.Network().ConnsToPeer(p)); c != nil {
		return connPath(c)
	}
	return ""
}

func connPath(c network.Conn) string {
	if isRelayAddr(c.RemoteMultiaddr()) {
		return PathRelayed
	}
	return PathDirect
}

// bestConn is the first direct connection of cs, else the first open one.
func bestConn(cs []network.Conn) network.Conn {
	var best network.Conn
	for _, c := range cs {
		if c.IsClosed() {
			continue
		}
		if !isRelayAddr(c.RemoteMultiaddr()) {
			return c
		}
		if best == nil {
			best = c
		}
	}
	return best
}

// directDue makes p's next direct attempt due now, if p is reached only
// through a relay.
func (h *Host) directDue(p peer.ID) {
	h.nat.mu.Lock()
	defer h.nat.mu.Unlock()
	if s := h.nat.paths[p]; s != nil {
		s.next, s.backoff = time.Time{}, directRetryMin
	}
}

// keepPaths is pathLoop's tick: for each peer reached only through a
// relay, a direct attempt when its backoff is due; for each peer with a
// direct connection, its relayed ones closed once only gossip runs on
// them.
func (h *Host) keepPaths(now time.Time) {
	nw := h.h.Network()
	peers := nw.Peers()
	connected := make(map[peer.ID]bool, len(peers))
	type attempt struct {
		p       peer.ID
		inbound bool
	}
	var due []attempt
	canPunch := len(h.holePunchAddrs()) > 0
	h.nat.mu.Lock()
	if canPunch && !h.nat.canPunch {
		for _, s := range h.nat.paths {
			s.next, s.backoff = time.Time{}, directRetryMin
		}
	}
	h.nat.canPunch = canPunch
	h.nat.mu.Unlock()
	for _, p := range peers {
		connected[p] = true
		var direct bool
		var relayed []network.Conn
		for _, c := range nw.ConnsToPeer(p) {
			if c.IsClosed() {
				continue
			}
			if isRelayAddr(c.RemoteMultiaddr()) {
				relayed = append(relayed, c)
			} else {
				direct = true
			}
		}
		if direct {
			h.nat.mu.Lock()
			delete(h.nat.paths, p)
			h.nat.mu.Unlock()
			for _, c := range relayed {
				if onlyGossip(c) {
					_ = c.Close()
				}
			}
			continue
		}
		if len(relayed) == 0 {
			continue
		}
		inbound := slices.ContainsFunc(relayed, func(c network.Conn) bool { return c.Stat().Direction == network.DirInbound })
		h.nat.mu.Lock()
		s := h.nat.paths[p]
		if s == nil {
			s = &pathState{next: now.Add(directRetryMin), backoff: directRetryMin}
			h.nat.paths[p] = s
		}
		if !now.Before(s.next) && !h.nat.attempts[p] {
			s.next = now.Add(jittered(s.backoff))
			s.backoff = min(2*s.backoff, directRetryMax)
			h.nat.attempts[p] = true
			due = append(due, attempt{p, inbound})
		}
		h.nat.mu.Unlock()
	}
	h.nat.mu.Lock()
	for p := range h.nat.paths {
		if !connected[p] {
			delete(h.nat.paths, p)
		}
	}
	for p := range h.nat.lastPunch {
		if !connected[p] {
			delete(h.nat.lastPunch, p)
		}
	}
	h.nat.mu.Unlock()
	for _, a := range due {
		go h.tryDirect(a.p, a.inbound)
	}
}

// jittered is b less up to half of it at random, so peers that lost
// their direct path together do not retry in step.
func jittered(b time.Duration) time.Duration {
	return b - rand.N(b/2+1)
}

// onlyGossip reports whether c carries no stream but gossip and libp2p's
// own: closing it loses nothing (pubsub reopens its stream on the
// peer's direct connection).
func onlyGossip(c network.Conn) bool {
	for _, s := range c.GetStreams() {
		p := string(s.Protocol())
		if p == "" || strings.HasPrefix(p, "/meshsub/") || strings.HasPrefix(p, "/ipfs/id/") || strings.HasPrefix(p, "/ipfs/ping/") {
			continue
		}
		return false
	}
	return true
}

// tryDirect makes one attempt at a direct connection to p, reached only
// through a relay. DCUtR is started by the side the relayed connection
// came in to: that side dials p's public addresses, then punches. The
// other side waits for it (its own dials would only hold connection slots
// with dials into p's NAT).
func (h *Host) tryDirect(p peer.ID, inbound bool) {
	defer func() {
		h.nat.mu.Lock()
		delete(h.nat.attempts, p)
		h.nat.mu.Unlock()
	}()
	if !inbound || h.nat.hps == nil || len(h.holePunchAddrs()) == 0 {
		return
	}
	// DirectConnect returns at once when a punch to p is already on.
	if err := h.nat.hps.DirectConnect(p); err != nil {
		h.log.Debug("no direct connection yet", "peer", p, "err", err)
	}
}

// punching reports whether a direct connection to p is being sought now:
// its relayed connection is younger than punchWindow, or an attempt or a
// hole punch is in flight.
func (h *Host) punching(p peer.ID, now time.Time) bool {
	h.nat.mu.Lock()
	busy := h.nat.attempts[p] || now.Sub(h.nat.lastPunch[p]) < punchWindow
	h.nat.mu.Unlock()
	if busy {
		return true
	}
	for _, c := range h.h.Network().ConnsToPeer(p) {
		if isRelayAddr(c.RemoteMultiaddr()) && now.Sub(c.Stat().Opened) < punchWindow {
			return true
		}
	}
	return false
}

// bulkPoll is how often Bulk looks for the direct connection it waits for.
const bulkPoll = 100 * time.Millisecond

// awaitDirect waits, while p is reached only through a relay and a direct
// connection to it is being sought, for that connection (until ctx ends or
// punchWindow passes), and returns the path to use.
func (h *Host) awaitDirect(ctx context.Context, p peer.ID) string {
	deadline := time.Now().Add(punchWindow)
	for {
		path := h.Path(p)
		if path != PathRelayed || !h.punching(p, time.Now()) || !time.Now().Before(deadline) {
			return path
		}
		select {
		case <-ctx.Done():
			return path
		case <-time.After(bulkPoll):
		}
	}
}

// Bulk is the host through which bulk streams (dataset blocks, item
// output) are opened: a stream to a peer reached only through a relay
// waits for the direct connection being punched to it, if one is, and
// otherwise goes through the relay (within the relay's limits: a limited
// relayed connection is used too rather than waited on).
func (h *Host) Bulk() host.Host { return bulkHost{Host: h.h, h: h} }

type bulkHost struct {
	host.Host
	h *Host
}

func (b bulkHost) NewStream(ctx context.Context, p peer.ID, pids ...protocol.ID) (network.Stream, error) {
	b.h.awaitDirect(ctx, p)
	return b.Host.NewStream(network.WithAllowLimitedConn(ctx, "cshare bulk"), p, pids...)
}

// punchEvents is the hole punch service's event tracer: it notes when a
// punch with a peer begins (see punching).
type punchEvents struct{ h *Host }

func (e punchEvents) Trace(ev *holepunch.Event) {
	switch ev.Type {
	case holepunch.StartHolePunchEvtT, holepunch.HolePunchAttemptEvtT:
		e.h.nat.mu.Lock()
		e.h.nat.lastPunch[ev.Remote] = time.Now()
		e.h.nat.mu.Unlock()
	case holepunch.EndHolePunchEvtT:
		e.h.nat.mu.Lock()
		delete(e.h.nat.lastPunch, ev.Remote)
		e.h.nat.mu.Unlock()
	case holepunch.ProtocolErrorEvtT:
		e.h.nat.metrics.punchFailed()
	}
}
