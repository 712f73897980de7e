package peersvc

import (
	"context"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Redial keeps dialling every approved machine of the org this node is
// not connected to, until the context given to New ends, with the
// addresses the book and the peerstore hold for it, on the redialer's
// schedule (jittered exponential backoff up to one heartbeat interval). It
// looks at the connections at least every redialMin, so a lost connection
// is redialled within a second. It also keeps the address book up to date
// from connected machines' peerstore entries, and says once in the log
// when this node has no peer at all.
func (s *Service) Redial() {
	iv := s.d.Interval
	r := newRedialer(redialMin(iv), iv)
	poll := r.min
	t := time.NewTimer(0)
	defer t.Stop()
	dialing := map[string]bool{}
	done := make(chan string, 16)
	var learnt time.Time
	// A node that has had no peer for a while says so once (not at every
	// start, while its first dials are still on their way).
	var aloneSince time.Time
	said := false
	asked := map[peer.ID]time.Time{} // tombstone requests (orgsvc.Leaving.AskTombstones)
	mute := map[peer.ID]time.Time{}  // connected machines GossipSub has no writer to, since
	// attempt runs fn on its own goroutine for machine id, one at a time.
	attempt := func(id string, fn func(string)) {
		if dialing[id] {
			return // the last attempt has not ended
		}
		dialing[id] = true
		s.d.Spawn(func() {
			defer func() {
				select {
				case done <- id:
				case <-s.ctx.Done():
				}
			}()
			fn(id)
		})
	}
	for {
		select {
		case <-s.ctx.Done():
			return
		case id := <-done:
			delete(dialing, id)
			continue
		case <-t.C:
		}
		now := s.now()
		ids := s.OrgMachines()
		var lost []string
		connected := 0
		var reset []string
		for _, p := range ids {
			if s.d.Host.Connected(p) {
				connected++
				if gossipStuck(mute, p, s.d.Host.GossipWriter(p), now, iv) {
					reset = append(reset, p.String())
				}
				continue
			}
			delete(mute, p)
			lost = append(lost, p.String())
		}
		for _, id := range reset {
			if !dialing[id] {
				s.d.Log.Info("no gossip stream to a connected machine: reconnecting", "machine", id)
			}
			attempt(id, s.resetPeer)
		}
		if now.Sub(learnt) >= iv {
			learnt = now
			for _, p := range ids {
				if s.d.Host.Connected(p) {
					s.book.learn(p, s.d.Host.PeerAddrs(p))
				}
			}
		}
		switch none := len(ids) > 0 && len(s.d.Host.Peers()) == 0; {
		case none && aloneSince.IsZero():
			aloneSince = now
		case none && !said && now.Sub(aloneSince) >= aloneGrace(iv):
			said = true
			s.d.Log.Warn("no peer connected; reconnecting to the org's machines", "machines", len(ids))
		case !none && !aloneSince.IsZero():
			if said {
				s.d.Log.Info("reconnected", "machines_connected", connected, "machines", len(ids))
			}
			aloneSince, said = time.Time{}, false
		}
		s.d.Node.AskTombstones(now, ids, asked)
		due, next := r.due(now, lost)
		for _, id := range due {
			attempt(id, s.redial)
		}
		wait := poll
		if !next.IsZero() {
			wait = min(wait, max(next.Sub(now), 0))
		}
		t.Reset(wait)
	}
}

// aloneGrace is how long a node has no peer before it says so in its log.
func aloneGrace(iv time.Duration) time.Duration {
	return min(iv, 5*time.Second)
}

// redialTimeout bounds one reconnection attempt.
func (s *Service) redialTimeout() time.Duration {
	return max(s.d.Interval, 5*time.Second)
}

// gossipStuck reports whether machine p, connected, has had no GossipSub
// writer (see p2p.Host.GossipWriter) for gossipResetAfter: its heartbeats
// and ours no longer pass, and only a new connection brings the writer
// back. mute remembers since when each machine has had none.
func gossipStuck(mute map[peer.ID]time.Time, p peer.ID, writer bool, now time.Time, iv time.Duration) bool {
	if writer {
		delete(mute, p)
		return false
	}
	since, ok := mute[p]
	if !ok || now.Before(since) {
		mute[p] = now
		return false
	}
	if now.Sub(since) < gossipResetAfter(iv) {
		return false
	}
	delete(mute, p) // a new grace after the reset
	return true
}

// gossipResetAfter is how long a connected machine may have no GossipSub
// writer before its connection is reset: a stream opens within
// milliseconds of a connection, so half an interval (at least 500 ms, at
// most 5 s) is well past that, and well before the 3 intervals that make a
// machine offline.
func gossipResetAfter(iv time.Duration) time.Duration {
	return min(max(iv/2, 500*time.Millisecond), 5*time.Second)
}

// resetPeer closes the connections to machine id and dials it again.
func (s *Service) resetPeer(id string) {
	p, err := peer.Decode(id)
	if err != nil {
		return
	}
	ctx, c := context.WithTimeout(s.ctx, s.redialTimeout())
	defer c()
	if err := s.d.Host.ResetPeer(ctx, p, s.book.addrs(id)); err != nil && s.ctx.Err() == nil {
		s.d.Log.Debug("reconnect for gossip", "machine", id, "err", err)
	}
}

// redial makes one attempt to connect to machine id.
func (s *Service) redial(id string) {
	p, err := peer.Decode(id)
	if err != nil {
		return
	}
	addrs := s.book.addrs(id)
	ctx, c := context.WithTimeout(s.ctx, s.redialTimeout())
	defer c()
	if err := s.d.Host.DialPeer(ctx, p, addrs); err != nil {
		if s.ctx.Err() == nil {
			s.d.Log.Debug("redial", "machine", id, "addrs", len(addrs), "err", err)
		}
		return
	}
	s.d.Log.Debug("redialled", "machine", id)
}

// EnsureConnected dials machine p with every address the address book
// knows for it when it is not connected: a stream opened to a machine
// whose connection was just reset (a peer approved a moment ago, see
// p2p.Gate) would otherwise dial only the peerstore's addresses, which may
// be none. A failed dial is left for the stream to report.
func (s *Service) EnsureConnected(ctx context.Context, p peer.ID) {
	addrs := s.awaitAddrs(ctx, p)
	// Connected now may be closed a moment later (the gate resets a
	// connection when a machine is let into a topic): the stream then dials
	// what the peerstore holds, which for a connection that came in from p
	// may be nothing yet.
	s.d.Host.KeepAddrs(p, addrs)
	if s.d.Host.LibP2P().Network().Connectedness(p) == network.Connected {
		return
	}
	_ = s.d.Host.DialPeer(ctx, p, addrs)
}

// awaitAddrs returns the address book's addresses of machine p. When it
// has none and p is neither connected nor in the peerstore (a machine
// this node has had no heartbeat from yet, such as one approved a moment
// ago whose heartbeats reach a newly approved node only after its
// reconnection), it waits for them, as a heartbeat brings them, for up to
// three heartbeat intervals or until ctx ends.
func (s *Service) awaitAddrs(ctx context.Context, p peer.ID) []string {
	addrs := s.book.addrs(p.String())
	if len(addrs) > 0 || s.d.Host.LibP2P().Network().Connectedness(p) == network.Connected || len(s.d.Host.PeerAddrs(p)) > 0 {
		return addrs
	}
	ctx, cancel := context.WithTimeout(ctx, 3*s.d.Interval)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for len(addrs) == 0 {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		addrs = s.book.addrs(p.String())
	}
	return addrs
}
