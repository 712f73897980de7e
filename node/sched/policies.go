package sched

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/smartshare"
)

// The org's policies on this machine's side (ledger/fold_policies.go,
// docs/design.md §23). The fold decides; the scheduler writes what only a
// machine that runs a job knows:
//
//   - queued jobs (max_concurrent_jobs_per_user) are not in the planner's
//     input, so no machine places them (buildInput);
//   - under max_job_runtime, job.start for a job this machine runs whose
//     first start the ledger does not know yet, and job.expire for a job
//     past its deadline by this machine's clock, both written by the
//     job's first machine in the plan only (entries that lose a race have
//     no effect and count against the writer's budget, §5.8). The fold fails the job; every machine
//     then stops its instances, as for a cancelled job.

// policyWrite is a ledger entry the runtime policy calls for.
type policyWrite struct{ kind, job string }

// policyWrites are the runtime policy's entries this machine has written
// or is writing, each once per process (see due).
type policyWrites struct {
	mu   sync.Mutex
	done map[policyWrite]bool
}

// due lists the job.start and job.expire entries machine me is to write
// at now, running instances of the jobs in mine, under plan; each is
// listed once until write finds it without effect.
func (p *policyWrites) due(lg Ledger, now time.Time, me string, mine map[string]bool, plan smartshare.Result) []policyWrite {
	first := map[string]string{} // job -> the machine of its first instance in the plan
	for _, pi := range plan.Instances {
		if _, ok := first[pi.Job]; !ok {
			first[pi.Job] = pi.Machine
		}
	}
	var out []policyWrite
	lg.View(func(st *ledger.State) {
		if st.Settings.Policies.MaxJobRuntimeMS == 0 {
			return
		}
		for _, j := range st.SortedJobs() {
			if j.State != ledger.JobActive || j.Queued != "" {
				continue
			}
			switch dl := st.RuntimeDeadline(j); {
			case j.Started == 0 && mine[j.ID] && first[j.ID] == me:
				// The plan's first machine only: every machine that runs
				// the job writing it would leave all but one without
				// effect, against the machines' budgets (ledger
				// log_budget.go). The first results give the start too.
				out = append(out, policyWrite{ledger.KindJobStart, j.ID})
			case dl != 0 && now.UnixMilli() >= dl && first[j.ID] == me:
				out = append(out, policyWrite{ledger.KindJobExpire, j.ID})
			}
		}
	})
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		p.done = map[policyWrite]bool{}
	}
	kept := out[:0]
	for _, w := range out {
		if !p.done[w] {
			p.done[w] = true
			kept = append(kept, w)
		}
	}
	return kept
}

// write writes the entries due listed. An entry the fold keeps without
// effect (another machine's came first) is not written again; one not
// written at all (a full disk) is, at a later plan.
func (p *policyWrites) write(ctx context.Context, lg Ledger, log *slog.Logger, ws []policyWrite) {
	for _, w := range ws {
		e, err := lg.Write(ctx, w.kind, ledger.JobRef{Job: w.job})
		if e == nil {
			p.mu.Lock()
			delete(p.done, w)
			p.mu.Unlock()
		}
		if err != nil && ctx.Err() == nil {
			log.Info("job runtime policy entry not written or without effect", "kind", w.kind, "job", w.job, "err", err)
		}
	}
}
