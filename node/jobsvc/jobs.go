package jobsvc

import (
	"container/heap"
	"context"
	"net/http"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/node/orgsvc"
	"github.com/cshare/cshare/node/ref"
)

// resolveJob finds a job this machine's person may see by reference
// (resolveRef's rules): a job they may not see is not found. It returns a
// shallow copy of the job in a snapshot (which no fold changes).
func (s *Service) resolveJob(ref string) (*ledger.Job, error) {
	var j *ledger.Job
	var err error
	s.snapshot(func(st *ledger.State) {
		var id string
		if id, err = resolveRef("job", "cshare job ls", ref, jobCandidates(st, s.personIn(st))); err == nil {
			c := *st.Jobs[id]
			j = &c
		}
	})
	return j, err
}

// jobCandidates are the jobs person may see (every job for person "").
func jobCandidates(st *ledger.State, person string) []ref.Candidate {
	js := st.SortedJobs()
	out := make([]ref.Candidate, 0, len(js))
	for _, j := range js {
		if person == "" || st.CanSee(person, j) {
			out = append(out, ref.Candidate{ID: j.ID, Name: j.Spec.Name})
		}
	}
	return out
}

// resolveRef finds the ID that r names among cands (see ref.Resolve).
func resolveRef(kind, list, r string, cands []ref.Candidate) (string, error) {
	return ref.Resolve(kind, list, r, cands)
}

// jobsPage is how many jobs ListJobs takes under the read lock at a time.
const jobsPage = 256

// ListJobs implements api.JobsAPI: the jobs this machine's person may see,
// in submission order, a page at a time (see nextJobs), rendered without
// the read lock.
func (s *Service) ListJobs(ctx context.Context, p api.Page, emit func(api.JobInfo) error) error {
	if err := s.needOrg(); err != nil {
		return err
	}
	var cur *jobKey
	if p.After != "" {
		j, err := s.resolveJob(p.After)
		if err != nil {
			return api.FieldErrorf(http.StatusBadRequest, "after", "after: %q is no job of this listing; give the ID of the last job of the page before", api.Ellipsize(p.After))
		}
		cur = &jobKey{j.Seq, j.ID}
	}
	left := p.Limit
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		size := int64(jobsPage)
		if left > 0 {
			size = min(size, left)
		}
		var page []*ledger.Job
		s.snapshot(func(st *ledger.State) { page = nextJobs(st, s.personIn(st), cur, int(size)) })
		for _, j := range page {
			if err := emit(s.jobInfo(j)); err != nil {
				return err
			}
		}
		if int64(len(page)) < size {
			return nil
		}
		last := page[len(page)-1]
		cur = &jobKey{last.Seq, last.ID}
		if left > 0 {
			if left -= size; left == 0 {
				return nil
			}
		}
	}
}

// Jobs is every job this machine's person may see, for callers in this
// process (the dashboard, tests): the API streams them (ListJobs).
func (s *Service) Jobs(ctx context.Context) ([]api.JobInfo, error) {
	out := []api.JobInfo{}
	err := s.ListJobs(ctx, api.Page{}, func(j api.JobInfo) error {
		out = append(out, j)
		return nil
	})
	return out, err
}

// jobKey orders jobs as listings show them: by submission order, then ID.
type jobKey struct {
	seq int64
	id  string
}

func (k jobKey) less(o jobKey) bool {
	if k.seq != o.seq {
		return k.seq < o.seq
	}
	return k.id < o.id
}

// nextJobs is the first size jobs me may see after cur (nil: from the
// first), in order, as shallow copies (see resolveJob). It keeps at most
// size jobs while it reads the state's, in a heap whose top is the last.
func nextJobs(st *ledger.State, me string, cur *jobKey, size int) []*ledger.Job {
	var h jobHeap
	for _, j := range st.Jobs {
		k := jobKey{j.Seq, j.ID}
		if (cur != nil && !cur.less(k)) || !st.CanSee(me, j) {
			continue
		}
		if len(h) == size {
			if !k.less(jobKey{h[0].Seq, h[0].ID}) {
				continue
			}
			heap.Pop(&h)
		}
		heap.Push(&h, j)
	}
	out := make([]*ledger.Job, len(h))
	for i := len(h) - 1; i >= 0; i-- {
		c := *heap.Pop(&h).(*ledger.Job)
		out[i] = &c
	}
	return out
}

// jobHeap is a max-heap of jobs by jobKey.
type jobHeap []*ledger.Job

func (h jobHeap) Len() int { return len(h) }
func (h jobHeap) Less(a, b int) bool {
	return jobKey{h[b].Seq, h[b].ID}.less(jobKey{h[a].Seq, h[a].ID})
}
func (h jobHeap) Swap(a, b int) { h[a], h[b] = h[b], h[a] }
func (h *jobHeap) Push(x any)   { *h = append(*h, x.(*ledger.Job)) }
func (h *jobHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Job implements api.JobsAPI.
func (s *Service) Job(ctx context.Context, id string) (api.JobInfo, error) {
	if err := s.needOrg(); err != nil {
		return api.JobInfo{}, err
	}
	j, err := s.resolveJob(id)
	if err != nil {
		return api.JobInfo{}, err
	}
	return s.jobInfo(j), nil
}

// canManage: the submitter of a job, admins and the owner may modify or
// cancel it (what).
func (s *Service) canManage(j *ledger.Job, what string) error {
	var err error
	s.snapshot(func(st *ledger.State) {
		me := s.personIn(st)
		if j.Submitter != me && !st.IsAdmin(me) {
			err = api.Errorf(http.StatusForbidden, "%s; only the submitter of a job (%s), admins and the owner may %s it",
				s.whoAmI(st), orgsvc.PersonLabel(st, j.Submitter), what)
		}
	})
	return err
}

// ModifyJob implements api.JobsAPI (Qube's qbmodify).
func (s *Service) ModifyJob(ctx context.Context, id string, req api.JobModify) (api.JobInfo, error) {
	if err := s.needOrg(); err != nil {
		return api.JobInfo{}, err
	}
	j, err := s.resolveJob(id)
	if err != nil {
		return api.JobInfo{}, err
	}
	if err := s.canManage(j, "modify"); err != nil {
		return api.JobInfo{}, err
	}
	m := ledger.JobModify{Job: j.ID, MaxCPUs: req.MaxCPUs, Priority: req.Priority}
	if err := ledger.ValidateJobModify(m); err != nil {
		return api.JobInfo{}, badReq(err)
	}
	if m.MaxCPUs == nil && m.Priority == nil {
		return api.JobInfo{}, api.Errorf(http.StatusBadRequest, "nothing to modify: give max_cpus or priority (cshare job modify ID --max-cpus N|* --priority P)")
	}
	if j.State != ledger.JobActive {
		return api.JobInfo{}, api.Errorf(http.StatusConflict, "job %s is %s; only a queued or running job can be modified", j.ID, j.State)
	}
	if _, err := s.write(ctx, ledger.KindJobModify, m); err != nil {
		return api.JobInfo{}, refused(err)
	}
	return s.Job(ctx, j.ID)
}

// CancelJob implements api.JobsAPI.
func (s *Service) CancelJob(ctx context.Context, id string) (api.JobInfo, error) {
	if err := s.needOrg(); err != nil {
		return api.JobInfo{}, err
	}
	j, err := s.resolveJob(id)
	if err != nil {
		return api.JobInfo{}, err
	}
	if err := s.canManage(j, "cancel"); err != nil {
		return api.JobInfo{}, err
	}
	if j.State != ledger.JobActive {
		return api.JobInfo{}, api.Errorf(http.StatusConflict, "job %s is already %s", j.ID, j.State)
	}
	if _, err := s.write(ctx, ledger.KindJobCancel, ledger.JobRef{Job: j.ID}); err != nil {
		return api.JobInfo{}, refused(err)
	}
	s.d.Kick() // the scheduler stops its instances; the API waits for nobody
	return s.Job(ctx, j.ID)
}
