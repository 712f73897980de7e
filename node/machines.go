package node

import (
	"context"
	"reflect"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/node/sched"
)

// machineInfo is machine m as the API shows it: the ledger's record, its
// latest heartbeat, and for this machine what the node knows first hand.
func (n *Node) machineInfo(st *ledger.State, m *ledger.Machine, now time.Time) api.MachineInfo {
	mi := api.MachineInfo{ID: m.ID, Name: m.Name, Owner: m.Owner, OwnerName: st.PersonName(m.Owner), TotalJobs: m.TotalJobs, Hardware: m.Hardware,
		Limits: m.Limits, Version: m.Version, Registered: api.FormatTime(time.UnixMilli(m.Registered))}
	if mi.Hardware.GPUs == nil {
		mi.Hardware.GPUs = []ledger.GPU{}
	}
	hb, at, _ := n.peers.Liveness(m.ID, now)
	if !at.IsZero() {
		mi.LastHeartbeat = api.FormatTime(at)
		mi.Addrs = hb.Addrs
		if hb.Version != "" {
			mi.Version = hb.Version
		}
		mi.Free = &api.Resources{Cores: hb.Free.Cores, MemoryMB: hb.Free.MemoryMB, DiskMB: hb.Free.DiskMB, GPUs: hb.Free.GPUs, Slots: hb.Free.Slots}
		jobs := map[string]bool{}
		for _, in := range sched.ActiveInstances(hb) {
			jobs[in.Job] = true
		}
		mi.RunningJobs = len(jobs)
		mi.DiskFull = hb.DiskFull
		mi.Usage = sched.MachineUse(hb)
	}
	if m.Status == ledger.MachineApproved {
		mi.AgeRecipient = hb.Age
	}
	mi.Capped = st.IsCapped(m.ID)
	if m.ID == n.idStr {
		if m.Status == ledger.MachineApproved {
			mi.AgeRecipient = n.age
		}
		mi.DiskFull = n.disk.g.Full()
		mi.Addrs = n.host.Addrs()
		mi.Version = Version
		jobs := map[string]bool{}
		for _, in := range n.sched.View().Instances {
			jobs[in.Job] = true
		}
		mi.RunningJobs = len(jobs)
	}
	return mi
}

// publishMachineUpdate writes this machine's hardware and limits into the
// ledger when they differ from what the ledger has: on joining, and each
// time the node has caught up with the org (after a start: node.yaml's
// limits may have changed while it was down).
func (n *Node) publishMachineUpdate(ctx context.Context) {
	want := ledger.MachineUpdate{Hardware: toLedgerHW(n.hw), Limits: toLedgerLimits(n.limits), Version: Version}
	var have *ledger.Machine
	n.rep.View(func(st *ledger.State) {
		if m := st.Machines[n.idStr]; m != nil {
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
	if _, err := n.rep.Write(ctx, ledger.KindMachineUpdate, want); err != nil {
		n.log.Warn("could not record this machine's hardware and limits", "err", err)
	}
}
