package node

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Catching up before dispatch. A node that starts, or finds it was not
// running for longer than a heartbeat interval (a SIGSTOP, a suspended
// laptop), holds a stale ledger and stale leases: the items it would take
// may have been finished, or be running elsewhere. So it takes no new item
// until it has caught up: synced the ledger with a peer (everything the
// peer has, from its heads) and learnt from that peer the latest heartbeat
// of every machine the peer has seen, which carry their leases. Its own
// adopted runs go on meanwhile. With no peer reachable for two intervals it
// works alone and says so; with peers reachable but none answering for
// catchUpCap intervals it works anyway, and says so too.

// catchUpCap is how many intervals a node waits for a peer's answer while
// peers are connected.
const catchUpCap = 4

// gate is the catch-up state: closed from a start or a pause until caught
// up. The zero value is open.
type gate struct {
	closed atomic.Bool

	mu    sync.Mutex
	gen   uint64    // bumped each time the gate closes
	since time.Time // when it closed
	why   string    // "start" or "pause"
}

// close shuts the gate at now and returns its generation.
func (g *gate) close(now time.Time, why string) uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gen++
	g.since, g.why = now, why
	g.closed.Store(true)
	return g.gen
}

// open opens the gate if it is still closed in generation gen.
func (g *gate) open(gen uint64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gen != gen || !g.closed.Load() {
		return false
	}
	g.closed.Store(false)
	return true
}

// state returns the generation and when the gate closed.
func (g *gate) state() (uint64, time.Time, string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.gen, g.since, g.why
}

// catchUpVerdict says what a closed gate should do at now, given when it
// closed, the heartbeat interval and whether a peer is connected: keep
// waiting (""), work alone ("alone": no peer for two intervals) or work
// anyway ("timeout": peers, but none answered for catchUpCap intervals).
func catchUpVerdict(since, now time.Time, interval time.Duration, peers bool) string {
	waited := now.Sub(since)
	switch {
	case !peers && waited >= 2*interval:
		return "alone"
	case waited >= catchUpCap*interval:
		return "timeout"
	}
	return ""
}

// holdDispatch closes the gate (why: "start" or "pause") and starts
// catching up, unless the node is in no org or alone in it.
func (n *Node) holdDispatch(why string) {
	org := n.orgID()
	if org == "" || len(n.orgMachines()) == 0 {
		return
	}
	gen := n.gate.close(n.now(), why)
	n.log.Info("catching up with a peer before taking new items", "after", why)
	n.spawn(func() { n.catchUp(gen, org) })
}

// catchUp syncs the ledger with one connected machine of the org and
// learns the heartbeats it has seen, then opens the gate (generation gen).
func (n *Node) catchUp(gen uint64, org string) {
	var caughtUp time.Time // when a catch-up with a peer succeeded
	var with peer.ID
	for n.ctx.Err() == nil {
		if g, _, _ := n.gate.state(); g != gen {
			return // closed again since: that catch-up goes on
		}
		peers := 0
		machines := map[peer.ID]bool{}
		for _, id := range n.orgMachines() {
			machines[id] = true
		}
		for _, p := range n.host.Peers() {
			if !machines[p] || !caughtUp.IsZero() {
				continue
			}
			peers++
			if n.catchUpWith(p, org) {
				caughtUp, with = n.now(), p
			}
		}
		if !caughtUp.IsZero() {
			// The peer may have started a moment ago itself (every machine
			// killed and restarted at once) and know no machine's
			// heartbeat: a machine connected to this one whose runs it has
			// not heard of may be running the very items this one would
			// take (it sends a heartbeat with them as it starts). Wait for
			// one from each, for up to one and a half intervals.
			missing := n.connectedUnheard(machines)
			if len(missing) == 0 || n.now().Sub(caughtUp) >= n.interval*3/2 {
				if n.gate.open(gen) {
					n.log.Info("caught up; taking new items", "peer", with.String(), "unheard", len(missing))
					n.kickScheduler()
					n.sched.Broadcast()
					n.spawn(func() { n.publishMachineUpdate(n.ctx) })
				}
				return
			}
			peers++
		}
		_, since, _ := n.gate.state()
		switch catchUpVerdict(since, n.now(), n.interval, peers > 0) {
		case "alone":
			if n.gate.open(gen) {
				n.log.Warn("no machine of the org reachable for two heartbeat intervals: working alone (items others finish meanwhile may run again)")
				n.sched.Broadcast()
				n.spawn(func() { n.publishMachineUpdate(n.ctx) })
			}
			return
		case "timeout":
			if n.gate.open(gen) {
				n.log.Warn("no connected machine answered a catch-up: taking new items anyway", "peers", peers)
				n.sched.Broadcast()
				n.spawn(func() { n.publishMachineUpdate(n.ctx) })
			}
			return
		}
		t := time.NewTimer(200 * time.Millisecond)
		select {
		case <-n.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// connectedUnheard are the machines of machines this node is connected to
// and has no heartbeat of (none while this machine is not approved: it is
// sent none).
func (n *Node) connectedUnheard(machines map[peer.ID]bool) []peer.ID {
	if !n.approvedNow() {
		return nil
	}
	var out []peer.ID
	for id := range machines {
		if _, _, ok := n.live.LastOf(id.String()); !ok && n.host.Connected(id) {
			out = append(out, id)
		}
	}
	return out
}

// catchUpTimeout bounds one catch-up attempt with one peer.
const catchUpTimeout = 10 * time.Second

// catchUpWith syncs the ledger with machine p (everything it has, from its
// heads) and learns the heartbeats p has seen. It reports success.
func (n *Node) catchUpWith(p peer.ID, org string) bool {
	ctx, cancel := context.WithTimeout(n.ctx, catchUpTimeout)
	defer cancel()
	if err := n.rep.CatchUp(ctx, p, org); err != nil {
		n.log.Debug("catch-up: ledger sync failed", "peer", p.String(), "err", err)
		return false
	}
	n.mu.RLock()
	o := n.org
	n.mu.RUnlock()
	if o == nil {
		return false
	}
	if !n.approvedNow() {
		return true // a pending machine is sent no heartbeat, and takes no item
	}
	seen, err := o.FetchSeen(ctx, p)
	if err != nil {
		n.log.Debug("catch-up: fetching heartbeats failed", "peer", p.String(), "err", err)
		return false
	}
	for _, s := range seen {
		if s.Heartbeat.Machine == n.idStr {
			continue
		}
		n.live.Observe(s.Heartbeat, n.onOwnClock(s.At)) // their leases, as p last saw them
	}
	return true
}

// now is the node's clock (Options.Now).
func (n *Node) now() time.Time { return n.opts.Now() }

// onOwnClock moves t, read by p2p on the system clock (time.Now), onto the
// node's clock, keeping its age: liveness compares it with now(). The two
// differ when Options.Now is not time.Now (a FAKETIME skew); mixed, a
// clock ahead saw every fetched heartbeat as minutes old, every machine
// offline and its leases lapsed, and ran items others held (make chaos).
func (n *Node) onOwnClock(t time.Time) time.Time { return n.now().Add(-time.Since(t)) }
