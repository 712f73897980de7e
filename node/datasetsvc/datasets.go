package datasetsvc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/cshare/cshare/dataset"
	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/store"
	"github.com/cshare/cshare/node/api"
)

var progressID = regexp.MustCompile(`^[A-Za-z0-9-]{1,64}$`)

func (s *Service) needMember() error {
	if err := s.needOrg(); err != nil {
		return err
	}
	var role, who string
	s.snapshot(func(st *ledger.State) {
		role = st.Role(s.d.Persons.PersonIn(st))
		who = s.d.Persons.WhoAmI(st)
	})
	if role == "" {
		return api.Errorf(http.StatusForbidden, "%s yet: an admin must approve this machine first (cshare machine approve %s)", who, s.d.Machine)
	}
	return nil
}

func (s *Service) datasetInfo(st *ledger.State, d *ledger.Dataset) api.DatasetInfo {
	return api.DatasetInfo{Name: d.Name, CID: d.CID, Size: d.Size, Blocks: d.Blocks, Access: d.Access,
		Owner: d.Owner, OwnerName: st.PersonName(d.Owner), Added: api.FormatTime(time.UnixMilli(d.Added))}
}

// Local reports whether this machine holds every block of root.
func (s *Service) Local(ctx context.Context, root string) bool {
	c, err := cid.Decode(root)
	if err != nil {
		return false
	}
	ok, _ := dataset.Complete(ctx, s.blocks, c)
	return ok
}

// Resolve finds the dataset ref names (a name, else a root CID) that
// this machine's person may read. A dataset the person may not read is not
// there for them: a reference to it, by name or CID, is "no such dataset",
// as another member's job is "no such job", and a CID shared with datasets
// they may not read names only those they may.
func (s *Service) Resolve(ref string) (api.DatasetInfo, *ledger.Dataset, error) {
	var (
		d       *ledger.Dataset
		info    api.DatasetInfo
		matches []string
	)
	s.snapshot(func(st *ledger.State) {
		me := s.d.Persons.PersonIn(st)
		d = st.Datasets[ref]
		if d != nil && !st.CanReadDataset(me, d) {
			d = nil
		}
		if d == nil {
			for _, m := range st.DatasetsByCID(ref) {
				if st.CanReadDataset(me, m) {
					matches = append(matches, m.Name)
					d = m
				}
			}
		}
		if d != nil {
			c := *d
			d = &c
			info = s.datasetInfo(st, d)
		}
	})
	switch {
	case d == nil:
		return api.DatasetInfo{}, nil, noSuchDataset(ref)
	case len(matches) > 1:
		return api.DatasetInfo{}, nil, api.Errorf(http.StatusConflict, "dataset: CID %s is the root of datasets %s; name one of them", api.Ellipsize(ref), strings.Join(matches, ", "))
	}
	return info, d, nil
}

// noSuchDataset is the answer to a reference that names no dataset the
// asker may read.
func noSuchDataset(ref string) error {
	return api.Errorf(http.StatusNotFound, "dataset %s: no such dataset; allowed: a name or CID that `cshare dataset ls` lists", text.Quote(api.Ellipsize(ref)))
}

// AddDataset implements api.DatasetsAPI: it imports a path this machine reads,
// then records the dataset. The entry is written only once every block is
// stored; an interrupted import leaves blocks that the next one reuses.
func (s *Service) AddDataset(ctx context.Context, req api.DatasetAdd) (api.DatasetInfo, error) {
	if err := s.needMember(); err != nil {
		return api.DatasetInfo{}, err
	}
	path, err := absPath("path", req.Path)
	if err != nil {
		return api.DatasetInfo{}, err
	}
	if _, err := os.Lstat(path); err != nil {
		return api.DatasetInfo{}, api.FieldErrorf(http.StatusBadRequest, "path", "path: %s: %v", text.Quote(path), unwrapPath(err))
	}
	name := strings.TrimSpace(req.Name)
	if name == "" {
		name = filepath.Base(path)
	}
	if err := text.CheckName("name", name); err != nil {
		return api.DatasetInfo{}, api.FieldErrorf(http.StatusBadRequest, "name", "%v", err)
	}
	if err := s.nameFree(name); err != nil {
		return api.DatasetInfo{}, err
	}
	access := ledger.AccessOrg
	if req.Private {
		access = ledger.AccessPrivate
	}
	var done *atomic.Int64
	if req.Progress != "" {
		if !progressID.MatchString(req.Progress) {
			return api.DatasetInfo{}, api.FieldErrorf(http.StatusBadRequest, "progress", "progress: %s; allowed: 1 to 64 letters, digits or dashes", text.Quote(api.Ellipsize(req.Progress)))
		}
		done = new(atomic.Int64)
		s.mu.Lock()
		s.progress[req.Progress] = done
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			delete(s.progress, req.Progress)
			s.mu.Unlock()
		}()
	}
	// Held until the entry is written: the collector must not take the
	// new blocks, which no dataset of the ledger reaches before it.
	s.adding.RLock()
	defer s.adding.RUnlock()
	pin := &store.Pin{ID: newPinID(), At: s.now()}
	res, err := dataset.Import(ctx, s.blocks, path, pin, func(d int64) {
		if done != nil {
			done.Store(d)
		}
	})
	if errors.Is(err, dataset.ErrPath) {
		return api.DatasetInfo{}, api.FieldErrorf(http.StatusBadRequest, "path", "%s", strings.TrimPrefix(err.Error(), "dataset: bad path: "))
	}
	if err != nil {
		return api.DatasetInfo{}, fmt.Errorf("dataset: import %s: %w", path, err)
	}
	p := ledger.DatasetAdd{Name: name, CID: res.CID.String(), Size: res.Size, Blocks: int64(res.Blocks), Access: access}
	if _, err := s.write(ctx, ledger.KindDatasetAdd, p); err != nil {
		return api.DatasetInfo{}, api.Refused(err)
	}
	// The entry keeps the blocks now.
	if err := s.d.Store.DeleteDataPins([]string{pin.ID}); err != nil {
		s.d.Log.Warn("dataset import pins not removed", "err", err)
	}
	info, _, err := s.Resolve(name)
	if err != nil {
		return api.DatasetInfo{}, err
	}
	info.Local = true
	s.d.Log.Info("dataset added", "name", name, "cid", p.CID, "size", p.Size, "blocks", p.Blocks)
	return info, nil
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func (s *Service) nameFree(name string) error {
	var taken bool
	s.snapshot(func(st *ledger.State) { taken = st.Datasets[name] != nil })
	if taken {
		return api.FieldErrorf(http.StatusConflict, "name", "name: dataset %s exists; allowed: a name no dataset has (--name)", text.Quote(name))
	}
	return nil
}

// DatasetProgress implements api.DatasetsAPI.
func (s *Service) DatasetProgress(ctx context.Context, id string) (api.DatasetProgress, error) {
	s.mu.Lock()
	p := s.progress[id]
	s.mu.Unlock()
	if p == nil {
		return api.DatasetProgress{}, api.Errorf(http.StatusNotFound, "dataset: no import in progress has ID %s", text.Quote(api.Ellipsize(id)))
	}
	return api.DatasetProgress{Done: p.Load()}, nil
}

// Datasets implements api.DatasetsAPI: the datasets this person may read.
func (s *Service) Datasets(ctx context.Context) ([]api.DatasetInfo, error) {
	if err := s.needOrg(); err != nil {
		return nil, err
	}
	out := []api.DatasetInfo{}
	s.snapshot(func(st *ledger.State) {
		me := s.d.Persons.PersonIn(st)
		for _, d := range st.SortedDatasets() {
			if st.CanReadDataset(me, d) {
				out = append(out, s.datasetInfo(st, d))
			}
		}
	})
	for i := range out {
		out[i].Local = s.Local(ctx, out[i].CID)
	}
	return out, nil
}

// Dataset implements api.DatasetsAPI: one dataset, with the online machines
// that hold it.
func (s *Service) Dataset(ctx context.Context, ref string) (api.DatasetInfo, error) {
	if err := s.needOrg(); err != nil {
		return api.DatasetInfo{}, err
	}
	info, _, err := s.Resolve(ref)
	if err != nil {
		return info, err
	}
	info.Local = s.Local(ctx, info.CID)
	info.Holders = s.datasetHolders(ctx, info.CID, info.Local)
	return info, nil
}

// RemoveDataset implements api.DatasetsAPI.
func (s *Service) RemoveDataset(ctx context.Context, ref string) (api.DatasetInfo, error) {
	if err := s.needMember(); err != nil {
		return api.DatasetInfo{}, err
	}
	info, d, err := s.Resolve(ref)
	if err != nil {
		return info, err
	}
	if _, err := s.write(ctx, ledger.KindDatasetRm, ledger.DatasetRef{Name: d.Name}); err != nil {
		return info, api.Refused(err)
	}
	if err := s.Collect(ctx); err != nil {
		s.d.Log.Warn("dataset blocks not collected", "err", err)
	}
	return info, nil
}

// SetDatasetAccess implements api.DatasetsAPI: a dataset.access entry (the
// fold lets its owner or an admin write it).
func (s *Service) SetDatasetAccess(ctx context.Context, ref string, req api.DatasetAccessRequest) (api.DatasetInfo, error) {
	if err := s.needMember(); err != nil {
		return api.DatasetInfo{}, err
	}
	p := ledger.DatasetAccess{Access: req.Access}
	if p.Access != ledger.AccessOrg && p.Access != ledger.AccessPrivate {
		return api.DatasetInfo{}, api.FieldErrorf(http.StatusBadRequest, "access", "access: %s; allowed: org (every member reads it), private (its owner and the admins)",
			text.Quote(api.Ellipsize(req.Access)))
	}
	info, d, err := s.Resolve(ref)
	if err != nil {
		return info, err
	}
	p.Name = d.Name
	if _, err := s.write(ctx, ledger.KindDatasetAccess, p); err != nil {
		return info, api.Refused(err)
	}
	info.Access = p.Access
	return info, nil
}

// GetDataset implements api.DatasetsAPI: fetch what is missing, then write out.
func (s *Service) GetDataset(ctx context.Context, ref string, req api.DatasetGet) (api.DatasetInfo, error) {
	if err := s.needMember(); err != nil {
		return api.DatasetInfo{}, err
	}
	out, err := newPath("out", req.Out)
	if err != nil {
		return api.DatasetInfo{}, err
	}
	if fi, err := os.Stat(filepath.Dir(out)); err != nil || !fi.IsDir() {
		return api.DatasetInfo{}, api.FieldErrorf(http.StatusBadRequest, "out", "out: the parent of %s is not a directory", text.Quote(out))
	}
	info, d, root, err := s.fetched(ctx, ref)
	if err != nil {
		return info, err
	}
	info.Relayed = s.relayedHolders(ctx, root)
	// A write that fails removes what it made: a retry finds no --out.
	if err := dataset.WriteOut(ctx, s.blocks, root, out); err != nil {
		if errors.Is(err, dataset.ErrDAG) {
			return info, api.Errorf(http.StatusUnprocessableEntity, "dataset %s cannot be written out: %s", text.Quote(d.Name), strings.TrimPrefix(err.Error(), dataset.ErrDAG.Error()+": "))
		}
		return info, err
	}
	info.Local = true
	return info, nil
}

// fetched resolves ref to a dataset the asker may read and fetches the
// blocks this machine lacks (get and export both write it out from here).
func (s *Service) fetched(ctx context.Context, ref string) (api.DatasetInfo, *ledger.Dataset, cid.Cid, error) {
	info, d, err := s.Resolve(ref)
	if err != nil {
		return info, nil, cid.Undef, err
	}
	if err := s.fetchDataset(ctx, d, nil); err != nil {
		return info, nil, cid.Undef, err
	}
	root, _ := cid.Decode(d.CID)
	return info, d, root, nil
}

// Collect deletes the dataset blocks no dataset of the ledger
// reaches (all of them once the org is deleted).
func (s *Service) Collect(ctx context.Context) error {
	// The roots are read under the lock: an import or fetch that held it
	// has its entry in the ledger by now.
	s.adding.Lock()
	defer s.adding.Unlock()
	var roots []cid.Cid
	s.snapshot(func(st *ledger.State) {
		if st.Deleted {
			return
		}
		for _, d := range st.SortedDatasets() {
			if c, err := cid.Decode(d.CID); err == nil {
				roots = append(roots, c)
			}
		}
	})
	keep := map[cid.Cid]bool{}
	for _, r := range roots {
		if err := dataset.Walk(ctx, s.blocks, r, func(c cid.Cid, _ bool) error { keep[c] = true; return nil }); err != nil {
			return err
		}
	}
	// Blocks of an import without its entry yet are pinned: a rerun of an
	// interrupted add reuses them, also after a restart, for a day. A pin
	// goes when it is older, or when datasets reach all its blocks.
	done := map[string]bool{} // pins to remove
	pinned := map[cid.Cid]bool{}
	now := s.now()
	if err := s.d.Store.ForEachDataPin(func(p store.Pin, c cid.Cid) error {
		old := now.Sub(p.At) > importPinTTL
		if _, seen := done[p.ID]; !seen {
			done[p.ID] = true
		}
		if !old && !keep[c] {
			done[p.ID] = false
			pinned[c] = true
		}
		return nil
	}); err != nil {
		return err
	}
	for c := range pinned {
		keep[c] = true
	}
	var unpin []string
	for id, d := range done {
		if d {
			unpin = append(unpin, id)
		}
	}
	if len(unpin) > 0 {
		slices.Sort(unpin)
		if err := s.d.Store.DeleteDataPins(unpin); err != nil {
			return err
		}
	}
	var drop []cid.Cid
	if err := s.d.Store.ForEachDataCID(func(c cid.Cid) error {
		if !keep[c] {
			drop = append(drop, c)
		}
		return nil
	}); err != nil {
		return err
	}
	if len(drop) > 0 {
		s.d.Log.Info("dataset blocks collected", "blocks", len(drop))
	}
	return s.d.Store.DeleteDataBlocks(drop)
}

// importPinTTL is how long the blocks of an interrupted add are kept for a
// rerun to reuse.
const importPinTTL = 24 * time.Hour

func newPinID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// absPath checks that field's value p is an absolute path on the node's
// machine and returns it cleaned.
func absPath(field, p string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", api.FieldErrorf(http.StatusBadRequest, field, "%s: %s is not absolute; allowed: an absolute path on the node's machine", field, text.Quote(api.Ellipsize(p)))
	}
	return filepath.Clean(p), nil
}

// newPath is absPath for a path to be created: it must not exist yet.
func newPath(field, p string) (string, error) {
	out, err := absPath(field, p)
	if err != nil {
		return "", err
	}
	if _, err := os.Lstat(out); err == nil {
		return "", api.FieldErrorf(http.StatusConflict, field, "%s: %s exists; allowed: a path that does not exist yet", field, text.Quote(out))
	}
	return out, nil
}
