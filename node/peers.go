package node

import (
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/node/peersvc"
	"github.com/cshare/cshare/p2p"
)

// Machine liveness statuses shown to users (node/peersvc).
const (
	StatusAvailable = peersvc.StatusAvailable
	StatusBusy      = peersvc.StatusBusy
	StatusOffline   = peersvc.StatusOffline
)

// peerWiring is the node as the peer service's Deps see it: the parts
// built after it, read when a heartbeat is sent or received.
type peerWiring Node

// Gossip is the org's topics, nil before the node joined them.
func (w *peerWiring) Gossip() peersvc.Gossip {
	if o := (*Node)(w).topics(); o != nil {
		return o
	}
	return nil
}

// Report fills in what the scheduler (resources, instances, the plan
// hash), the dataset service (fetches) and the disk guard say of this
// machine; Options.heartbeatLie then rewrites it, in tests.
func (w *peerWiring) Report(hb *p2p.Heartbeat) {
	hb.Total, hb.Free, hb.Instances, hb.PlanHash = w.sched.Report()
	hb.Fetches = w.ds.FetchReport()
	hb.DiskFull = w.disk.g.Full()
	hb.SSH = w.gw.Announce()
	hb.Age = w.age
	hb.Jupyter, hb.JupyterDirect = w.jup.Announce(), (*Node)(w).jupyterDirect()
	if w.opts.heartbeatLie != nil {
		w.opts.heartbeatLie(hb)
	}
}

func (w *peerWiring) ObserveLeases(hb p2p.Heartbeat, now time.Time) { w.sched.ObserveLeases(hb, now) }

// CaughtUp tells the org what this machine runs and records its hardware
// and limits: node.yaml's may have changed while it was down.
func (w *peerWiring) CaughtUp() {
	n := (*Node)(w)
	n.sched.Broadcast()
	n.spawn(func() { n.publishMachineUpdate(n.ctx) })
}

func (w *peerWiring) AskTombstones(now time.Time, ids []peer.ID, asked map[peer.ID]time.Time) {
	w.orgs.Leaving().AskTombstones(now, ids, asked)
}
