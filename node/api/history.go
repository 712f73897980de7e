package api

import "context"

// The ledger's history (docs/design.md §5.6, §7.3): what a node keeps of
// the entries below its checkpoints, written out before ledger.retain
// prunes them.

// HistoryAPI is the ledger's history on this node (node/orgsvc.History).
type HistoryAPI interface {
	// ExportHistory writes the ledger entries this node still has to a
	// file on its machine.
	ExportHistory(ctx context.Context, req HistoryExport) (HistoryExported, error)
}

// HistoryExport is the body of POST /v1/org/history/export: the node
// writes the ledger entries it still has (docs/design.md §7.3) to Out, an
// absolute path on the node's machine that does not exist yet.
type HistoryExport struct {
	Out string `json:"out"`
}

// HistoryExported is what an export wrote: the file, its format
// ("cshare-ledger-history/1": length-prefixed entries), how many entries
// and bytes.
type HistoryExported struct {
	Path    string `json:"path"`
	Format  string `json:"format"`
	Entries int    `json:"entries"`
	Bytes   int64  `json:"bytes"`
}

func historyRoutes(svc HistoryAPI) []route {
	return []route{
		{"POST /v1/org/history/export", decoded(svc.ExportHistory)},
	}
}

// ExportHistory has the node write the ledger entries it still has to a
// file on its machine.
func (c *Client) ExportHistory(ctx context.Context, req HistoryExport) (HistoryExported, error) {
	return post[HistoryExported](c, ctx, "/v1/org/history/export", req)
}
