package node

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
	"sync"
	"sync/atomic"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/cshare/cshare/dataset"
	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/store"
	"github.com/cshare/cshare/node/api"
)

// datasets is the node's side of datasets: the blockstore over its Badger,
// imports in progress, and the lock that keeps the collector of unreferenced
// blocks from running while blocks are being added.
type datasets struct {
	blocks *dataset.Blockstore
	// adding is held (read) by imports and fetches, (write) by collect.
	adding   sync.RWMutex
	mu       sync.Mutex
	progress map[string]*atomic.Int64
	xch      *exchange // nil until the host is up
}

var progressID = regexp.MustCompile(`^[A-Za-z0-9-]{1,64}$`)

func (n *Node) needMember() error {
	if err := n.needOrg(); err != nil {
		return err
	}
	var role, who string
	n.snapshot(func(st *ledger.State) {
		role = st.Role(n.personIn(st))
		who = n.whoAmI(st)
	})
	if role == "" {
		return api.Errorf(http.StatusForbidden, "%s yet: an admin must approve this machine first (cshare machine approve %s)", who, n.idStr)
	}
	return nil
}

func (n *Node) datasetInfo(st *ledger.State, d *ledger.Dataset) api.DatasetInfo {
	return api.DatasetInfo{Name: d.Name, CID: d.CID, Size: d.Size, Blocks: d.Blocks, Access: d.Access,
		Owner: d.Owner, OwnerName: personName(st, d.Owner), Added: api.FormatTime(time.UnixMilli(d.Added))}
}

// local reports whether this machine holds every block of root.
func (n *Node) datasetLocal(ctx context.Context, root string) bool {
	c, err := cid.Decode(root)
	if err != nil {
		return false
	}
	ok, _ := dataset.Complete(ctx, n.ds.blocks, c)
	return ok
}

// resolveDataset finds the dataset ref names (a name, else a root CID) that
// this machine's person may read.
func (n *Node) resolveDataset(ref string) (api.DatasetInfo, *ledger.Dataset, error) {
	var (
		d       *ledger.Dataset
		info    api.DatasetInfo
		matches []string
		canRead bool
	)
	n.snapshot(func(st *ledger.State) {
		d = st.Datasets[ref]
		if d == nil {
			for _, m := range st.DatasetsByCID(ref) {
				matches = append(matches, m.Name)
				d = m
			}
		}
		if d != nil {
			c := *d
			d = &c
			info = n.datasetInfo(st, d)
			canRead = st.CanReadDataset(n.personIn(st), d)
		}
	})
	switch {
	case d == nil:
		return info, nil, api.Errorf(http.StatusNotFound, "dataset: no dataset is named or has the CID %s; allowed: a name or CID that `cshare dataset ls` lists", text.Quote(api.Ellipsize(ref)))
	case len(matches) > 1:
		return info, nil, api.Errorf(http.StatusConflict, "dataset: CID %s is the root of datasets %s; name one of them", api.Ellipsize(ref), strings.Join(matches, ", "))
	case !canRead:
		return info, nil, n.refuse(fmt.Sprintf("dataset %s is private to its owner and the admins", text.Quote(d.Name)))
	}
	return info, d, nil
}

// AddDataset implements api.Service: it imports a path this machine reads,
// then records the dataset. The entry is written only once every block is
// stored; an interrupted import leaves blocks that the next one reuses.
func (n *Node) AddDataset(ctx context.Context, req api.DatasetAdd) (api.DatasetInfo, error) {
	if err := n.needMember(); err != nil {
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
	if err := n.nameFree(name); err != nil {
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
		n.ds.mu.Lock()
		n.ds.progress[req.Progress] = done
		n.ds.mu.Unlock()
		defer func() {
			n.ds.mu.Lock()
			delete(n.ds.progress, req.Progress)
			n.ds.mu.Unlock()
		}()
	}
	// Held until the entry is written: the collector must not take the
	// new blocks, which no dataset of the ledger reaches before it.
	n.ds.adding.RLock()
	defer n.ds.adding.RUnlock()
	pin := &store.Pin{ID: newPinID(), At: n.now()}
	res, err := dataset.Import(ctx, n.ds.blocks, path, pin, func(d int64) {
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
	if _, err := n.write(ctx, ledger.KindDatasetAdd, p); err != nil {
		return api.DatasetInfo{}, refused(err)
	}
	// The entry keeps the blocks now.
	if err := n.store.DeleteDataPins([]string{pin.ID}); err != nil {
		n.log.Warn("dataset import pins not removed", "err", err)
	}
	info, _, err := n.resolveDataset(name)
	if err != nil {
		return api.DatasetInfo{}, err
	}
	info.Local = true
	n.log.Info("dataset added", "name", name, "cid", p.CID, "size", p.Size, "blocks", p.Blocks)
	return info, nil
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func (n *Node) nameFree(name string) error {
	var taken bool
	n.snapshot(func(st *ledger.State) { taken = st.Datasets[name] != nil })
	if taken {
		return api.FieldErrorf(http.StatusConflict, "name", "name: dataset %s exists; allowed: a name no dataset has (--name)", text.Quote(name))
	}
	return nil
}

// DatasetProgress implements api.Service.
func (n *Node) DatasetProgress(ctx context.Context, id string) (api.DatasetProgress, error) {
	n.ds.mu.Lock()
	p := n.ds.progress[id]
	n.ds.mu.Unlock()
	if p == nil {
		return api.DatasetProgress{}, api.Errorf(http.StatusNotFound, "dataset: no import in progress has ID %s", text.Quote(api.Ellipsize(id)))
	}
	return api.DatasetProgress{Done: p.Load()}, nil
}

// Datasets implements api.Service: the datasets this person may read.
func (n *Node) Datasets(ctx context.Context) ([]api.DatasetInfo, error) {
	if err := n.needOrg(); err != nil {
		return nil, err
	}
	out := []api.DatasetInfo{}
	n.snapshot(func(st *ledger.State) {
		me := n.personIn(st)
		for _, d := range st.SortedDatasets() {
			if st.CanReadDataset(me, d) {
				out = append(out, n.datasetInfo(st, d))
			}
		}
	})
	for i := range out {
		out[i].Local = n.datasetLocal(ctx, out[i].CID)
	}
	return out, nil
}

// Dataset implements api.Service: one dataset, with the online machines
// that hold it.
func (n *Node) Dataset(ctx context.Context, ref string) (api.DatasetInfo, error) {
	if err := n.needOrg(); err != nil {
		return api.DatasetInfo{}, err
	}
	info, _, err := n.resolveDataset(ref)
	if err != nil {
		return info, err
	}
	info.Local = n.datasetLocal(ctx, info.CID)
	info.Holders = n.datasetHolders(ctx, info.CID, info.Local)
	return info, nil
}

// RemoveDataset implements api.Service.
func (n *Node) RemoveDataset(ctx context.Context, ref string) (api.DatasetInfo, error) {
	if err := n.needMember(); err != nil {
		return api.DatasetInfo{}, err
	}
	info, d, err := n.resolveDataset(ref)
	if err != nil {
		return info, err
	}
	if _, err := n.write(ctx, ledger.KindDatasetRm, ledger.DatasetRef{Name: d.Name}); err != nil {
		return info, refused(err)
	}
	if err := n.collectDatasets(ctx); err != nil {
		n.log.Warn("dataset blocks not collected", "err", err)
	}
	return info, nil
}

// GetDataset implements api.Service: fetch what is missing, then write out.
func (n *Node) GetDataset(ctx context.Context, ref string, req api.DatasetGet) (api.DatasetInfo, error) {
	if err := n.needMember(); err != nil {
		return api.DatasetInfo{}, err
	}
	out, err := newPath("out", req.Out)
	if err != nil {
		return api.DatasetInfo{}, err
	}
	if fi, err := os.Stat(filepath.Dir(out)); err != nil || !fi.IsDir() {
		return api.DatasetInfo{}, api.FieldErrorf(http.StatusBadRequest, "out", "out: the parent of %s is not a directory", text.Quote(out))
	}
	info, d, err := n.resolveDataset(ref)
	if err != nil {
		return info, err
	}
	if err := n.fetchDataset(ctx, d, nil); err != nil {
		return info, err
	}
	root, _ := cid.Decode(d.CID)
	if err := dataset.WriteOut(ctx, n.ds.blocks, root, out); err != nil {
		return info, err
	}
	info.Local = true
	return info, nil
}

// collectDatasets deletes the dataset blocks no dataset of the ledger
// reaches (all of them once the org is deleted).
func (n *Node) collectDatasets(ctx context.Context) error {
	// The roots are read under the lock: an import or fetch that held it
	// has its entry in the ledger by now.
	n.ds.adding.Lock()
	defer n.ds.adding.Unlock()
	var roots []cid.Cid
	n.snapshot(func(st *ledger.State) {
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
		if err := dataset.Walk(ctx, n.ds.blocks, r, func(c cid.Cid, _ bool) error { keep[c] = true; return nil }); err != nil {
			return err
		}
	}
	// Blocks of an import without its entry yet are pinned: a rerun of an
	// interrupted add reuses them, also after a restart, for a day. A pin
	// goes when it is older, or when datasets reach all its blocks.
	done := map[string]bool{} // pins to remove
	pinned := map[cid.Cid]bool{}
	now := n.now()
	if err := n.store.ForEachDataPin(func(p store.Pin, c cid.Cid) error {
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
		if err := n.store.DeleteDataPins(unpin); err != nil {
			return err
		}
	}
	var drop []cid.Cid
	if err := n.store.ForEachDataCID(func(c cid.Cid) error {
		if !keep[c] {
			drop = append(drop, c)
		}
		return nil
	}); err != nil {
		return err
	}
	if len(drop) > 0 {
		n.log.Info("dataset blocks collected", "blocks", len(drop))
	}
	return n.store.DeleteDataBlocks(drop)
}

// importPinTTL is how long the blocks of an interrupted add are kept for a
// rerun to reuse.
const importPinTTL = 24 * time.Hour

func newPinID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func newDatasets(s *store.Store) datasets {
	return datasets{blocks: dataset.NewBlockstore(s), progress: map[string]*atomic.Int64{}}
}

// datasetLoop collects the blocks and materialised trees of removed datasets
// (whoever removed them) when the ledger's datasets change, and trees of
// ended jobs.
func (n *Node) datasetLoop() {
	t := time.NewTicker(max(n.interval, 2*time.Second))
	defer t.Stop()
	last := ""
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
		var key string
		n.snapshot(func(st *ledger.State) {
			key = datasetsKey(st)
			if st.Deleted {
				key = "\x00deleted"
			}
		})
		if key != last {
			if err := n.collectDatasets(n.ctx); err != nil && n.ctx.Err() == nil {
				n.log.Warn("dataset blocks not collected", "err", err)
			}
			last = key
		}
		n.collectMaterialised(n.ctx)
	}
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
