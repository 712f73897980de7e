package node

import (
	"container/heap"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/jobspec"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/node/sched"
	"github.com/cshare/cshare/runtime"
	"github.com/cshare/cshare/smartshare"
)

// DefaultImage is the image of docker jobs submitted without --image: the
// small busybox image `make test` and `make demo` build locally.
const DefaultImage = runtime.TestImage

func badReq(err error) error { return api.BadRequest(err) }

// SubmitJob implements api.Service.
func (n *Node) SubmitJob(ctx context.Context, req api.JobSubmit) (api.JobSubmitted, error) {
	if err := n.needOrg(); err != nil {
		return api.JobSubmitted{}, err
	}
	var role, who string
	n.snapshot(func(st *ledger.State) {
		role = st.Role(n.personIn(st))
		who = n.whoAmI(st)
	})
	if role == "" {
		return api.JobSubmitted{}, api.Errorf(http.StatusForbidden, "%s yet: an admin must approve this machine first (cshare machine approve %s)", who, n.idStr)
	}
	spec := ledger.JobSpec{Name: strings.TrimSpace(req.Name), Image: req.Image, Driver: req.Driver, Cmd: req.Cmd, Env: req.Env,
		Cores: req.CoresMilli, MemoryMB: req.MemoryMB, GPUs: req.GPUs, RangeStart: 1,
		Priority: req.Priority, CPUs: req.CPUs, Retries: req.Retries}
	if req.RangeStart != nil {
		spec.RangeStart = *req.RangeStart
	}
	spec.RangeEnd = spec.RangeStart
	if req.RangeEnd != nil {
		spec.RangeEnd = *req.RangeEnd
	}
	if spec.Driver == "" {
		spec.Driver = "docker"
	}
	if spec.Driver == "docker" && spec.Image == "" {
		spec.Image = DefaultImage
	}
	if spec.Priority == 0 {
		spec.Priority = jobspec.DefaultPriority
	}
	if spec.CPUs == 0 {
		spec.CPUs = 1
	}
	if req.MaxCPUs != nil {
		x := *req.MaxCPUs
		spec.MaxCPUs = &x
	}
	mounts, err := n.resolveMounts(req.Datasets)
	if err != nil {
		return api.JobSubmitted{}, err
	}
	spec.Datasets = mounts
	// The fold's own check, by the validators the CLI parses with.
	if err := ledger.ValidateJobSpec(spec); err != nil {
		return api.JobSubmitted{}, badReq(err)
	}
	if spec.Driver == "docker" && spec.MemoryMB > 0 && spec.MemoryMB < dockerMinMemoryMB {
		return api.JobSubmitted{}, api.FieldErrorf(http.StatusBadRequest, "memory", "memory: %s is below the minimum %s of a Docker container; allowed: at least %s, or --driver exec",
			jobspec.FormatMB(spec.MemoryMB), jobspec.FormatMB(dockerMinMemoryMB), jobspec.FormatMB(dockerMinMemoryMB))
	}
	if why, ok := n.drivers.Why(spec.Driver); ok {
		if spec.Driver == "exec" {
			return api.JobSubmitted{}, api.FieldErrorf(http.StatusBadRequest, "driver", "driver: exec is refused on this machine: %s", why)
		}
	}
	if err := n.checkImage(ctx, spec); err != nil {
		return api.JobSubmitted{}, err
	}
	// A job no approved machine fits is accepted (machines may join later)
	// with a warning, whichever resource it lacks: see admission.go.
	var warnings []string
	n.snapshot(func(st *ledger.State) {
		if why := sched.Unfit(st, spec); why != "" {
			warnings = append(warnings, sched.UnfitWarning(why))
		}
	})
	spec.Nonce = make([]byte, 8)
	_, _ = rand.Read(spec.Nonce)
	e, err := n.write(ctx, ledger.KindJobSubmit, spec)
	if err != nil {
		return api.JobSubmitted{}, refused(err)
	}
	j, err := n.Job(ctx, ledger.JobIDFor(e))
	return api.JobSubmitted{JobInfo: j, Warnings: warnings}, err
}

// dockerMinMemoryMB is Docker's floor for a container's memory limit.
const dockerMinMemoryMB = 6

// checkImage refuses a docker job whose image is neither present nor
// pullable on this machine.
func (n *Node) checkImage(ctx context.Context, spec ledger.JobSpec) error {
	if spec.Driver != "docker" {
		return nil
	}
	cctx, c := context.WithTimeout(ctx, 2*time.Minute)
	defer c()
	// A machine without an engine (or a driver that cannot check images)
	// says nothing: other machines may run it.
	if err := n.drivers.EnsureImage(cctx, "docker", spec.Image, n.registryAuth(spec.Image)); err != nil {
		if errors.Is(err, runtime.ErrImageNotFound) {
			return api.FieldErrorf(http.StatusBadRequest, "image", "image: %s", strings.TrimPrefix(err.Error(), "runtime: "))
		}
		return api.FieldErrorf(http.StatusBadRequest, "image", "image: %q: %v", spec.Image, err)
	}
	return nil
}

// resolveJob finds a job this machine's person may see by reference
// (resolveRef's rules): a job they may not see is not found. It returns a
// shallow copy, safe to read without n.mu except for Items and Machines,
// which the fold updates in place: read those from the State, in
// n.snapshot.
func (n *Node) resolveJob(ref string) (*ledger.Job, error) {
	var j *ledger.Job
	var err error
	n.snapshot(func(st *ledger.State) {
		var id string
		if id, err = resolveRef("job", "cshare job ls", ref, jobCandidates(st, n.personIn(st))); err == nil {
			c := *st.Jobs[id]
			j = &c
		}
	})
	return j, err
}

// jobInfo renders a job with its live instances from the current plan.
func (n *Node) jobInfo(j *ledger.Job) api.JobInfo {
	ji := api.JobInfo{ID: j.ID, Name: j.Spec.Name, Submitter: j.Submitter, Priority: j.Priority, CPUs: j.Spec.CPUs,
		Driver: j.Spec.Driver, Image: j.Spec.Image, Cmd: j.Spec.Cmd, Range: fmt.Sprintf("%d-%d", j.Spec.RangeStart, j.Spec.RangeEnd),
		Cores: j.Spec.Cores, MemoryMB: j.Spec.MemoryMB, GPUs: j.Spec.GPUs, Retries: j.Spec.Retries, Error: j.Error,
		Submitted: api.FormatTime(time.UnixMilli(j.Submitted)), Instances: []api.InstanceInfo{}}
	ji.MaxCPUs = "default"
	if j.MaxCPUs != nil {
		ji.MaxCPUs = strconv.FormatInt(*j.MaxCPUs, 10)
		if *j.MaxCPUs < 0 {
			ji.MaxCPUs = "*"
		}
	}
	if j.Ended != 0 {
		ji.Ended = api.FormatTime(time.UnixMilli(j.Ended))
	}
	ji.Items = api.Items{Total: int64(len(j.Items)), Done: j.Done, Failed: j.Failed}
	for _, m := range j.Spec.Datasets {
		ji.Datasets = append(ji.Datasets, api.DatasetMount{Name: m.Name, CID: m.CID, Path: m.Path})
	}
	ji.DuplicateRuns = j.Duplicates
	view := n.sched.View()
	plan := view.Plan
	// What actually runs: from heartbeats (others) and local truth (this node).
	type key struct {
		m string
		s int
	}
	running := map[key]int64{}
	me := n.idStr
	for _, seen := range n.onlinePeers(n.now()) {
		for _, ri := range activeInstances(seen.Heartbeat) {
			if ri.Job == j.ID {
				running[key{seen.Heartbeat.Machine, int(ri.Slot)}] = ri.Item
			}
		}
	}
	for _, in := range view.Instances {
		if in.Job == j.ID {
			running[key{me, in.Slot}] = in.Item
		}
	}
	names := map[string]string{}
	n.snapshot(func(st *ledger.State) {
		for id, m := range st.Machines {
			names[id] = m.Name
		}
		ji.SubmitterName = personName(st, j.Submitter)
	})
	if j.State == ledger.JobActive {
		preempt := map[key]string{}
		for _, p := range plan.Preempt {
			if p.Job == j.ID {
				preempt[key{p.Machine, p.Slot}] = p.Mode
			}
		}
		seen := map[key]bool{}
		for _, pi := range plan.Instances {
			if pi.Job != j.ID {
				continue
			}
			k := key{pi.Machine, pi.Slot}
			seen[k] = true
			state := "starting"
			item, ok := running[k]
			if ok {
				state = "running"
			}
			ii := api.InstanceInfo{Machine: pi.Machine, MachineName: names[pi.Machine], Slot: pi.Slot, Kind: pi.Kind, State: state}
			if ok && item >= 0 {
				ii.Item = item
			}
			ji.Instances = append(ji.Instances, ii)
		}
		for k, item := range running {
			if seen[k] {
				continue
			}
			state := "stopping"
			if m := preempt[k]; m != "" {
				state = "preempting (" + m + ")"
			}
			ii := api.InstanceInfo{Machine: k.m, MachineName: names[k.m], Slot: k.s, Kind: "secondary", State: state}
			if item >= 0 {
				ii.Item = item
			}
			ji.Instances = append(ji.Instances, ii)
		}
		sort.Slice(ji.Instances, func(a, b int) bool {
			if ji.Instances[a].Machine != ji.Instances[b].Machine {
				return ji.Instances[a].Machine < ji.Instances[b].Machine
			}
			return ji.Instances[a].Slot < ji.Instances[b].Slot
		})
		for _, item := range running {
			if item >= 0 {
				ji.Items.Running++
			}
		}
		for _, js := range plan.Jobs {
			if js.ID == j.ID {
				ji.Reason = reasonText(js.Reason)
				if js.Reason == smartshare.ReasonNotMet {
					n.snapshot(func(st *ledger.State) {
						if why := sched.Unfit(st, j.Spec); why != "" {
							ji.Reason = sched.UnfitReason(why)
						}
					})
				}
			}
		}
		if len(plan.Jobs) == 0 && len(ji.Instances) == 0 {
			ji.Reason = reasonText("no_machine_available")
		}
		if r := n.fetchReason(j); r != "" {
			ji.Reason = r
		}
	}
	ji.Items.Pending = ji.Items.Total - ji.Items.Done - ji.Items.Failed - ji.Items.Running
	if ji.Items.Pending < 0 {
		ji.Items.Pending = 0
	}
	switch j.State {
	case ledger.JobActive:
		ji.State = "queued"
		if ji.Items.Running > 0 {
			ji.State = "running"
		}
	default:
		ji.State = j.State
	}
	return ji
}

func reasonText(code string) string {
	switch code {
	case "":
		return ""
	case "no_machine_available":
		return "no_machine_available: no online machine has a free slot for it (all are busy with equal or higher priority work, offline, or pending approval)"
	case "resource_limits":
		return "resource_limits: machines have free slots but their remaining cores, memory or GPUs (resource limits) are too small for one instance"
	case "requirements_not_met":
		return "requirements_not_met: no machine of the org could ever fit one instance (cores, memory or GPUs per instance exceed every machine's limits)"
	case "smartshare_disabled":
		return "smartshare_disabled: it runs only its primaries (max_cpus 0, or the org's smartshare.mode is none)"
	case "preempted_by_higher_priority":
		return "preempted_by_higher_priority: its instances went to jobs of higher priority"
	}
	return code
}

// jobsPage is how many jobs ListJobs takes under the read lock at a time.
const jobsPage = 256

// ListJobs implements api.Service: the jobs this machine's person may see,
// in submission order, a page at a time (see nextJobs), rendered without
// the read lock.
func (n *Node) ListJobs(ctx context.Context, p api.Page, emit func(api.JobInfo) error) error {
	if err := n.needOrg(); err != nil {
		return err
	}
	var cur *jobKey
	if p.After != "" {
		j, err := n.resolveJob(p.After)
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
		n.snapshot(func(st *ledger.State) { page = nextJobs(st, n.personIn(st), cur, int(size)) })
		for _, j := range page {
			if err := emit(n.jobInfo(j)); err != nil {
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
func (n *Node) Jobs(ctx context.Context) ([]api.JobInfo, error) {
	out := []api.JobInfo{}
	err := n.ListJobs(ctx, api.Page{}, func(j api.JobInfo) error {
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

// Job implements api.Service.
func (n *Node) Job(ctx context.Context, id string) (api.JobInfo, error) {
	if err := n.needOrg(); err != nil {
		return api.JobInfo{}, err
	}
	j, err := n.resolveJob(id)
	if err != nil {
		return api.JobInfo{}, err
	}
	return n.jobInfo(j), nil
}

// canManage: the submitter of a job, admins and the owner may modify or
// cancel it (what).
func (n *Node) canManage(j *ledger.Job, what string) error {
	var err error
	n.snapshot(func(st *ledger.State) {
		me := n.personIn(st)
		if j.Submitter != me && !st.IsAdmin(me) {
			err = api.Errorf(http.StatusForbidden, "%s; only the submitter of a job (%s), admins and the owner may %s it",
				n.whoAmI(st), personLabel(st, j.Submitter), what)
		}
	})
	return err
}

// ModifyJob implements api.Service (Qube's qbmodify).
func (n *Node) ModifyJob(ctx context.Context, id string, req api.JobModify) (api.JobInfo, error) {
	if err := n.needOrg(); err != nil {
		return api.JobInfo{}, err
	}
	j, err := n.resolveJob(id)
	if err != nil {
		return api.JobInfo{}, err
	}
	if err := n.canManage(j, "modify"); err != nil {
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
	if _, err := n.write(ctx, ledger.KindJobModify, m); err != nil {
		return api.JobInfo{}, refused(err)
	}
	return n.Job(ctx, j.ID)
}

// CancelJob implements api.Service.
func (n *Node) CancelJob(ctx context.Context, id string) (api.JobInfo, error) {
	if err := n.needOrg(); err != nil {
		return api.JobInfo{}, err
	}
	j, err := n.resolveJob(id)
	if err != nil {
		return api.JobInfo{}, err
	}
	if err := n.canManage(j, "cancel"); err != nil {
		return api.JobInfo{}, err
	}
	if j.State != ledger.JobActive {
		return api.JobInfo{}, api.Errorf(http.StatusConflict, "job %s is already %s", j.ID, j.State)
	}
	if _, err := n.write(ctx, ledger.KindJobCancel, ledger.JobRef{Job: j.ID}); err != nil {
		return api.JobInfo{}, refused(err)
	}
	n.kickScheduler() // the scheduler stops its instances; the API waits for nobody
	return n.Job(ctx, j.ID)
}
