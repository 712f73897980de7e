package orgsvc

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/ledger/replica"
	"github.com/cshare/cshare/node/api"
)

// History is the ledger's history on this node, as the API serves it
// (api.HistoryAPI).
type History struct{ s *Service }

// HistoryOf is s's History.
func HistoryOf(s *Service) History { return History{s} }

// ExportHistory implements api.HistoryAPI: the ledger entries this node still
// has (those below its start in the store's history and those in memory;
// pruned ones are gone) go to req.Out, a new file on this machine, written
// through a temporary name. Admins only: it is the org's whole record.
func (h History) ExportHistory(ctx context.Context, req api.HistoryExport) (api.HistoryExported, error) {
	s := h.s
	if err := s.needAdmin("export the ledger's history"); err != nil {
		return api.HistoryExported{}, err
	}
	if !filepath.IsAbs(req.Out) {
		return api.HistoryExported{}, api.FieldErrorf(http.StatusBadRequest, "out", "out: %s is not absolute; allowed: an absolute path on the node's machine", text.Quote(api.Ellipsize(req.Out)))
	}
	out := filepath.Clean(req.Out)
	if _, err := os.Lstat(out); err == nil {
		return api.HistoryExported{}, api.FieldErrorf(http.StatusConflict, "out", "out: %s exists; allowed: a path that does not exist yet", text.Quote(out))
	}
	tmp := out + ".partial"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return api.HistoryExported{}, api.FieldErrorf(http.StatusBadRequest, "out", "out: %s: %v", text.Quote(out), err)
	}
	n, err := s.d.Ledger.ExportHistory(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	var size int64
	if err == nil {
		var fi os.FileInfo
		if fi, err = os.Stat(tmp); err == nil {
			size = fi.Size()
			err = os.Rename(tmp, out)
		}
	}
	if err != nil {
		_ = os.Remove(tmp)
		return api.HistoryExported{}, fmt.Errorf("org: export history: %w", err)
	}
	return api.HistoryExported{Path: out, Format: replica.HistoryFormat, Entries: n, Bytes: size}, nil
}
