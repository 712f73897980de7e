package node

import (
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/sched"
	"github.com/cshare/cshare/p2p"
	"github.com/cshare/cshare/runtime"
)

// Driver runs instances; see package runtime.
type Driver = runtime.Driver

// newScheduler builds the scheduler (package sched) over this node's
// parts: after the replica, the store and the runtime.
func (n *Node) newScheduler() *sched.Scheduler {
	return sched.New(n.ctx, sched.Deps{Ledger: n.rep, Records: n.store, Drivers: n.drivers, Peers: (*schedPeers)(n),
		Gate: (*schedGate)(n), Disk: (*schedDisk)(n), Logs: n.logs, Datasets: n.ds,
		Metrics: sched.Metrics{Started: n.metrics.started, Preempted: n.metrics.preempted, PlanInstances: n.metrics.planHash},
		Machine: n.idStr, Hardware: n.hw, Limits: n.limits, RegistryAuth: n.registryAuth, DataDir: n.opts.DataDir,
		Interval: n.interval, Kick: n.kick, Nudge: n.nudge, Wakeup: n.wakeup, Beat: n.beat, Spawn: n.spawn,
		Now: n.opts.Now, Log: n.log})
}

func (n *Node) startScheduler() {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.sched.Run()
	}()
}

func (n *Node) kickScheduler() { signal(n.kick) }

// nudgeScheduler asks for a plan soon: peers' heartbeats arrive in bursts
// (every machine starting a wide job's instances at once), and one plan per
// planPace (package sched) serves a burst as well as one per heartbeat.
func (n *Node) nudgeScheduler() { signal(n.nudge) }

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// The scheduler's view of the node's parts.
type (
	schedPeers Node // liveness from heartbeats
	schedGate  Node // the catch-up gate (catchup.go)
	schedDisk  Node // the disk guard (disk.go)
)

func (p *schedPeers) Liveness(id string, now time.Time) (p2p.Heartbeat, time.Time, bool) {
	return (*Node)(p).liveness(id, now)
}
func (p *schedPeers) Gen() uint64       { return p.live.Gen() }
func (p *schedPeers) All() []p2p.Seen   { return p.live.All() }
func (g *schedGate) Closed() bool       { return g.gate.closed.Load() }
func (g *schedGate) Hold(why string)    { (*Node)(g).holdDispatch(why) }
func (d *schedDisk) Flipped() bool      { return d.disk.flipped.Swap(false) }
func (d *schedDisk) MayStartItem() bool { return (*Node)(d).mayStartItem() }
func (d *schedDisk) SaveLog(job string, item int64, out []byte) {
	(*Node)(d).saveLog(job, item, out)
}

// Resume writes the output held back while the disk was full, once there
// is room.
func (d *schedDisk) Resume() {
	n := (*Node)(d)
	if !n.disk.g.Full() {
		n.spawn(n.saveHeldLogs)
	}
}

// resourceReport is what the heartbeat says about this machine.
func (n *Node) resourceReport() (total, free p2p.Resources, running []p2p.RunningInstance, planHash string) {
	return n.sched.Report()
}

// activeInstances drops finished-item leases from a heartbeat's list.
func activeInstances(hb p2p.Heartbeat) []p2p.RunningInstance { return sched.ActiveInstances(hb) }

func (n *Node) runningJobs() int {
	jobs := map[string]bool{}
	for _, in := range n.sched.View().Instances {
		jobs[in.Job] = true
	}
	return len(jobs)
}

// planAgreement is this node's plan hash and how many online peers announce
// the same one.
func (n *Node) planAgreement() (string, int, int) {
	h := n.sched.View().Plan.Hash
	agree, peers := 0, 0
	for _, m := range n.onlinePeers(n.now()) {
		peers++
		if m.Heartbeat.PlanHash == h {
			agree++
		}
	}
	return h, agree, peers
}

// onlinePeers returns the latest heartbeats of the other machines that are
// online at now, by machine ID.
func (n *Node) onlinePeers(now time.Time) []p2p.Seen {
	var out []p2p.Seen
	for _, m := range n.live.All() {
		if m.Heartbeat.Machine == n.idStr {
			continue
		}
		if _, _, online := n.liveness(m.Heartbeat.Machine, now); online {
			out = append(out, m)
		}
	}
	return out
}

// runCounts sums, over the ledger's jobs, the runs it knows of and the
// duplicates among them.
func (n *Node) runCounts() (all, dups int64) {
	n.snapshot(func(st *ledger.State) {
		for _, j := range st.Jobs {
			all += int64(j.Runs.Len())
			dups += j.Duplicates
		}
	})
	return all, dups
}
