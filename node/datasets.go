package node

import (
	"context"
	"time"

	"github.com/cshare/cshare/dataset"
	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/node/datasetsvc"
	"github.com/cshare/cshare/p2p"
)

// newDatasets builds the dataset service (package datasetsvc) over this
// node's parts: after the store, the replica, the host and the org
// service, before the exchange it serves.
func (n *Node) newDatasets() *datasetsvc.Service {
	return datasetsvc.New(n.ctx, datasetsvc.Deps{Ledger: n.rep, Host: n.host, Store: n.store,
		Blocks: dataset.NewBlockstore(n.store), Persons: n.orgs, Peers: (*dsPeers)(n),
		Machine: n.idStr, DataDir: n.opts.DataDir, Interval: n.interval,
		Kick: n.kickScheduler, Spawn: n.spawn, Now: n.opts.Now, Log: n.log})
}

// dsPeers is liveness from heartbeats, as the dataset service sees it.
type dsPeers Node

func (p *dsPeers) Liveness(id string, now time.Time) (p2p.Heartbeat, time.Time, bool) {
	return (*Node)(p).liveness(id, now)
}
func (p *dsPeers) OnlinePeers(now time.Time) []p2p.Seen { return (*Node)(p).onlinePeers(now) }

// The dataset service's parts that the rest of the node calls.

// resolveMounts turns a job's --dataset values into mounts.
func (n *Node) resolveMounts(vals []string) ([]ledger.DatasetMount, error) {
	return n.ds.ResolveMounts(vals)
}

// fetchReason is why j's items wait on a dataset fetch, or "".
func (n *Node) fetchReason(j *ledger.Job) string { return n.ds.FetchReason(j) }

// fetchReport is this machine's running dataset fetches, for its heartbeat.
func (n *Node) fetchReport() []p2p.DatasetFetch { return n.ds.FetchReport() }

// The datasets' API (api.Service) is the dataset service's.

// AddDataset implements api.Service.
func (n *Node) AddDataset(ctx context.Context, req api.DatasetAdd) (api.DatasetInfo, error) {
	return n.ds.AddDataset(ctx, req)
}

// DatasetProgress implements api.Service.
func (n *Node) DatasetProgress(ctx context.Context, id string) (api.DatasetProgress, error) {
	return n.ds.DatasetProgress(ctx, id)
}

// Datasets implements api.Service.
func (n *Node) Datasets(ctx context.Context) ([]api.DatasetInfo, error) { return n.ds.Datasets(ctx) }

// Dataset implements api.Service.
func (n *Node) Dataset(ctx context.Context, ref string) (api.DatasetInfo, error) {
	return n.ds.Dataset(ctx, ref)
}

// RemoveDataset implements api.Service.
func (n *Node) RemoveDataset(ctx context.Context, ref string) (api.DatasetInfo, error) {
	return n.ds.RemoveDataset(ctx, ref)
}

// GetDataset implements api.Service.
func (n *Node) GetDataset(ctx context.Context, ref string, req api.DatasetGet) (api.DatasetInfo, error) {
	return n.ds.GetDataset(ctx, ref, req)
}

// ImportDataset implements api.Service.
func (n *Node) ImportDataset(ctx context.Context, req api.DatasetImport) (api.DatasetInfo, error) {
	return n.ds.ImportDataset(ctx, req)
}

// ExportDataset implements api.Service.
func (n *Node) ExportDataset(ctx context.Context, ref string, req api.DatasetExport) (api.DatasetInfo, error) {
	return n.ds.ExportDataset(ctx, ref, req)
}
