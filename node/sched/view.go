package sched

import (
	"sort"

	"github.com/cshare/cshare/smartshare"
)

// View is the scheduler's read view: what it publishes, immutable, after
// each change (a plan, an instance starting or ending, an item taken or
// finished). API handlers read it through an atomic pointer and never take
// a scheduler lock, so a slow listing cannot hold up the scheduler and the
// scheduler cannot hold up the API. Readers must not modify it.
type View struct {
	Plan smartshare.Result
	// PlanIn is what Plan was made from (the approved machines online,
	// less what contracts reserve; the jobs it places): Explain reads it.
	PlanIn    smartshare.Input
	Instances []InstanceView // this machine's instances, by slot
}

// InstanceView is one of this machine's instances in the read view.
type InstanceView struct {
	ID      string
	Job     string
	Kind    string
	Slot    int
	Item    int64 // -1 between items
	Started int64 // unix ms
	// Use is its run's last sampled use (CPU, memory, killed at its cap).
	Use Use
}

var emptyView = &View{}

// View returns the latest published view (never nil).
func (s *Scheduler) View() *View {
	if v := s.view.Load(); v != nil {
		return v
	}
	return emptyView
}

// publish makes the scheduler's current state the read view. s.mu must be
// held.
func (s *Scheduler) publish() {
	v := &View{Plan: s.plan, PlanIn: s.planIn, Instances: make([]InstanceView, 0, len(s.slots))}
	for _, in := range s.slots {
		it, _ := in.current()
		in.mu.Lock()
		u := in.use
		in.mu.Unlock()
		v.Instances = append(v.Instances, InstanceView{ID: in.id, Job: in.job, Kind: in.kind, Slot: in.slot, Item: it, Started: in.started, Use: Use(u)})
	}
	sort.Slice(v.Instances, func(a, b int) bool { return v.Instances[a].Slot < v.Instances[b].Slot })
	s.view.Store(v)
}

// runsItem reports whether one of this machine's instances runs item of
// job.
func (v *View) runsItem(job string, item int64) bool {
	for _, in := range v.Instances {
		if in.Job == job && in.Item == item {
			return true
		}
	}
	return false
}
