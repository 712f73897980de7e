package datasetsvc

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/cshare/cshare/dataset"
	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
)

// ImportDataset implements api.DatasetsAPI: a CAR file's DAG becomes a dataset
// once every block of its root is stored and checked.
func (s *Service) ImportDataset(ctx context.Context, req api.DatasetImport) (api.DatasetInfo, error) {
	if err := s.needMember(); err != nil {
		return api.DatasetInfo{}, err
	}
	path, err := absPath("path", req.Path)
	if err != nil {
		return api.DatasetInfo{}, err
	}
	name := strings.TrimSpace(req.Name)
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(path), ".car")
	}
	if err := text.CheckName("name", name); err != nil {
		return api.DatasetInfo{}, api.FieldErrorf(http.StatusBadRequest, "name", "%v", err)
	}
	if err := s.nameFree(name); err != nil {
		return api.DatasetInfo{}, err
	}
	// A regular file only: opening a named pipe would wait for a writer
	// for good, holding a thread of the node's (and the request) per try.
	f, err := dataset.OpenRegular(path)
	if err != nil {
		return api.DatasetInfo{}, api.FieldErrorf(http.StatusBadRequest, "path", "path: %s", strings.TrimPrefix(strings.TrimPrefix(err.Error(), dataset.ErrPath.Error()+": "), "path "))
	}
	defer f.Close()
	access := ledger.AccessOrg
	if req.Private {
		access = ledger.AccessPrivate
	}
	s.adding.RLock()
	defer s.adding.RUnlock()
	res, err := dataset.ImportCAR(ctx, s.blocks, f)
	if errors.Is(err, dataset.ErrCAR) {
		return api.DatasetInfo{}, api.FieldErrorf(http.StatusBadRequest, "path", "%s: %s", text.Quote(path), strings.TrimPrefix(err.Error(), "dataset: bad CAR: "))
	}
	if err != nil {
		return api.DatasetInfo{}, fmt.Errorf("dataset: import %s: %w", path, err)
	}
	p := ledger.DatasetAdd{Name: name, CID: res.CID.String(), Size: res.Size, Blocks: int64(res.Blocks), Access: access}
	if _, err := s.write(ctx, ledger.KindDatasetAdd, p); err != nil {
		return api.DatasetInfo{}, api.Refused(err)
	}
	info, _, err := s.Resolve(name)
	info.Local = true
	return info, err
}

// ExportDataset implements api.DatasetsAPI: fetch what is missing, then write a
// CARv1 through a temporary name.
func (s *Service) ExportDataset(ctx context.Context, ref string, req api.DatasetExport) (api.DatasetInfo, error) {
	if err := s.needMember(); err != nil {
		return api.DatasetInfo{}, err
	}
	out, err := newPath("car", req.Car)
	if err != nil {
		return api.DatasetInfo{}, err
	}
	info, d, root, err := s.fetched(ctx, ref)
	if err != nil {
		return info, err
	}
	tmp := out + ".partial"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return info, api.FieldErrorf(http.StatusBadRequest, "car", "car: %s: %v", text.Quote(out), unwrapPath(err))
	}
	_, err = dataset.ExportCAR(ctx, s.blocks, root, f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, out)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return info, fmt.Errorf("dataset: export %s: %w", d.Name, err)
	}
	info.Local = true
	return info, nil
}
