package node

import (
	"context"
	"fmt"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/p2p"
	"github.com/cshare/cshare/smartshare"
)

func (s *scheduler) buildInput(now time.Time) smartshare.Input {
	n := s.n
	lg, unlock := n.rep.ReadLog()
	st := lg.State()
	in := smartshare.Input{Config: smartshare.Config{Mode: st.Settings.SmartShare.Mode, PreemptPolicy: st.Settings.SmartShare.PreemptPolicy,
		DefaultMaxCPUs: int(st.Settings.SmartShare.DefaultMaxCPUs), MaxCPUsLimit: int(st.Settings.SmartShare.MaxCPUsLimit)}}
	machines := map[string]int{}
	var hbs []p2p.Heartbeat
	for _, m := range st.SortedMachines() {
		if m.Status != ledger.MachineApproved {
			continue
		}
		hb, _, online := n.liveness(m.ID, now)
		if !online || hb.Machine == "" {
			continue
		}
		slots := int(m.Limits.MaxConcurrentJobs)
		if !m.HasLimits {
			slots = int(m.Hardware.CPUs)
		}
		if slots < 0 {
			slots = 0
		}
		mc := smartshare.Machine{ID: m.ID, Slots: slots}
		if m.HasLimits {
			mc.Cores = m.Hardware.CPUs * 1000 * m.Limits.CPULimit / 100
			mc.MemoryMB = m.Limits.MemoryLimit
			mc.GPUs = len(m.Limits.GPUs)
		}
		in.Machines = append(in.Machines, mc)
		machines[m.ID] = slots
		hbs = append(hbs, hb)
	}
	jobs := map[string]bool{}
	for _, j := range st.SortedJobs() {
		if j.State != ledger.JobActive {
			continue
		}
		remaining := len(j.Items) - int(j.Done) - int(j.Failed)
		sj := smartshare.Job{ID: j.ID, Priority: int(j.Priority), CPUs: int(j.Spec.CPUs), Submitted: j.Seq,
			ItemsRemaining: remaining, Cores: j.Spec.Cores, MemoryMB: j.Spec.MemoryMB, GPUs: int(j.Spec.GPUs)}
		if j.MaxCPUs != nil {
			sj.MaxCPUs = smartshare.MaxCPUs{N: int(*j.MaxCPUs), Set: true}
		}
		in.Jobs = append(in.Jobs, sj)
		jobs[j.ID] = true
	}
	unlock()
	for _, hb := range hbs {
		used := map[int64]bool{}
		for _, ri := range hb.Instances {
			if !jobs[ri.Job] || ri.Slot < 0 || int(ri.Slot) >= machines[hb.Machine] || used[ri.Slot] {
				continue
			}
			used[ri.Slot] = true
			kind := ri.Kind
			if kind != "primary" && kind != "secondary" {
				kind = "secondary"
			}
			in.Instances = append(in.Instances, smartshare.Instance{Job: ri.Job, Machine: hb.Machine, Slot: int(ri.Slot), Kind: kind, Started: ri.Started})
		}
	}
	return in
}

// reconcile plans and makes this machine's instances follow the plan.
func (s *scheduler) reconcile(now time.Time) {
	n := s.n
	if n.orgID() == "" {
		return
	}
	in := s.buildInput(now)
	var plan smartshare.Result
	if err := in.Validate(); err != nil {
		n.log.Warn("balancer input invalid; keeping the previous plan", "err", err)
		return
	}
	plan = smartshare.Plan(in)
	me := n.id.String()
	target := map[int]smartshare.Instance{}
	for _, pi := range plan.Instances {
		if pi.Machine == me {
			target[pi.Slot] = pi
		}
	}
	preempt := map[int]smartshare.Preemption{}
	for _, p := range plan.Preempt {
		if p.Machine == me {
			preempt[p.Slot] = p
		}
	}
	active := map[string]*ledger.Job{}
	n.snapshot(func(st *ledger.State) {
		for id, j := range st.Jobs {
			if j.State == ledger.JobActive {
				c := *j
				active[id] = &c
			}
		}
	})
	s.mu.Lock()
	if plan.Hash != s.plan.Hash {
		s.prevInst, s.prevHash, s.planAt = s.plan.Instances, s.plan.Hash, now
	}
	s.plan, s.planIn = plan, in
	changed := false
	for slot, inst := range s.slots {
		t, ok := target[slot]
		switch {
		case ok && t.Job == inst.job:
			if inst.kind != t.Kind {
				inst.kind = t.Kind
				changed = true
			}
		case active[inst.job] == nil:
			s.stopInstance(inst, true, "") // cancelled or finished: stop now
		case preempt[slot].Mode == "passive":
			s.stopInstance(inst, false, "passive")
		case preempt[slot].Mode == "aggressive":
			s.stopInstance(inst, true, "aggressive")
		case ok:
			// Another job's instance planned here without a preemption: the
			// plan saw the slot free (its input, this machine's last
			// heartbeat, predates this instance). Not a preemption: finish
			// the item; a plan that wants the slot now preempts it.
			s.stopInstance(inst, false, "")
		default:
			s.stopInstance(inst, false, "") // no longer wanted: finish the item
		}
	}
	for slot, t := range target {
		if s.slots[slot] != nil {
			continue
		}
		j := active[t.Job]
		if j == nil {
			continue
		}
		drv := s.drivers[j.Spec.Driver]
		if drv == nil {
			continue
		}
		gpus, ok := s.allocGPUs(int(j.Spec.GPUs))
		if !ok {
			continue
		}
		inst := &instance{id: fmt.Sprintf("%s-s%d-%d", t.Job, slot, now.UnixNano()%1e9), job: t.Job, slot: slot, kind: t.Kind,
			started: now.UnixMilli(), drv: drv, gpus: gpus, item: -1, done: make(chan struct{})}
		s.slots[slot] = inst
		changed = true
		ctx, cancel := context.WithCancel(n.ctx)
		inst.cancel = cancel
		n.spawn(func() { s.work(ctx, inst, j, "") })
	}
	if changed {
		s.wantBeat()
	}
	s.mu.Unlock()
	n.metrics.planHash.Set(float64(len(plan.Instances)))
}

// allocGPUs picks n free GPU devices of this machine. s.mu must be held.
func (s *scheduler) allocGPUs(want int) ([]int, bool) {
	if want == 0 {
		return nil, true
	}
	used := map[int]bool{}
	for _, in := range s.slots {
		for _, g := range in.gpus {
			used[g] = true
		}
	}
	var out []int
	for _, g := range s.n.limits.GPUs {
		if !used[int(g.Device)] {
			out = append(out, int(g.Device))
			if len(out) == want {
				return out, true
			}
		}
	}
	return nil, false
}

// stopInstance stops an instance: now (its item goes back to the agenda) or
// after its current item. preempt is the preemption mode when the plan
// preempts it ("" when its job ended or no longer wants it); each preempted
// instance is counted once, in cshare_preemptions_total. s.mu must be held.
func (s *scheduler) stopInstance(in *instance, now bool, preempt string) {
	in.mu.Lock()
	in.stopAfter = true
	run := in.run
	count := preempt != "" && in.preempted == ""
	if count {
		in.preempted = preempt
	}
	kill := now && !in.killed
	if kill {
		in.killed = true
	}
	in.mu.Unlock()
	if count {
		s.n.metrics.preempted.WithLabelValues(preempt).Inc()
	}
	if kill && run != "" {
		go func() {
			ctx, c := context.WithTimeout(context.Background(), 30*time.Second)
			defer c()
			_ = in.drv.Stop(ctx, run, 0)
		}()
	}
}
