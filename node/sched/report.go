package sched

import (
	"maps"
	"slices"
	"sort"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/jobspec"
	"github.com/cshare/cshare/p2p"
)

// Report is what the heartbeat says about this machine: its resources, in
// all and free, the instances it runs and the finished items it holds, and
// its plan's hash.
func (s *Scheduler) Report() (total, free p2p.Resources, running []p2p.RunningInstance, planHash string) {
	total = p2p.Resources{Cores: int64(s.d.Hardware.CPUs) * 10 * int64(s.d.Limits.CPULimit), MemoryMB: s.d.Limits.MemoryLimit,
		DiskMB: s.d.Limits.DiskLimit, GPUs: int64(len(s.d.Limits.GPUs)), Slots: int64(s.d.Limits.MaxConcurrentJobs)}
	free = total
	jobs := map[string]*ledger.Job{}
	s.d.Ledger.View(func(st *ledger.State) {
		for id, j := range st.Jobs {
			jobs[id] = j
		}
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	var layers int64 // the docker runs' writable layers
	for _, k := range slices.Sorted(maps.Keys(s.slots)) {
		in := s.slots[k]
		it, _ := in.current()
		in.mu.Lock()
		u := in.use
		in.mu.Unlock()
		if in.drv.Name() == "docker" { // exec runs write into the data dir
			layers += u.DiskBytes
		}
		running = append(running, p2p.RunningInstance{Job: in.job, Slot: int64(in.slot), Kind: in.kind, Item: it, Instance: in.id, Started: in.started,
			CPUMilli: u.CPUMilli, MemoryMB: jobspec.BytesToMB(u.MemoryBytes), OOMKilled: u.OOMKilled})
		free.Slots--
		if c, ok := s.inUse[in]; ok { // its run's caps (caps.go)
			free.Cores -= c.cores
			free.MemoryMB -= c.memMB
		} else if j := jobs[in.job]; j != nil {
			free.Cores -= j.Spec.Cores
			free.MemoryMB -= j.Spec.MemoryMB
		}
		free.GPUs -= int64(len(in.gpus))
	}
	free.DiskMB = max(0, total.DiskMB-s.disk.usedMB(s.ctx, s.now(), s.d.DataDir, s.d.Spawn, layers))
	// Finished items not yet in the ledger stay leased (slot -1), so no other
	// machine picks them up in the meantime.
	jobIDs := make([]string, 0, len(s.results))
	for id := range s.results {
		jobIDs = append(jobIDs, id)
	}
	sort.Strings(jobIDs)
	listed := 0
	for _, id := range jobIDs {
		for _, r := range s.results[id] {
			if r.Stopped {
				continue // its item is back on the agenda: no lease
			}
			if listed == MaxFinishedInBeat {
				// Only if flushing fails: the rest lose their lease (an
				// item may then run twice; the first result counts).
				break
			}
			listed++
			running = append(running, p2p.RunningInstance{Job: id, Slot: -1, Kind: KindFinished, Item: r.Item, Instance: r.Instance})
		}
	}
	return total, free, running, s.plan.Hash
}

// KindFinished marks a heartbeat lease on an item that finished here and
// whose result is on its way into the ledger.
const KindFinished = "finished"

// ActiveInstances drops finished-item leases from a heartbeat's list.
func ActiveInstances(hb p2p.Heartbeat) []p2p.RunningInstance {
	var out []p2p.RunningInstance
	for _, ri := range hb.Instances {
		if ri.Kind != KindFinished {
			out = append(out, ri)
		}
	}
	return out
}
