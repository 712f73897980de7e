package peersvc

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/p2p"
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

// Hold closes the gate (why: "start" or "pause") and starts catching up,
// unless the node is in no org or alone in it.
func (s *Service) Hold(why string) {
	org := s.d.Ledger.Org()
	if org == "" || len(s.OrgMachines()) == 0 {
		return
	}
	gen := s.gate.close(s.now(), why)
	s.d.Log.Info("catching up with a peer before taking new items", "after", why)
	s.d.Spawn(func() { s.catchUp(gen, org) })
}

// Closed reports whether the gate is closed: no new item starts.
func (s *Service) Closed() bool { return s.gate.closed.Load() }

// CatchingUp reports whether the gate is closed, and since when.
func (s *Service) CatchingUp() (bool, time.Time) {
	if !s.gate.closed.Load() {
		return false, time.Time{}
	}
	_, since, _ := s.gate.state()
	return true, since
}

// catchUp syncs the ledger with one connected machine of the org and
// learns the heartbeats it has seen, then opens the gate (generation gen).
func (s *Service) catchUp(gen uint64, org string) {
	var caughtUp time.Time // when a catch-up with a peer succeeded
	var with peer.ID
	for s.ctx.Err() == nil {
		if g, _, _ := s.gate.state(); g != gen {
			return // closed again since: that catch-up goes on
		}
		peers := 0
		machines := map[peer.ID]bool{}
		for _, id := range s.OrgMachines() {
			machines[id] = true
		}
		for _, p := range s.d.Host.Peers() {
			if !machines[p] || !caughtUp.IsZero() {
				continue
			}
			peers++
			if s.catchUpWith(p, org) {
				caughtUp, with = s.now(), p
			}
		}
		if !caughtUp.IsZero() {
			// The peer may have started a moment ago itself (every machine
			// killed and restarted at once) and know no machine's
			// heartbeat: a machine connected to this one whose runs it has
			// not heard of may be running the very items this one would
			// take (it sends a heartbeat with them as it starts). Wait for
			// one from each, for up to one and a half intervals. And two
			// machines whose plans differ (each heard another set of
			// machines so far) may each own one item: wait until the
			// online machines announce this node's plan (planSplit).
			missing := s.connectedUnheard(machines)
			split := s.planSplit()
			if caughtUpOpens(s.now().Sub(caughtUp), s.d.Interval, len(missing), split) {
				if s.gate.open(gen) {
					s.d.Log.Info("caught up; taking new items", "peer", with.String(), "unheard", len(missing), "other_plans", split)
					s.d.Kick()
					s.d.Node.CaughtUp()
				}
				return
			}
		}
		_, since, _ := s.gate.state()
		switch verdict := catchUpVerdict(since, s.now(), s.d.Interval, peers > 0); {
		case !caughtUp.IsZero():
			// caughtUpOpens bounds the wait.
		case verdict == "alone":
			if s.gate.open(gen) {
				s.d.Log.Warn("no machine of the org reachable for two heartbeat intervals: working alone (items others finish meanwhile may run again)")
				s.d.Node.CaughtUp()
			}
			return
		case verdict == "timeout":
			if s.gate.open(gen) {
				s.d.Log.Warn("no connected machine answered a catch-up: taking new items anyway", "peers", peers)
				s.d.Node.CaughtUp()
			}
			return
		}
		t := time.NewTimer(200 * time.Millisecond)
		select {
		case <-s.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// planAgreeCap is how many intervals after catching up a node waits at
// most for the online machines to announce the plan it has: under a
// stream of ledger changes plans may not stay equal for long, and a
// machine that cannot agree (one side of a partition sees both) must not
// keep the gate closed.
const planAgreeCap = 3

// caughtUpOpens says whether a gate that caught up waited ago opens, with
// unheard connected machines not heard of and split online machines that
// announce another plan than this node's (interval: the heartbeat
// interval). A pure function of its arguments.
func caughtUpOpens(waited, interval time.Duration, unheard, split int) bool {
	return (unheard == 0 || waited >= interval*3/2) && (split == 0 || waited >= planAgreeCap*interval)
}

// planSplit counts the online machines whose latest heartbeat announces
// another plan than the one this node's heartbeat would announce now.
// After a start or a pause the plans differ until every machine has heard
// the same machines: each node then sees a different owner for some
// items, and two machines that both take an item they each own run it at
// once (e2e TestKill9AllThreeFewExtraRuns, after a kill -9 of every node
// and a restart: item 13 on two machines, started together).
func (s *Service) planSplit() int {
	if !s.approvedNow() {
		return 0
	}
	var mine p2p.Heartbeat
	s.d.Node.Report(&mine)
	st := s.d.Ledger.Snapshot().State
	split := 0
	for _, m := range s.OnlinePeers(s.now()) {
		if mm := st.Machines[m.Heartbeat.Machine]; mm == nil || mm.Status != ledger.MachineApproved {
			continue // planned by nobody
		}
		if m.Heartbeat.PlanHash != mine.PlanHash {
			split++
		}
	}
	return split
}

// connectedUnheard are the machines of machines this node is connected to
// and has no heartbeat of (none while this machine is not approved: it is
// sent none).
func (s *Service) connectedUnheard(machines map[peer.ID]bool) []peer.ID {
	if !s.approvedNow() {
		return nil
	}
	var out []peer.ID
	for id := range machines {
		if _, _, ok := s.live.LastOf(id.String()); !ok && s.d.Host.Connected(id) {
			out = append(out, id)
		}
	}
	return out
}

// catchUpTimeout bounds one catch-up attempt with one peer.
const catchUpTimeout = 10 * time.Second

// catchUpWith syncs the ledger with machine p (everything it has, from its
// heads) and learns the heartbeats p has seen. It reports success.
func (s *Service) catchUpWith(p peer.ID, org string) bool {
	ctx, cancel := context.WithTimeout(s.ctx, catchUpTimeout)
	defer cancel()
	if err := s.d.Ledger.CatchUp(ctx, p, org); err != nil {
		s.d.Log.Debug("catch-up: ledger sync failed", "peer", p.String(), "err", err)
		return false
	}
	o := s.d.Node.Gossip()
	if o == nil {
		return false
	}
	if !s.approvedNow() {
		return true // a pending machine is sent no heartbeat, and takes no item
	}
	seen, err := o.FetchSeen(ctx, p)
	if err != nil {
		s.d.Log.Debug("catch-up: fetching heartbeats failed", "peer", p.String(), "err", err)
		return false
	}
	for _, sn := range seen {
		if sn.Heartbeat.Machine == s.idStr {
			continue
		}
		s.live.Observe(sn.Heartbeat, s.onOwnClock(sn.At)) // their leases, as p last saw them
	}
	return true
}
