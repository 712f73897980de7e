package node

import (
	"context"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/node/jobsvc"
	"github.com/cshare/cshare/p2p"
)

// DefaultImage is the image of docker jobs submitted without --image (see
// jobsvc.DefaultImage).
const DefaultImage = jobsvc.DefaultImage

// newJobs builds the jobs API (package jobsvc) over this node's parts:
// after the org service, the runtime and the scheduler.
func (n *Node) newJobs() *jobsvc.Service {
	w := (*jobsWiring)(n)
	return jobsvc.New(jobsvc.Deps{Ledger: n.rep, Scheduler: n.sched, Persons: n.orgs, Mounts: w, Fetches: w, Peers: w,
		Host: n.host, Logs: n.logs, Drivers: n.drivers, RegistryAuth: n.registryAuth, Kick: n.kickScheduler,
		Machine: n.idStr, Now: n.opts.Now, Log: n.log})
}

// jobsWiring is the node as the jobs API's Deps see it.
type jobsWiring Node

func (w *jobsWiring) Mounts(vals []string) ([]ledger.DatasetMount, error) {
	return (*Node)(w).resolveMounts(vals)
}

func (w *jobsWiring) FetchReason(j *ledger.Job) string { return (*Node)(w).fetchReason(j) }

func (w *jobsWiring) OnlinePeers(now time.Time) []p2p.Seen { return (*Node)(w).onlinePeers(now) }

func (w *jobsWiring) EnsureConnected(ctx context.Context, p peer.ID) {
	(*Node)(w).ensureConnected(ctx, p)
}

// The jobs API (api.Service) is the jobs service's.

// SubmitJob implements api.Service.
func (n *Node) SubmitJob(ctx context.Context, req api.JobSubmit) (api.JobSubmitted, error) {
	return n.jobs.SubmitJob(ctx, req)
}

// ListJobs implements api.Service.
func (n *Node) ListJobs(ctx context.Context, p api.Page, emit func(api.JobInfo) error) error {
	return n.jobs.ListJobs(ctx, p, emit)
}

// Jobs is every job this machine's person may see, for callers in this
// process (the dashboard, tests): the API streams them (ListJobs).
func (n *Node) Jobs(ctx context.Context) ([]api.JobInfo, error) { return n.jobs.Jobs(ctx) }

// Job implements api.Service.
func (n *Node) Job(ctx context.Context, id string) (api.JobInfo, error) { return n.jobs.Job(ctx, id) }

// ModifyJob implements api.Service (Qube's qbmodify).
func (n *Node) ModifyJob(ctx context.Context, id string, req api.JobModify) (api.JobInfo, error) {
	return n.jobs.ModifyJob(ctx, id, req)
}

// CancelJob implements api.Service.
func (n *Node) CancelJob(ctx context.Context, id string) (api.JobInfo, error) {
	return n.jobs.CancelJob(ctx, id)
}

// ListJobItems implements api.Service.
func (n *Node) ListJobItems(ctx context.Context, ref string, p api.Page, emit func(api.ItemInfo) error) error {
	return n.jobs.ListJobItems(ctx, ref, p, emit)
}

// JobItems is every item of a job, for callers in this process (tests):
// the API streams them (ListJobItems).
func (n *Node) JobItems(ctx context.Context, id string) ([]api.ItemInfo, error) {
	return n.jobs.JobItems(ctx, id)
}

// JobLogs implements api.Service.
func (n *Node) JobLogs(ctx context.Context, id string, item int64) ([]byte, error) {
	return n.jobs.JobLogs(ctx, id, item)
}
