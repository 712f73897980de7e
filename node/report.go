package node

import (
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/p2p"
)

// resourceReport is what the heartbeat says about this machine.
func (n *Node) resourceReport() (total, free p2p.Resources, running []p2p.RunningInstance, planHash string) {
	total = p2p.Resources{Cores: int64(n.hw.CPUs) * 10 * int64(n.limits.CPULimit), MemoryMB: n.limits.MemoryLimit,
		DiskMB: n.limits.DiskLimit, GPUs: int64(len(n.limits.GPUs)), Slots: int64(n.limits.MaxConcurrentJobs)}
	free = total
	s := n.sched
	jobs := map[string]*ledger.Job{}
	n.snapshot(func(st *ledger.State) {
		for id, j := range st.Jobs {
			jobs[id] = j
		}
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range slices.Sorted(maps.Keys(s.slots)) {
		in := s.slots[k]
		it, _ := in.current()
		running = append(running, p2p.RunningInstance{Job: in.job, Slot: int64(in.slot), Kind: in.kind, Item: it, Instance: in.id, Started: in.started})
		free.Slots--
		if j := jobs[in.job]; j != nil {
			free.Cores -= j.Spec.Cores
			free.MemoryMB -= j.Spec.MemoryMB
		}
		free.GPUs -= int64(len(in.gpus))
	}
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
			if listed == maxFinishedInBeat {
				// Only if flushing fails: the rest lose their lease (an
				// item may then run twice; the first result counts).
				break
			}
			listed++
			running = append(running, p2p.RunningInstance{Job: id, Slot: -1, Kind: kindFinished, Item: r.Item, Instance: r.Instance})
		}
	}
	return total, free, running, s.plan.Hash
}

// kindFinished marks a heartbeat lease on an item that finished here and
// whose result is on its way into the ledger.
const kindFinished = "finished"

// activeInstances drops finished-item leases from a heartbeat's list.
func activeInstances(hb p2p.Heartbeat) []p2p.RunningInstance {
	var out []p2p.RunningInstance
	for _, ri := range hb.Instances {
		if ri.Kind != kindFinished {
			out = append(out, ri)
		}
	}
	return out
}

func (n *Node) runningJobs() int {
	jobs := map[string]bool{}
	for _, in := range n.sched.readView().instances {
		jobs[in.job] = true
	}
	return len(jobs)
}

// planAgreement is this node's plan hash and how many online peers announce
// the same one.
func (n *Node) planAgreement() (string, int, int) {
	h := n.sched.readView().plan.Hash
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
