package ledger

import (
	"testing"

	"github.com/cshare/cshare/ledger/jobspec"
)

// TestForgedLimitsHaveNoEffect: job entries whose item timeout, disk or GPU
// memory is out of range, written by a client that skips the API's checks,
// have no effect on any node; so does an org default item timeout out of
// range or set by a member. In range, they are kept as written, and a
// timed-out run is an ordinary failure, retried per the job's retries.
func TestForgedLimitsHaveNoEffect(t *testing.T) {
	w := newWorld(t)
	mem := w.member(7, RoleMember)
	spec := func(f func(*JobSpec)) JobSpec {
		s := JobSpec{Driver: "exec", Cmd: []string{"x"}, RangeStart: 1, RangeEnd: 2, Priority: 1, CPUs: 1, Retries: 1, Nonce: []byte{byte(w.tick())}}
		f(&s)
		return s
	}
	for name, f := range map[string]func(*JobSpec){
		"negative timeout":        func(s *JobSpec) { s.ItemTimeoutMS = -1 },
		"timeout under 1s":        func(s *JobSpec) { s.ItemTimeoutMS = 999 },
		"timeout above a year":    func(s *JobSpec) { s.ItemTimeoutMS = jobspec.MaxItemTimeoutMS + 1 },
		"negative disk":           func(s *JobSpec) { s.DiskMB = -1 },
		"disk above 16 TiB":       func(s *JobSpec) { s.DiskMB = jobspec.MaxMemoryMB + 1 },
		"GPU memory with no GPU":  func(s *JobSpec) { s.GPUMemoryMB = 1024 },
		"negative GPU memory":     func(s *JobSpec) { s.GPUs, s.GPUMemoryMB = 1, -1 },
		"GPU memory above 16 TiB": func(s *JobSpec) { s.GPUs, s.GPUMemoryMB = 1, jobspec.MaxMemoryMB+1 },
	} {
		t.Run(name, func(t *testing.T) {
			w.t = t
			w.denied(ErrMalformed, mem, KindJobSubmit, spec(f))
		})
	}
	w.t = t
	e := w.ok(mem, KindJobSubmit, spec(func(s *JobSpec) { s.ItemTimeoutMS, s.DiskMB, s.GPUs, s.GPUMemoryMB = 2000, 512, 1, 24<<10 }))
	id := JobIDFor(e)
	if j := w.log.State().Jobs[id]; j.Spec.ItemTimeoutMS != 2000 || j.Spec.DiskMB != 512 || j.Spec.GPUMemoryMB != 24<<10 {
		t.Fatalf("spec kept as %+v", j.Spec)
	}
	// A run stopped at its timeout fails; with retries 1 the item runs
	// again, and fails for good the second time.
	timedOut := ItemResult{Item: 1, Code: 143, Error: "item timeout: stopped after running longer than its item timeout of 2s"}
	w.ok(w.owner, KindJobResults, JobResults{Job: id, Results: []ItemResult{timedOut}})
	if it := w.log.State().Jobs[id].Items.At(0); it.Status != ItemPending || it.Failures != 1 {
		t.Fatalf("after one timeout: %+v, want pending with one failure", it)
	}
	w.ok(w.owner, KindJobResults, JobResults{Job: id, Results: []ItemResult{timedOut}})
	if it := w.log.State().Jobs[id].Items.At(0); it.Status != ItemFailed {
		t.Fatalf("after two timeouts with retries 1: %+v, want failed", it)
	}

	// The org's default: admins only, in range.
	ms := func(v int64) map[string]int64 { return map[string]int64{PolicyDefaultItemTimeout: v} }
	w.denied(ErrNotAuthority, mem, KindOrgUpdate, OrgUpdate{Policies: ms(60_000)})
	w.denied(ErrMalformed, w.owner, KindOrgUpdate, OrgUpdate{Policies: ms(-5)})
	w.denied(ErrMalformed, w.owner, KindOrgUpdate, OrgUpdate{Policies: ms(10)})
	w.ok(w.owner, KindOrgUpdate, OrgUpdate{Policies: ms(60_000)})
	if got := w.log.State().Settings.Policies.DefaultItemTimeoutMS; got != 60_000 {
		t.Fatalf("default item timeout %d, want 60000", got)
	}
	w.ok(w.owner, KindOrgUpdate, OrgUpdate{Policies: ms(0)})
	if got := w.log.State().Settings.Policies.DefaultItemTimeoutMS; got != 0 {
		t.Fatalf("default item timeout %d after 0, want none", got)
	}
}
