package node

import (
	"context"
	"encoding/json"
	"slices"
	"sort"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/ledger"
)

// The address book: for each machine, the addresses it can be dialled at,
// freshest first, kept in store meta "peers" so a restarted node can find
// the org again without an org key. Addresses come from signed heartbeats
// (a machine's own list of its current addresses), from the heartbeats a
// peer relays at start (learnMachines), from the org key a node joined
// with, and from the peerstore of connected machines (identify). A machine's
// fresh list goes first and older addresses it no longer names are kept
// after it, up to maxAddrsPerPeer: a laptop that moves between networks and
// back is still found at the address it had before.
const (
	peersMetaKey    = "peers"
	maxAddrsPerPeer = 16
)

// rememberPeer merges addrs (current addresses of machine id, best first)
// into the address book and persists it when it changed.
func (n *Node) rememberPeer(id string, addrs []string) {
	if id == n.idStr || len(addrs) == 0 {
		return
	}
	n.peersMu.Lock()
	defer n.peersMu.Unlock()
	if n.known == nil {
		n.known = map[string][]string{}
	}
	old := n.known[id]
	if len(old) >= len(addrs) && slices.Equal(old[:len(addrs)], addrs) {
		return // what every heartbeat of a machine that has not moved says
	}
	merged := mergeAddrs(addrs, old, maxAddrsPerPeer)
	if slices.Equal(old, merged) {
		return
	}
	n.known[id] = merged
	n.saveKnownLocked()
}

// learnPeerAddrs adds what the peerstore knows of machine id (a connected
// machine's listen addresses, from identify) after the addresses the book
// has for it: those come from the machine itself and stay first.
func (n *Node) learnPeerAddrs(id peer.ID) {
	extra := n.host.PeerAddrs(id)
	if len(extra) == 0 {
		return
	}
	key := id.String()
	n.peersMu.Lock()
	defer n.peersMu.Unlock()
	if n.known == nil {
		n.known = map[string][]string{}
	}
	merged := mergeAddrs(n.known[key], extra, maxAddrsPerPeer)
	if slices.Equal(n.known[key], merged) {
		return
	}
	n.known[key] = merged
	n.saveKnownLocked()
}

func (n *Node) saveKnownLocked() {
	b, _ := json.Marshal(n.known)
	if n.store != nil {
		if err := n.store.SetMeta(peersMetaKey, b); err != nil {
			n.log.Debug("save the address book", "err", err)
		}
	}
}

// mergeAddrs is fresh, then the addresses of old not in fresh, without
// duplicates, at most max of them.
func mergeAddrs(fresh, old []string, max int) []string {
	out := make([]string, 0, min(len(fresh)+len(old), max))
	seen := map[string]bool{}
	for _, list := range [][]string{fresh, old} {
		for _, a := range list {
			if a == "" || seen[a] || len(out) == max {
				continue
			}
			seen[a] = true
			out = append(out, a)
		}
	}
	return out
}

// knownAddrs is the address book's list for machine id.
func (n *Node) knownAddrs(id string) []string {
	n.peersMu.Lock()
	defer n.peersMu.Unlock()
	return slices.Clone(n.known[id])
}

// loadKnownPeers reads the address book from the store.
func (n *Node) loadKnownPeers() {
	b, err := n.store.Meta(peersMetaKey)
	if err != nil {
		return
	}
	var known map[string][]string
	if json.Unmarshal(b, &known) != nil {
		n.log.Warn("the stored address book does not decode; starting without it")
		return
	}
	n.peersMu.Lock()
	n.known = known
	n.peersMu.Unlock()
}

// orgMachines returns the other approved machines of this node's org (none
// once this machine is removed or rejected).
func (n *Node) orgMachines() (ids []peer.ID) {
	lg, unlock := n.rep.ReadLog()
	defer unlock()
	st := lg.State()
	if st.Org == "" {
		return nil
	}
	if me := st.Machines[n.idStr]; me != nil && (me.Status == ledger.MachineRemoved || me.Status == ledger.MachineRejected) {
		return nil // no longer of the org: nobody to reach
	}
	for id, m := range st.Machines {
		if m.Status != ledger.MachineApproved {
			continue
		}
		if id == n.idStr {
			continue
		}
		if p, err := peer.Decode(id); err == nil {
			ids = append(ids, p)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// reconnecting reports whether this node has no peer at all while its org
// has other approved machines: it is cut off and trying to reach them.
func (n *Node) reconnecting() bool {
	if len(n.host.Peers()) > 0 {
		return false
	}
	ids := n.orgMachines()
	return len(ids) > 0
}

// redialLoop keeps dialling every approved machine of the org this node is
// not connected to, for as long as it runs, with the addresses the book and
// the peerstore hold for it, on the redialer's schedule (jittered
// exponential backoff up to one heartbeat interval). It looks at the
// connections at least every redialMin, so a lost connection is redialled
// within a second. It also keeps the address book up to date from connected
// machines' peerstore entries, and says once in the log when this node has
// no peer at all.
func (n *Node) redialLoop() {
	defer n.wg.Done()
	r := newRedialer(redialMin(n.interval), n.interval)
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
	asked := map[peer.ID]time.Time{} // tombstone requests (leave.go)
	mute := map[peer.ID]time.Time{}  // connected machines GossipSub has no writer to, since
	for {
		select {
		case <-n.ctx.Done():
			return
		case id := <-done:
			delete(dialing, id)
			continue
		case <-t.C:
		}
		now := n.now()
		ids := n.orgMachines()
		var lost []string
		connected := 0
		var reset []string
		for _, p := range ids {
			if n.host.Connected(p) {
				connected++
				if gossipStuck(mute, p, n.host.GossipWriter(p), now, n.interval) {
					reset = append(reset, p.String())
				}
				continue
			}
			delete(mute, p)
			lost = append(lost, p.String())
		}
		for _, id := range reset {
			if dialing[id] {
				continue
			}
			dialing[id] = true
			n.log.Info("no gossip stream to a connected machine: reconnecting", "machine", id)
			n.spawn(func() {
				defer func() {
					select {
					case done <- id:
					case <-n.ctx.Done():
					}
				}()
				n.resetPeer(id)
			})
		}
		if now.Sub(learnt) >= n.interval {
			learnt = now
			for _, p := range ids {
				if n.host.Connected(p) {
					n.learnPeerAddrs(p)
				}
			}
		}
		switch none := len(ids) > 0 && len(n.host.Peers()) == 0; {
		case none && aloneSince.IsZero():
			aloneSince = now
		case none && !said && now.Sub(aloneSince) >= aloneGrace(n.interval):
			said = true
			n.log.Warn("no peer connected; reconnecting to the org's machines", "machines", len(ids))
		case !none && !aloneSince.IsZero():
			if said {
				n.log.Info("reconnected", "machines_connected", connected, "machines", len(ids))
			}
			aloneSince, said = time.Time{}, false
		}
		n.askTombstones(now, ids, asked)
		due, next := r.due(now, lost)
		for _, id := range due {
			if dialing[id] {
				continue // the last attempt has not ended
			}
			dialing[id] = true
			n.spawn(func() {
				defer func() {
					select {
					case done <- id:
					case <-n.ctx.Done():
					}
				}()
				n.redial(id)
			})
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
func (n *Node) redialTimeout() time.Duration {
	return max(n.interval, 5*time.Second)
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
func (n *Node) resetPeer(id string) {
	p, err := peer.Decode(id)
	if err != nil {
		return
	}
	ctx, c := context.WithTimeout(n.ctx, n.redialTimeout())
	defer c()
	if err := n.host.ResetPeer(ctx, p, n.knownAddrs(id)); err != nil && n.ctx.Err() == nil {
		n.log.Debug("reconnect for gossip", "machine", id, "err", err)
	}
}

// ensureConnected dials machine p with every address the address book
// knows for it when it is not connected: a stream opened to a machine
// whose connection was just reset (a peer approved a moment ago, see
// p2p.Gate) would otherwise dial only the peerstore's addresses, which may
// be none. A failed dial is left for the stream to report.
func (n *Node) ensureConnected(ctx context.Context, p peer.ID) {
	addrs := n.awaitAddrs(ctx, p)
	// Connected now may be closed a moment later (the gate resets a
	// connection when a machine is let into a topic): the stream then dials
	// what the peerstore holds, which for a connection that came in from p
	// may be nothing yet.
	n.host.KeepAddrs(p, addrs)
	if n.host.LibP2P().Network().Connectedness(p) == network.Connected {
		return
	}
	_ = n.host.DialPeer(ctx, p, addrs)
}

// awaitAddrs returns the address book's addresses of machine p. When it
// has none and p is neither connected nor in the peerstore (a machine
// this node has had no heartbeat from yet, such as one approved a moment
// ago whose heartbeats reach a newly approved node only after its
// reconnection), it waits for them, as a heartbeat brings them, for up to
// three heartbeat intervals or until ctx ends.
func (n *Node) awaitAddrs(ctx context.Context, p peer.ID) []string {
	addrs := n.knownAddrs(p.String())
	if len(addrs) > 0 || n.host.LibP2P().Network().Connectedness(p) == network.Connected || len(n.host.PeerAddrs(p)) > 0 {
		return addrs
	}
	ctx, cancel := context.WithTimeout(ctx, 3*n.interval)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for len(addrs) == 0 {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		addrs = n.knownAddrs(p.String())
	}
	return addrs
}

// redial makes one attempt to connect to machine id.
func (n *Node) redial(id string) {
	p, err := peer.Decode(id)
	if err != nil {
		return
	}
	addrs := n.knownAddrs(id)
	ctx, c := context.WithTimeout(n.ctx, n.redialTimeout())
	defer c()
	if err := n.host.DialPeer(ctx, p, addrs); err != nil {
		if n.ctx.Err() == nil {
			n.log.Debug("redial", "machine", id, "addrs", len(addrs), "err", err)
		}
		return
	}
	n.log.Debug("redialled", "machine", id)
}
