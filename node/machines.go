package node

import (
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/node/sched"
	"github.com/cshare/cshare/p2p"
)

// Machine liveness statuses shown to users.
const (
	StatusAvailable = "available"
	StatusBusy      = "busy"
	StatusOffline   = "offline"
)

// approvedNow reports whether this machine is approved in the ledger.
func (n *Node) approvedNow() bool { return n.rep.IsApproved(n.id) }

// machineStatus derives a machine's status: the ledger's pending, rejected
// or removed; for approved machines, liveness from heartbeats.
func (n *Node) machineStatus(id string, now time.Time) string {
	lg, unlock := n.rep.ReadLog()
	status := ""
	if m := lg.State().Machines[id]; m != nil {
		status = m.Status // the fold changes it in place: read it under the lock
	}
	unlock()
	if status != ledger.MachineApproved || (id != n.idStr && !n.approvedNow()) {
		// A machine that is not approved itself is sent no heartbeat
		// (closed org): it does not know the others' liveness.
		return status
	}
	hb, _, online := n.liveness(id, now)
	if !online {
		return StatusOffline
	}
	if len(activeInstances(hb)) > 0 {
		return StatusBusy
	}
	return StatusAvailable
}

// liveness returns a machine's last heartbeat and whether it is online (a
// heartbeat within 3 of its intervals). This node is always online to itself.
func (n *Node) liveness(id string, now time.Time) (p2p.Heartbeat, time.Time, bool) {
	hb, at, ok := n.live.LastOf(id)
	if id == n.idStr {
		return hb, at, true
	}
	if !ok {
		return hb, at, false
	}
	iv := time.Duration(hb.Interval) * time.Millisecond
	if iv <= 0 {
		iv = n.interval
	}
	return hb, at, now.Sub(at) <= 3*iv
}

func (n *Node) machineInfo(st *ledger.State, m *ledger.Machine, now time.Time) api.MachineInfo {
	mi := api.MachineInfo{ID: m.ID, Name: m.Name, Owner: m.Owner, OwnerName: personName(st, m.Owner), TotalJobs: m.TotalJobs, Hardware: m.Hardware,
		Limits: m.Limits, Version: m.Version, Registered: api.FormatTime(time.UnixMilli(m.Registered))}
	if mi.Hardware.GPUs == nil {
		mi.Hardware.GPUs = []ledger.GPU{}
	}
	hb, at, _ := n.liveness(m.ID, now)
	if !at.IsZero() {
		mi.LastHeartbeat = api.FormatTime(at)
		mi.Addrs = hb.Addrs
		if hb.Version != "" {
			mi.Version = hb.Version
		}
		mi.Free = &api.Resources{Cores: hb.Free.Cores, MemoryMB: hb.Free.MemoryMB, DiskMB: hb.Free.DiskMB, GPUs: hb.Free.GPUs, Slots: hb.Free.Slots}
		jobs := map[string]bool{}
		for _, in := range activeInstances(hb) {
			jobs[in.Job] = true
		}
		mi.RunningJobs = len(jobs)
		mi.DiskFull = hb.DiskFull
		mi.Usage = sched.MachineUse(hb)
	}
	if m.ID == n.id.String() {
		mi.DiskFull = n.disk.g.Full()
		mi.Addrs = n.host.Addrs()
		mi.Version = Version
		mi.RunningJobs = n.runningJobs()
	}
	return mi
}
