package node

import (
	"context"
	"math/rand/v2"
	"reflect"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/p2p"
)

// heartbeatLoop publishes this machine's heartbeat every interval while it is
// an approved machine of an org.
//
// Each period is the interval less a random tenth of it: machines started
// together (an org's nodes after a power cut, or a test mesh) would otherwise
// beat in step, and every wave of N heartbeats costs every machine N
// signature checks at once. A period never exceeds the interval, so Offline
// (no heartbeat for 3 intervals) keeps its meaning.
func (n *Node) heartbeatLoop() {
	defer n.wg.Done()
	t := time.NewTimer(beatPeriod(n.interval))
	defer t.Stop()
	n.beat(n.ctx)
	n.spawn(n.learnMachines)
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
			n.beat(n.ctx)
			n.maybeMerge(n.ctx, n.now())
			t.Reset(beatPeriod(n.interval))
		}
	}
}

// beatPeriod is the time to the next periodic heartbeat: interval less a
// random tenth of it.
func beatPeriod(interval time.Duration) time.Duration {
	return interval - rand.N(interval/10+1)
}

// beat publishes one heartbeat now (and observes it locally).
func (n *Node) beat(ctx context.Context) {
	if n.ctx.Err() != nil {
		return // stopping: a heartbeat now would keep it online for others
	}
	// What runs here (and the finished-item leases) first, the heads second:
	// a lease that a flush drops in between is then covered by the heads,
	// which name the flushed results (see leases.go); the other order could
	// announce neither.
	total, free, running, planHash := n.resourceReport()
	n.mu.RLock()
	o := n.org
	n.mu.RUnlock()
	lg, unlock := n.rep.ReadLog()
	m := lg.State().Machines[n.id.String()]
	approved := m != nil && m.Status == ledger.MachineApproved
	var name string
	if approved {
		name = m.Name // the fold renames in place: read it under the lock
	}
	heads, _ := lg.Heads()
	unlock()
	if o == nil || !approved {
		return
	}
	hb := p2p.Heartbeat{Time: n.now().UnixMilli(), Interval: n.interval.Milliseconds(), Version: Version,
		Name: name, Addrs: n.host.Addrs()}
	for _, h := range heads {
		hb.Heads = append(hb.Heads, h.String())
	}
	hb.Total, hb.Free, hb.Instances, hb.PlanHash = total, free, running, planHash
	hb.Fetches = n.fetchReport()
	hb.DiskFull = n.disk.g.Full()
	hb.SSH = n.gw.Announce()
	if n.opts.heartbeatLie != nil {
		n.opts.heartbeatLie(&hb)
	}
	if err := o.PublishHeartbeat(ctx, hb); err != nil && ctx.Err() == nil {
		n.log.Debug("publish heartbeat", "err", err)
	}
}

// onHeartbeat records an accepted heartbeat (its validator already checked
// signature, sequence and membership).
func (n *Node) onHeartbeat(hb p2p.Heartbeat) {
	id, err := peer.Decode(hb.Machine)
	if err != nil {
		return
	}
	prev, _, had := n.live.Last(id)
	n.live.Observe(hb, n.now())
	if id != n.id {
		now := n.now()
		n.sched.ObserveLeases(hb, now)
		n.rep.WantHeads(id, hb.Heads)
	}
	n.rememberPeer(hb.Machine, hb.Addrs)
	if id != n.id && len(hb.Addrs) > 0 && !n.host.Connected(id) {
		// Full mesh within the org: dial machines we learn about from gossip
		// at once (redialLoop keeps trying those that stay out of reach).
		n.spawn(func() {
			ctx, c := context.WithTimeout(n.ctx, 10*time.Second)
			defer c()
			_ = n.host.DialPeer(ctx, id, hb.Addrs)
		})
	}
	n.metrics.heartbeats.Inc()
	// A change in what a machine runs or its liveness can change the plan.
	if !had {
		n.kickScheduler() // a machine came online
	} else if prev.PlanHash != hb.PlanHash || !reflect.DeepEqual(prev.Instances, hb.Instances) {
		n.nudgeScheduler()
	}
}

// publishMachineUpdate writes this machine's hardware and limits into the
// ledger when they differ from what the ledger has: on joining, and each
// time the node has caught up with the org (after a start: node.yaml's
// limits may have changed while it was down).
func (n *Node) publishMachineUpdate(ctx context.Context) {
	want := ledger.MachineUpdate{Hardware: toLedgerHW(n.hw), Limits: toLedgerLimits(n.limits), Version: Version}
	var have *ledger.Machine
	n.snapshot(func(st *ledger.State) {
		if m := st.Machines[n.id.String()]; m != nil {
			c := *m
			have = &c
		}
	})
	if have == nil || have.Status == ledger.MachineRemoved || have.Status == ledger.MachineRejected {
		return
	}
	if have.HasLimits && reflect.DeepEqual(have.Hardware, want.Hardware) && reflect.DeepEqual(have.Limits, want.Limits) && have.Version == want.Version {
		return
	}
	if _, err := n.write(ctx, ledger.KindMachineUpdate, want); err != nil {
		n.log.Warn("could not record this machine's hardware and limits", "err", err)
	}
}

// learnMachines asks connected peers for the latest heartbeats they know, so
// a node that has just started knows every machine's state without waiting a
// full interval.
func (n *Node) learnMachines() {
	deadline := n.now().Add(10 * time.Second)
	for n.ctx.Err() == nil && n.now().Before(deadline) {
		n.mu.RLock()
		o := n.org
		n.mu.RUnlock()
		if o != nil && !n.approvedNow() {
			return // a pending machine is sent no heartbeat (it catches up once approved)
		}
		if o != nil {
			for _, p := range n.host.Peers() {
				ctx, c := context.WithTimeout(n.ctx, 5*time.Second)
				seen, err := o.FetchSeen(ctx, p)
				c()
				if err != nil {
					continue
				}
				for _, s := range seen {
					n.live.Observe(s.Heartbeat, n.onOwnClock(s.At))
					n.rememberPeer(s.Heartbeat.Machine, s.Heartbeat.Addrs)
				}
				n.kickScheduler()
				return
			}
		}
		select {
		case <-n.ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}
