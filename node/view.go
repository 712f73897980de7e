package node

import (
	"sort"

	"github.com/cshare/cshare/smartshare"
)

// schedView is the scheduler's read view: what it publishes, immutable,
// after each change (a plan, an instance starting or ending, an item taken
// or finished). API handlers read it through an atomic pointer and never
// take a scheduler lock, so a slow listing cannot hold up the scheduler and
// the scheduler cannot hold up the API.
type schedView struct {
	plan      smartshare.Result
	instances []instView // this machine's instances, by slot
}

// instView is one of this machine's instances in the read view.
type instView struct {
	id      string
	job     string
	kind    string
	slot    int
	item    int64 // -1 between items
	started int64 // unix ms
}

var emptyView = &schedView{}

// readView returns the latest published view (never nil).
func (s *scheduler) readView() *schedView {
	if v := s.view.Load(); v != nil {
		return v
	}
	return emptyView
}

// publish makes the scheduler's current state the read view. s.mu must be
// held.
func (s *scheduler) publish() {
	v := &schedView{plan: s.plan, instances: make([]instView, 0, len(s.slots))}
	for _, in := range s.slots {
		it, _ := in.current()
		v.instances = append(v.instances, instView{id: in.id, job: in.job, kind: in.kind, slot: in.slot, item: it, started: in.started})
	}
	sort.Slice(v.instances, func(a, b int) bool { return v.instances[a].slot < v.instances[b].slot })
	s.view.Store(v)
}

// runsItem reports whether one of this machine's instances runs item of
// job.
func (v *schedView) runsItem(job string, item int64) bool {
	for _, in := range v.instances {
		if in.job == job && in.item == item {
			return true
		}
	}
	return false
}
