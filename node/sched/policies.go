package sched

import (
	"time"

	"github.com/cshare/cshare/ledger"
)

// The org's policies on this machine's side (ledger/fold_policies.go,
// docs/design.md §23). The fold decides; the scheduler writes what only a
// machine that runs a job knows:
//
//   - queued jobs (max_concurrent_jobs_per_user) are not in the planner's
//     input, so no machine places them (buildInput);
//   - under max_job_runtime, job.start for a job this machine runs whose
//     first start the ledger does not know yet, and job.expire for a job
//     past its deadline by this machine's clock, written by the job's
//     first machine in the plan. The fold fails the job; every machine
//     then stops its instances, as for a cancelled job.

// policyWrite is a ledger entry the runtime policy calls for.
type policyWrite struct{ kind, job string }

// runtimeWrites lists the job.start and job.expire entries this machine
// is to write at now, each once per process. s.mu must be held.
func (s *Scheduler) runtimeWrites(now time.Time) []policyWrite {
	mine := map[string]bool{}
	for _, in := range s.slots {
		mine[in.job] = true
	}
	first := map[string]string{} // job -> the machine of its first instance in the plan
	for _, pi := range s.plan.Instances {
		if _, ok := first[pi.Job]; !ok {
			first[pi.Job] = pi.Machine
		}
	}
	var out []policyWrite
	s.d.Ledger.View(func(st *ledger.State) {
		if st.Settings.Policies.MaxJobRuntimeMS == 0 {
			return
		}
		for _, j := range st.SortedJobs() {
			if j.State != ledger.JobActive || j.Queued != "" {
				continue
			}
			switch dl := st.RuntimeDeadline(j); {
			case j.Started == 0 && mine[j.ID]:
				out = append(out, policyWrite{ledger.KindJobStart, j.ID})
			case dl != 0 && now.UnixMilli() >= dl && first[j.ID] == s.d.Machine:
				out = append(out, policyWrite{ledger.KindJobExpire, j.ID})
			}
		}
	})
	kept := out[:0]
	for _, w := range out {
		if !s.policyDone[w] {
			s.policyDone[w] = true
			kept = append(kept, w)
		}
	}
	return kept
}

// writePolicy writes the entries runtimeWrites listed. An entry the fold
// keeps without effect (another machine's came first) is not written
// again; one not written at all (a full disk) is, at a later plan.
func (s *Scheduler) writePolicy(ws []policyWrite) {
	for _, w := range ws {
		e, err := s.d.Ledger.Write(s.ctx, w.kind, ledger.JobRef{Job: w.job})
		if e == nil {
			s.mu.Lock()
			delete(s.policyDone, w)
			s.mu.Unlock()
		}
		if err != nil && s.ctx.Err() == nil {
			s.d.Log.Info("job runtime policy entry not written or without effect", "kind", w.kind, "job", w.job, "err", err)
		}
	}
}
