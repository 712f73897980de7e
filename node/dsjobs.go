package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/cshare/cshare/dataset"
	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/p2p"
	"github.com/cshare/cshare/runtime"
)

// Jobs mount datasets: the node materialises a dataset's files once under
// <data dir>/datasets/<CID> (read-only) and binds that into each instance.

// fetch is one dataset's fetch to this machine for jobs.
type fetch struct {
	name        string
	size        int64
	mu          sync.Mutex
	have, known int
	done        chan struct{}
	err         error
	ended       time.Time
}

// fetchRetry is how long a failed fetch waits before the next try.
const fetchRetry = 5 * time.Second

type jobFetches struct {
	mu sync.Mutex
	of map[string]*fetch // by CID
}

// resolveMounts turns --dataset values (NAME|CID:/path) into mounts of
// datasets this person may read.
func (n *Node) resolveMounts(vals []string) ([]ledger.DatasetMount, error) {
	var out []ledger.DatasetMount
	for _, v := range vals {
		k := strings.Index(v, ":/")
		if k <= 0 {
			return nil, api.FieldErrorf(http.StatusBadRequest, "datasets", "--dataset: %s; allowed: NAME|CID:/absolute/path", text.Quote(api.Ellipsize(v)))
		}
		ref, path := v[:k], v[k+1:]
		if err := ledger.CheckMountPath("--dataset "+ref+" path", path); err != nil {
			return nil, api.FieldErrorf(http.StatusBadRequest, "datasets", "%v", err)
		}
		info, _, err := n.resolveDataset(ref)
		if err != nil {
			return nil, err
		}
		out = append(out, ledger.DatasetMount{Name: info.Name, CID: info.CID, Path: path})
	}
	return out, nil
}

func (n *Node) materialDir(c string) string {
	return filepath.Join(n.opts.DataDir, "datasets", c)
}

// datasetsWait is nil when this machine holds, materialised, every dataset
// j mounts; else a channel closed when it is worth looking again (a fetch
// ended). It starts the fetches that are not running.
func (n *Node) datasetsWait(j *ledger.Job) <-chan struct{} {
	for _, m := range j.Spec.Datasets {
		if _, err := os.Stat(n.materialDir(m.CID)); err == nil {
			continue
		}
		return n.startFetch(m)
	}
	return nil
}

func (n *Node) startFetch(m ledger.DatasetMount) <-chan struct{} {
	n.jf.mu.Lock()
	defer n.jf.mu.Unlock()
	if n.jf.of == nil {
		n.jf.of = map[string]*fetch{}
	}
	f := n.jf.of[m.CID]
	if f != nil {
		select {
		case <-f.done:
			if n.now().Sub(f.ended) < fetchRetry {
				t := make(chan struct{})
				time.AfterFunc(fetchRetry-n.now().Sub(f.ended), func() { close(t) })
				return t
			}
		default:
			return f.done // running
		}
	}
	var size int64
	var d *ledger.Dataset
	n.snapshot(func(st *ledger.State) {
		for _, x := range st.DatasetsByCID(m.CID) {
			c := *x
			d, size = &c, x.Size
		}
	})
	f = &fetch{name: m.Name, size: size, done: make(chan struct{})}
	n.jf.of[m.CID] = f
	if d == nil {
		d = &ledger.Dataset{Name: m.Name, CID: m.CID}
	}
	n.spawn(func() {
		err := n.fetchDataset(n.ctx, d, func(have, known int) {
			f.mu.Lock()
			f.have, f.known = have, known
			f.mu.Unlock()
		})
		if err == nil {
			err = n.materialise(m.CID)
		}
		if err != nil && n.ctx.Err() == nil {
			n.log.Warn("dataset fetch for a job failed", "dataset", m.Name, "cid", m.CID, "err", err)
		}
		f.mu.Lock()
		f.err, f.ended = err, n.now()
		f.mu.Unlock()
		close(f.done)
		n.kickScheduler()
	})
	return f.done
}

// materialise writes a stored dataset out under materialDir, read-only,
// through a temporary name so a half-written tree is never mounted.
func (n *Node) materialise(c string) error {
	dst := n.materialDir(c)
	if _, err := os.Stat(dst); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	root, err := cid.Decode(c)
	if err != nil {
		return err
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	tmp := dst + ".tmp-" + hex.EncodeToString(b)
	if err := dataset.WriteOut(n.ctx, n.ds.blocks, root, tmp); err != nil {
		_ = removeTree(tmp)
		return err
	}
	if err := readOnly(tmp); err != nil {
		_ = removeTree(tmp)
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		_ = removeTree(tmp)
		return err
	}
	return nil
}

// readOnly takes the write bits off a tree (directories last).
func readOnly(root string) error {
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			return nil
		case d.IsDir():
			dirs = append(dirs, p)
			return nil
		}
		return os.Chmod(p, 0o444)
	})
	if err != nil {
		return err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := os.Chmod(dirs[i], 0o555); err != nil {
			return err
		}
	}
	return nil
}

// removeTree removes a tree that readOnly made read-only.
func removeTree(root string) error {
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o755)
		}
		return nil
	})
	return os.RemoveAll(root)
}

// datasetMounts are j's datasets as runtime mounts, read-only, and the
// environment that tells an instance where each is: CSHARE_DATASET_<i> (from
// 0, in --dataset order) is the path the instance sees (under its work
// directory for the exec driver, which links mounts there).
func (n *Node) datasetMounts(j *ledger.Job, workDir string) ([]runtime.Mount, map[string]string) {
	var out []runtime.Mount
	env := map[string]string{}
	for i, m := range j.Spec.Datasets {
		out = append(out, runtime.Mount{Source: n.materialDir(m.CID), Target: m.Path, ReadOnly: true})
		at := m.Path
		if j.Spec.Driver == "exec" {
			at = filepath.Join(workDir, m.Path)
		}
		env[fmt.Sprintf("CSHARE_DATASET_%d", i)] = at
	}
	return out, env
}

// fetchReason is "fetching dataset N (x of y MB)" while this machine, or
// else another online one (as its heartbeat says), fetches a dataset j
// mounts; else "".
func (n *Node) fetchReason(j *ledger.Job) string {
	if len(j.Spec.Datasets) == 0 {
		return ""
	}
	mine := map[string]p2p.DatasetFetch{}
	for _, f := range n.fetchReport() {
		mine[f.CID] = f
	}
	for _, m := range j.Spec.Datasets {
		if f, ok := mine[m.CID]; ok {
			return fetchText(m.Name, f)
		}
	}
	peers := n.onlinePeers(n.now()) // by machine ID
	for _, m := range j.Spec.Datasets {
		for _, p := range peers {
			for _, f := range p.Heartbeat.Fetches {
				if f.CID == m.CID {
					return fetchText(m.Name, f)
				}
			}
		}
	}
	return ""
}

func fetchText(name string, f p2p.DatasetFetch) string {
	return fmt.Sprintf("fetching dataset %s (%s of %s MB)", name, mb(f.Have), mb(f.Size))
}

// fetchReport is this machine's running dataset fetches for jobs, by CID,
// at most p2p.MaxFetches, for its heartbeat.
func (n *Node) fetchReport() []p2p.DatasetFetch {
	n.jf.mu.Lock()
	defer n.jf.mu.Unlock()
	var out []p2p.DatasetFetch
	for c, f := range n.jf.of {
		select {
		case <-f.done:
			continue
		default:
		}
		f.mu.Lock()
		have, known := f.have, f.known
		f.mu.Unlock()
		var x int64
		if known > 0 {
			x = min(f.size*int64(have)/int64(known), f.size)
		}
		out = append(out, p2p.DatasetFetch{CID: c, Have: max(x, 0), Size: max(f.size, 0)})
	}
	slices.SortFunc(out, func(a, b p2p.DatasetFetch) int { return strings.Compare(a.CID, b.CID) })
	return out[:min(len(out), p2p.MaxFetches)]
}

func mb(b int64) string {
	return fmt.Sprintf("%.1f", float64(b)/1e6)
}

// collectMaterialised removes materialised datasets that no dataset of the
// ledger and no active job uses.
func (n *Node) collectMaterialised(ctx context.Context) {
	dir := filepath.Join(n.opts.DataDir, "datasets")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	used := map[string]bool{}
	n.snapshot(func(st *ledger.State) {
		if st.Deleted {
			return
		}
		for _, d := range st.Datasets {
			used[d.CID] = true
		}
		for _, j := range st.Jobs {
			if j.State == ledger.JobActive {
				for _, m := range j.Spec.Datasets {
					used[m.CID] = true
				}
			}
		}
	})
	for _, e := range ents {
		name := e.Name()
		if strings.Contains(name, ".tmp-") {
			continue // a materialisation in progress (or one a crash left)
		}
		if !used[name] {
			_ = removeTree(filepath.Join(dir, name))
		}
	}
}
