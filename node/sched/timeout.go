package sched

import (
	"time"

	"github.com/cshare/cshare/ledger"
)

// ItemTimeout is how long one run of an item of j may last: the job's
// --item-timeout, or else the org's policy.default_item_timeout; 0 for no
// limit. Every node reads it from the same State, so every node lets a
// claim lapse at the same point (see dispatch.Leases.Counts).
func ItemTimeout(st *ledger.State, j *ledger.Job) time.Duration {
	ms := j.Spec.ItemTimeoutMS
	if ms == 0 {
		ms = st.Settings.Policies.DefaultItemTimeoutMS
	}
	return time.Duration(ms) * time.Millisecond
}

// timeoutGrace is how long a run past its item timeout has between SIGTERM
// and SIGKILL.
const timeoutGrace = 5 * time.Second

// timeoutError is the error recorded for a run stopped at its item timeout.
func timeoutError(d time.Duration) string {
	return "item timeout: stopped after running longer than its item timeout of " + d.String() +
		" (job submit --item-timeout, or the org's policy.default_item_timeout)"
}

// itemTimeout is the item timeout in force for job now (0: none).
func (s *Scheduler) itemTimeout(job string) time.Duration {
	var d time.Duration
	s.d.Ledger.View(func(st *ledger.State) {
		if j := st.Jobs[job]; j != nil {
			d = ItemTimeout(st, j)
		}
	})
	return d
}

// oomError is the error recorded for a run killed at its memory cap.
func oomError(was string) string {
	const msg = "oom_killed: killed at its memory cap (job submit --memory, or the machine's memory_limit over its slots)"
	if was != "" {
		return msg + "; " + was
	}
	return msg
}
