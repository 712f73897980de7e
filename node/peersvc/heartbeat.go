package peersvc

import (
	"context"
	"math/rand/v2"
	"reflect"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/p2p"
)

// Heartbeats publishes this machine's heartbeat every interval while it is
// an approved machine of an org, until the context given to New ends; after
// each, it merges the ledger's heads if this machine should (merge.go).
//
// Each period is the interval less a random tenth of it: machines started
// together (an org's nodes after a power cut, or a test mesh) would otherwise
// beat in step, and every wave of N heartbeats costs every machine N
// signature checks at once. A period never exceeds the interval, so Offline
// (no heartbeat for 3 intervals) keeps its meaning.
func (s *Service) Heartbeats() {
	t := time.NewTimer(beatPeriod(s.d.Interval))
	defer t.Stop()
	s.Beat(s.ctx)
	s.d.Spawn(s.learnMachines)
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
			s.Beat(s.ctx)
			s.maybeMerge(s.ctx, s.now())
			s.maybeCheckpoint(s.ctx, s.now())
			s.maybeCompact(s.now())
			t.Reset(beatPeriod(s.d.Interval))
		}
	}
}

// beatPeriod is the time to the next periodic heartbeat: interval less a
// random tenth of it.
func beatPeriod(interval time.Duration) time.Duration {
	return interval - rand.N(interval/10+1)
}

// Joined sends a heartbeat at once and learns the org's machines from a
// peer: the node has just joined an org.
func (s *Service) Joined(ctx context.Context) {
	s.Beat(ctx)
	s.d.Spawn(s.learnMachines)
}

// Beat publishes one heartbeat now (and observes it locally).
func (s *Service) Beat(ctx context.Context) {
	if s.ctx.Err() != nil {
		return // stopping: a heartbeat now would keep it online for others
	}
	// What runs here (and the finished-item leases) first, the heads second:
	// a lease that a flush drops in between is then covered by the heads,
	// which name the flushed results (see node/sched/leases.go); the other
	// order could announce neither.
	var hb p2p.Heartbeat
	s.d.Node.Report(&hb)
	o := s.d.Node.Gossip()
	snap := s.d.Ledger.Snapshot()
	m := snap.State.Machines[s.idStr]
	approved := m != nil && m.Status == ledger.MachineApproved
	var name string
	if approved {
		name = m.Name
	}
	heads := snap.Heads
	if o == nil || !approved {
		return
	}
	hb.Time, hb.Interval, hb.Version = s.now().UnixMilli(), s.d.Interval.Milliseconds(), s.d.Version
	hb.Name, hb.Addrs = name, s.d.Host.Addrs()
	for _, h := range heads {
		hb.Heads = append(hb.Heads, h.String())
	}
	_, top := s.d.Ledger.Start()
	hb.Barrier = int64(top)
	if err := o.PublishHeartbeat(ctx, hb); err != nil && ctx.Err() == nil {
		s.d.Log.Debug("publish heartbeat", "err", err)
	}
}

// OnHeartbeat records an accepted heartbeat (its validator already checked
// signature, sequence and membership).
func (s *Service) OnHeartbeat(hb p2p.Heartbeat) {
	id, err := peer.Decode(hb.Machine)
	if err != nil {
		return
	}
	prev, _, had := s.live.Last(id)
	s.live.Observe(hb, s.now())
	if id != s.d.Machine {
		now := s.now()
		s.d.Node.ObserveLeases(hb, now)
		s.d.Ledger.WantHeads(id, hb.Heads)
	}
	s.RememberPeer(hb.Machine, hb.Addrs)
	if id != s.d.Machine && len(hb.Addrs) > 0 && !s.d.Host.Connected(id) {
		// Full mesh within the org: dial machines we learn about from gossip
		// at once (Redial keeps trying those that stay out of reach).
		s.d.Spawn(func() {
			ctx, c := context.WithTimeout(s.ctx, 10*time.Second)
			defer c()
			_ = s.d.Host.DialPeer(ctx, id, hb.Addrs)
		})
	}
	s.d.Heartbeats.Inc()
	// A change in what a machine runs or its liveness can change the plan.
	if !had {
		s.d.Kick() // a machine came online
	} else if prev.PlanHash != hb.PlanHash || !reflect.DeepEqual(prev.Instances, hb.Instances) {
		s.d.Nudge()
	}
}

// learnMachines asks connected peers for the latest heartbeats they know, so
// a node that has just started knows every machine's state without waiting a
// full interval.
func (s *Service) learnMachines() {
	deadline := s.now().Add(10 * time.Second)
	for s.ctx.Err() == nil && s.now().Before(deadline) {
		o := s.d.Node.Gossip()
		if o != nil && !s.approvedNow() {
			return // a pending machine is sent no heartbeat (it catches up once approved)
		}
		if o != nil {
			for _, p := range s.d.Host.Peers() {
				ctx, c := context.WithTimeout(s.ctx, 5*time.Second)
				seen, err := o.FetchSeen(ctx, p)
				c()
				if err != nil {
					continue
				}
				for _, sn := range seen {
					s.live.Observe(sn.Heartbeat, s.onOwnClock(sn.At))
					s.RememberPeer(sn.Heartbeat.Machine, sn.Heartbeat.Addrs)
				}
				s.d.Kick()
				return
			}
		}
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}
