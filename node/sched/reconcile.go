package sched

import (
	"context"
	"fmt"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/marketsvc"
	"github.com/cshare/cshare/node/plandiff"
	"github.com/cshare/cshare/p2p"
	"github.com/cshare/cshare/smartshare"
)

// buildInput assembles the balancer's input from the ledger State and the
// heartbeats of online machines. Every node builds the same input from the
// same State and heartbeats; this machine's own instances enter through its
// own published heartbeat, like everyone else's.
func (s *Scheduler) buildInput(now time.Time) smartshare.Input {
	st := s.d.Ledger.Snapshot().State
	in := smartshare.Input{Config: smartshare.Config{Mode: st.Settings.SmartShare.Mode, PreemptPolicy: st.Settings.SmartShare.PreemptPolicy,
		DefaultMaxCPUs: int(st.Settings.SmartShare.DefaultMaxCPUs), MaxCPUsLimit: int(st.Settings.SmartShare.MaxCPUsLimit)}}
	machines := map[string]int{}
	reserved := marketsvc.Reservations(st, now)
	var hbs []p2p.Heartbeat
	for _, m := range st.SortedMachines() {
		if m.Status != ledger.MachineApproved {
			continue
		}
		hb, _, online := s.d.Peers.Liveness(m.ID, now)
		if !online || hb.Machine == "" {
			continue
		}
		mc := marketsvc.LessReserved(machineCapacity(m), reserved[m.ID])
		slots := mc.Slots
		in.Machines = append(in.Machines, mc)
		machines[m.ID] = slots
		hbs = append(hbs, hb)
	}
	jobs := map[string]bool{}
	for _, j := range st.SortedJobs() {
		if j.State != ledger.JobActive || j.Queued != "" {
			continue // a queued job waits for its submitter's others (policies.go)
		}
		remaining := j.Items.Len() - int(j.Done) - int(j.Failed)
		sj := smartshare.Job{ID: j.ID, Priority: int(j.Priority), CPUs: int(j.Spec.CPUs), Submitted: j.Seq,
			ItemsRemaining: remaining, Cores: j.Spec.Cores, MemoryMB: j.Spec.MemoryMB, GPUs: int(j.Spec.GPUs), DiskMB: j.Spec.DiskMB}
		if j.MaxCPUs != nil {
			sj.MaxCPUs = smartshare.MaxCPUs{N: int(*j.MaxCPUs), Set: true}
		}
		in.Jobs = append(in.Jobs, sj)
		jobs[j.ID] = true
	}
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
func (s *Scheduler) reconcile(now time.Time) {
	if s.d.Ledger.Org() == "" {
		return
	}
	in := s.buildInput(now)
	var plan smartshare.Result
	if err := in.Validate(); err != nil {
		s.d.Log.Warn("balancer input invalid; keeping the previous plan", "err", err)
		return
	}
	plan = smartshare.Plan(in)
	di := plandiff.Input{Machine: s.d.Machine, Plan: plan, Active: map[string]plandiff.Job{}, Drivers: map[string]bool{}}
	active := map[string]*ledger.Job{}
	s.d.Ledger.View(func(st *ledger.State) {
		for id, j := range st.Jobs {
			if j.State == ledger.JobActive {
				c := *j
				active[id] = &c
				di.Active[id] = plandiff.Job{Driver: j.Spec.Driver, GPUs: int(j.Spec.GPUs), GPUMemoryMB: j.Spec.GPUMemoryMB}
				if _, ok := s.d.Drivers.Get(j.Spec.Driver); ok {
					di.Drivers[j.Spec.Driver] = true
				}
			}
		}
	})
	di.GPUMemory = map[int]int64{}
	for _, g := range s.d.Limits.GPUs {
		di.GPUs = append(di.GPUs, int(g.Device))
		di.GPUMemory[int(g.Device)] = g.MemoryMB
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if plan.Hash != s.plan.Hash {
		s.moves.update(s.plan, plan, now)
		s.placed.publish(plan, now)
	}
	s.plan, s.planIn = plan, in
	for _, inst := range s.slots {
		inst.mu.Lock()
		di.Running = append(di.Running, plandiff.Running{Slot: inst.slot, Job: inst.job, Kind: inst.kind, GPUs: inst.gpus,
			Stopping: inst.stopAfter, Killed: inst.killed, Preempted: inst.preempted})
		inst.mu.Unlock()
	}
	if s.apply(plandiff.Diff(di), active, now) {
		s.wantBeat()
	}
	s.publish()
	s.d.Metrics.PlanInstances.Set(float64(len(plan.Instances)))
	mine := map[string]bool{}
	for _, in := range s.slots {
		mine[in.job] = true
	}
	if ws := s.policies.due(s.d.Ledger, now, s.d.Machine, mine, s.plan); len(ws) > 0 {
		s.d.Spawn(func() { s.policies.write(s.ctx, s.d.Ledger, s.d.Log, ws) })
	}
}

// apply carries out the plan's actions on this machine; it reports whether
// what this machine runs changed (a heartbeat is then due). s.mu must be
// held.
func (s *Scheduler) apply(actions []plandiff.Action, active map[string]*ledger.Job, now time.Time) bool {
	changed := false
	for _, a := range actions {
		inst := s.slots[a.Slot]
		switch a.Kind {
		case plandiff.Relabel:
			inst.kind = a.InstanceKind
			changed = true
		case plandiff.StopNow:
			s.stopInstance(inst, true, a.Preempt)
		case plandiff.StopAfter:
			s.stopInstance(inst, false, a.Preempt)
		case plandiff.Start:
			j := active[a.Job]
			drv, _ := s.d.Drivers.Get(j.Spec.Driver)
			inst := &instance{id: fmt.Sprintf("%s-s%d-%d", a.Job, a.Slot, now.UnixNano()%1e9), job: a.Job, slot: a.Slot, kind: a.InstanceKind,
				started: now.UnixMilli(), drv: drv, gpus: a.GPUs, item: -1, done: make(chan struct{})}
			s.slots[a.Slot] = inst
			changed = true
			ctx, cancel := context.WithCancel(s.ctx)
			inst.cancel = cancel
			s.d.Spawn(func() { s.work(ctx, inst, j, "") })
		}
	}
	return changed
}

// stopInstance stops an instance: now (its item goes back to the agenda) or
// after its current item. preempt is the preemption mode when the plan
// preempts it ("" when its job ended or no longer wants it); each preempted
// instance is counted once, in cshare_preemptions_total. s.mu must be held.
func (s *Scheduler) stopInstance(in *instance, now bool, preempt string) {
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
		s.d.Metrics.Preempted.WithLabelValues(preempt).Inc()
	}
	if kill && run != "" {
		go func() {
			ctx, c := context.WithTimeout(context.Background(), 30*time.Second)
			defer c()
			_ = in.drv.Stop(ctx, run, 0)
		}()
	}
}
