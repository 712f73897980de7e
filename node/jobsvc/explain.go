package jobsvc

import (
	"context"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/node/sched"
)

// ExplainJob implements api.JobsAPI: why the job waits, machine by machine
// (sched.Explain over the ledger's state and the scheduler's current plan
// and its input), with the job's own reason as job show says it.
func (s *Service) ExplainJob(ctx context.Context, id string) (api.JobExplain, error) {
	if err := s.needOrg(); err != nil {
		return api.JobExplain{}, err
	}
	j, err := s.resolveJob(id)
	if err != nil {
		return api.JobExplain{}, err
	}
	ji := s.jobInfo(j)
	out := api.JobExplain{Job: j.ID, Name: j.Spec.Name, State: ji.State, Reason: ji.Reason, PendingItems: ji.Items.Pending + ji.Items.Running,
		Machines: []api.MachineWaits{}}
	view := s.d.Scheduler.View()
	for _, js := range view.Plan.Jobs {
		if js.ID == j.ID {
			out.Wanted, out.Planned = js.Wanted, js.Primaries+js.Secondaries
		}
	}
	full := map[string]bool{}
	for _, seen := range s.d.Peers.OnlinePeers(s.now()) {
		full[seen.Heartbeat.Machine] = seen.Heartbeat.DiskFull
	}
	var ws []sched.MachineWhy
	s.snapshot(func(st *ledger.State) {
		ws = sched.Explain(sched.ExplainInput{State: st, Job: j, PlanIn: view.PlanIn, Plan: view.Plan, DiskFull: full})
	})
	for _, w := range ws {
		mw := api.MachineWaits{Machine: w.Machine, Name: w.Name, Status: w.Status, Online: w.Online, Instances: w.Instances, Reasons: []api.WaitReason{}}
		for _, r := range w.Reasons {
			mw.Reasons = append(mw.Reasons, api.WaitReason{Code: r.Code, Text: r.Text})
		}
		out.Machines = append(out.Machines, mw)
	}
	return out, nil
}
