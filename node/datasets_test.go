package node

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ipfs/boxo/ipld/merkledag"
	"github.com/ipfs/boxo/ipld/unixfs"
	"github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
	carv2 "github.com/ipld/go-car/v2"
	"github.com/ipld/go-car/v2/storage"
	"github.com/multiformats/go-multihash"

	"github.com/cshare/cshare/dataset"
	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/store"
	"github.com/cshare/cshare/node/api"
)

// Three machines, each its own person: n0 adds an org-wide and a private
// dataset; n1 fetches the org-wide one from n0 (byte for byte), may not read
// the private one, nor remove n0's; n0 removes one and every machine drops
// its blocks.
func TestDatasetsMesh(t *testing.T) {
	m := newMesh(t, meshConfig{n: 3, interval: 200 * time.Millisecond})
	m.formOrg()
	ctx := ctxT(t)
	n0, n1 := m.nodes[0].Node, m.nodes[1].Node

	src := filepath.Join(t.TempDir(), "set")
	if err := os.MkdirAll(filepath.Join(src, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 40000) // 640 KB: 3 chunks
	if err := os.WriteFile(filepath.Join(src, "sub", "big.bin"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "a.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	// Bad input: one line each, nothing written.
	for _, c := range []struct {
		req  api.DatasetAdd
		code int
	}{
		{api.DatasetAdd{Path: "relative"}, http.StatusBadRequest},
		{api.DatasetAdd{Path: filepath.Join(src, "missing")}, http.StatusBadRequest},
		{api.DatasetAdd{Path: src, Name: "bad\x1bname"}, http.StatusBadRequest},
	} {
		if _, err := n0.ds.AddDataset(ctx, c.req); statusCode(err) != c.code {
			t.Errorf("add %+v: %v, want %d", c.req, err, c.code)
		}
	}

	d, err := n0.ds.AddDataset(ctx, api.DatasetAdd{Path: src, Name: "set"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n0.ds.AddDataset(ctx, api.DatasetAdd{Path: src, Name: "set"}); statusCode(err) != http.StatusConflict {
		t.Fatalf("taken name: %v", err)
	}
	priv, err := n0.ds.AddDataset(ctx, api.DatasetAdd{Path: filepath.Join(src, "a.txt"), Name: "mine", Private: true})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "n1 sees the datasets", func() string {
		k := 0
		n1.rep.View(func(st *ledger.State) { k = len(st.Datasets) })
		if k != 2 {
			return fmt.Sprintf("n1 knows %d datasets", k)
		}
		if ds, _ := n1.ds.Datasets(ctx); len(ds) != 1 || ds[0].Name != "set" {
			return "n1 lists the wrong datasets"
		}
		return ""
	})
	if _, err := n1.ds.Dataset(ctx, priv.CID); statusCode(err) != http.StatusNotFound {
		t.Fatalf("n1 reads the private dataset: %v", err)
	}
	if _, err := n1.ds.GetDataset(ctx, "mine", api.DatasetGet{Out: filepath.Join(t.TempDir(), "x")}); statusCode(err) != http.StatusNotFound {
		t.Fatalf("n1 gets the private dataset: %v", err)
	}
	if _, err := n1.ds.RemoveDataset(ctx, "set"); statusCode(err) != http.StatusForbidden {
		t.Fatalf("n1 removes n0's dataset: %v", err)
	}
	// Who may read a dataset: its owner (or an admin) changes it.
	if _, err := n1.ds.SetDatasetAccess(ctx, "set", api.DatasetAccessRequest{Access: ledger.AccessPrivate}); statusCode(err) != http.StatusForbidden {
		t.Fatalf("n1 makes n0's dataset private: %v", err)
	}
	if _, err := n0.ds.SetDatasetAccess(ctx, "mine", api.DatasetAccessRequest{Access: "all"}); statusCode(err) != http.StatusBadRequest ||
		!strings.HasPrefix(err.Error(), "access:") {
		t.Fatalf("access all: %v", err)
	}
	if got, err := n0.ds.SetDatasetAccess(ctx, "mine", api.DatasetAccessRequest{Access: ledger.AccessOrg}); err != nil || got.Access != ledger.AccessOrg {
		t.Fatalf("n0 shares mine: %+v %v", got, err)
	}
	eventually(t, 30*time.Second, "n1 reads mine once shared", func() string {
		if _, err := n1.ds.Dataset(ctx, "mine"); err != nil {
			return err.Error()
		}
		return ""
	})
	// Holders are the online machines that hold it (liveness is heartbeats:
	// polled).
	eventually(t, 30*time.Second, "n1 shows set held by n0", func() string {
		show, err := n1.ds.Dataset(ctx, d.CID)
		if err != nil || show.Local || len(show.Holders) != 1 || show.Holders[0] != n0.ID().String() {
			return fmt.Sprintf("show on n1: %+v, %v; want held by n0 only", show, err)
		}
		return ""
	})
	out := filepath.Join(t.TempDir(), "out")
	if _, err := n1.ds.GetDataset(ctx, "set", api.DatasetGet{Out: out}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(out, "sub", "big.bin"))
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("fetched big.bin differs (%v)", err)
	}
	if ds, _ := n1.ds.Dataset(ctx, "set"); !ds.Local {
		t.Fatalf("n1 does not hold set after get: %+v", ds)
	}
	// A CAR written on n1 and imported on n2 is the same DAG.
	car := filepath.Join(t.TempDir(), "set.car")
	if _, err := n1.ds.ExportDataset(ctx, "set", api.DatasetExport{Car: car}); err != nil {
		t.Fatal(err)
	}
	n2 := m.nodes[2].Node
	if _, err := n2.ds.ImportDataset(ctx, api.DatasetImport{Path: car}); statusCode(err) != http.StatusConflict {
		t.Fatalf("import under a taken name: %v", err)
	}
	imp, err := n2.ds.ImportDataset(ctx, api.DatasetImport{Path: car, Name: "set-copy"})
	if err != nil || imp.CID != d.CID || imp.Size != d.Size || imp.Blocks != d.Blocks {
		t.Fatalf("import: %+v, %v; want the CID, size and blocks of %+v", imp, err, d)
	}
	if _, err := n2.ds.RemoveDataset(ctx, "set-copy"); err != nil {
		t.Fatal(err)
	}
	if _, err := n0.ds.RemoveDataset(ctx, "set"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "n1 drops the blocks of set", func() string {
		if n1.ds.Local(ctx, d.CID) {
			return "n1 still holds set"
		}
		return ""
	})
}

// A job that mounts a dataset runs its items only on machines that hold it,
// materialised and mounted read-only; the submitter need not hold it.
func TestDatasetJobMount(t *testing.T) {
	// Data dirs given relative (a user's `--data-dir a`): a mount's source
	// must still be absolute ("mounts[0].source: \"a/datasets/…\" is not an
	// absolute path" failed every item).
	m := newMesh(t, meshConfig{n: 2, interval: 200 * time.Millisecond, slots: 2, runFor: 150 * time.Millisecond, onePerson: true, relDirs: true})
	m.formOrg()
	ctx := ctxT(t)
	n0, n1 := m.nodes[0].Node, m.nodes[1].Node
	src := filepath.Join(t.TempDir(), "set")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "x.txt"), []byte("payload"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := n0.ds.AddDataset(ctx, api.DatasetAdd{Path: src, Name: "set"})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "n1 knows set", func() string {
		if _, _, err := n1.ds.Resolve("set"); err != nil {
			return err.Error()
		}
		return ""
	})
	for _, bad := range []string{"set:data", "nope:/data", "set"} {
		if _, err := n1.jobs.SubmitJob(ctx, api.JobSubmit{Cmd: []string{"true"}, Datasets: []string{bad}}); statusCode(err)/100 != 4 {
			t.Errorf("--dataset %q: %v, want a 4xx", bad, err)
		}
	}
	rs, re := int64(1), int64(16)
	j := submit(t, n1, api.JobSubmit{Cmd: []string{"true"}, RangeStart: &rs, RangeEnd: &re, CPUs: 4, Datasets: []string{"set:/data"}})
	if len(j.Datasets) != 1 || j.Datasets[0].CID != d.CID || j.Datasets[0].Path != "/data" {
		t.Fatalf("job datasets %+v", j.Datasets)
	}
	eventually(t, 30*time.Second, "n0 knows the job", func() string {
		if _, err := jobOf(n0, j.ID); err != nil {
			return err.Error()
		}
		return ""
	})
	m.waitJobDone(60*time.Second, j.ID)
	runs, on := 0, map[string]bool{}
	for _, r := range m.runs.all() {
		if r.Job != j.ID {
			continue
		}
		runs++
		on[r.Machine] = true
		if len(r.Mounts) != 1 || !r.Mounts[0].ReadOnly || r.Mounts[0].Target != "/data" || r.Env["CSHARE_DATASET_0"] != "/data" {
			t.Fatalf("run on %s: mounts %+v env %v", r.Machine, r.Mounts, r.Env)
		}
		b, err := os.ReadFile(filepath.Join(r.Mounts[0].Source, "x.txt"))
		if err != nil || string(b) != "payload" {
			t.Fatalf("run on %s: mounted tree holds %q (%v)", r.Machine, b, err)
		}
		if err := os.WriteFile(filepath.Join(r.Mounts[0].Source, "new"), nil, 0o644); err == nil && os.Geteuid() != 0 {
			t.Fatalf("the materialised tree is writable")
		}
	}
	if runs < 16 {
		t.Fatalf("%d runs of 16 items", runs)
	}
	// Every machine that ran an item holds every block (n1 fetched them).
	for _, mn := range m.nodes {
		if on[mn.ID().String()] && !mn.ds.Local(ctx, d.CID) {
			t.Fatalf("%s ran items without holding the dataset", mn.name)
		}
	}
}

// An add interrupted half way (here: a named pipe after a file in the
// directory) records nothing but keeps its blocks pinned: they survive a
// node restart and the collector, which takes unpinned strays and pins over
// a day old, and the rerun reuses them; its entry then drops the pins.
func TestDatasetAddInterruptedReusedAfterRestart(t *testing.T) {
	m := newMesh(t, meshConfig{n: 1, interval: 200 * time.Millisecond})
	m.formOrg()
	ctx := ctxT(t)
	n := m.nodes[0].Node

	src := filepath.Join(t.TempDir(), "set")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 3*dataset.ChunkSize+10)
	_, _ = rand.Read(big)
	if err := os.WriteFile(filepath.Join(src, "a.bin"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	pipe := filepath.Join(src, "b")
	if err := syscall.Mkfifo(pipe, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := n.ds.AddDataset(ctx, api.DatasetAdd{Path: src, Name: "set"}); statusCode(err) != http.StatusBadRequest {
		t.Fatalf("add over a named pipe: %v, want 400", err)
	}
	n.rep.View(func(st *ledger.State) {
		if len(st.Datasets) != 0 {
			t.Errorf("the interrupted add recorded %d datasets", len(st.Datasets))
		}
	})
	stored := func(n *Node) map[cid.Cid]bool {
		out := map[cid.Cid]bool{}
		if err := n.store.ForEachDataCID(func(c cid.Cid) error { out[c] = true; return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	half := stored(n)
	if len(half) != 5 { // a.bin: 4 leaves and their parent
		t.Fatalf("the interrupted add stored %d blocks, want 5", len(half))
	}

	m.stop(0)
	n = m.restart(0)
	// A stray block nobody pinned and one pinned by an import over a day
	// ago: the collector takes both.
	stray := []byte("stray")
	old := []byte("old")
	for _, b := range []struct {
		data []byte
		pin  *store.Pin
	}{{stray, nil}, {old, &store.Pin{ID: "old", At: time.Now().Add(-25 * time.Hour)}}} {
		c, _ := cid.V1Builder{Codec: cid.Raw, MhType: multihash.SHA2_256}.Sum(b.data)
		if _, err := n.store.PutDataBlocks([]store.Block{{CID: c, Data: b.data}}, b.pin); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.ds.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	if after := stored(n); !maps.Equal(after, half) {
		t.Fatalf("after a restart and a collection %d blocks are stored, want the %d of the interrupted add", len(after), len(half))
	}

	if err := os.Remove(pipe); err != nil {
		t.Fatal(err)
	}
	d, err := n.ds.AddDataset(ctx, api.DatasetAdd{Path: src, Name: "set"})
	if err != nil {
		t.Fatal(err)
	}
	all := stored(n)
	for c := range half {
		if !all[c] {
			t.Errorf("block %s of the interrupted add is gone", c)
		}
	}
	if len(all) != int(d.Blocks) {
		t.Errorf("%d blocks stored, the dataset has %d", len(all), d.Blocks)
	}
	if err := n.ds.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	pins := 0
	if err := n.store.ForEachDataPin(func(store.Pin, cid.Cid) error { pins++; return nil }); err != nil {
		t.Fatal(err)
	}
	if pins != 0 {
		t.Errorf("%d pins left after the add's entry and a collection", pins)
	}
}

// A machine's running dataset fetches travel in its heartbeat, so the
// reason "fetching dataset N (x of y MB)" shows on every machine, not only
// on the one fetching: here n1 holds a (made up) fetch half done, and n0's
// job show, on a job no machine fits, names it; when it ends the reason
// goes.
func TestDatasetFetchReasonOnOtherMachines(t *testing.T) {
	m := newMesh(t, meshConfig{n: 2, interval: 200 * time.Millisecond, onePerson: true})
	m.formOrg()
	ctx := ctxT(t)
	n0, n1 := m.nodes[0].Node, m.nodes[1].Node
	src := filepath.Join(t.TempDir(), "set")
	if err := os.WriteFile(src, bytes.Repeat([]byte("x"), 3_000_000), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := n0.ds.AddDataset(ctx, api.DatasetAdd{Path: src, Name: "set"})
	if err != nil {
		t.Fatal(err)
	}
	end := n1.ds.HoldFetch(d.CID, "set", d.Size, 6, 12)
	js, err := n0.jobs.SubmitJob(ctx, api.JobSubmit{Cmd: []string{"true"}, GPUs: 1, Datasets: []string{"set:/data"}})
	if err != nil {
		t.Fatal(err)
	}
	const want = "fetching dataset set (1.5 of 3.0 MB)"
	eventually(t, 20*time.Second, "n0 shows n1's fetch", func() string {
		if j, err := n0.jobs.Job(ctx, js.ID); err != nil || j.Reason != want {
			return fmt.Sprintf("reason %q, %v; want %q", j.Reason, err, want)
		}
		return ""
	})
	end()
	eventually(t, 20*time.Second, "the reason goes with the fetch", func() string {
		if j, err := n0.jobs.Job(ctx, js.ID); err != nil || strings.HasPrefix(j.Reason, "fetching") {
			return fmt.Sprintf("reason %q, %v", j.Reason, err)
		}
		return ""
	})
}

// storeDAG stores hand-made blocks on n, as an import from before imports
// checked (or another program) would have left them, and records them as
// the dataset name: the ledger then holds a dataset that cannot be written
// out.
func storeDAG(t *testing.T, n *Node, name string, nodes ...ipld.Node) string {
	t.Helper()
	var bs []store.Block
	for _, nd := range nodes {
		bs = append(bs, store.Block{CID: nd.Cid(), Data: nd.RawData()})
	}
	if _, err := n.store.PutDataBlocks(bs, nil); err != nil {
		t.Fatal(err)
	}
	root := nodes[len(nodes)-1].Cid().String()
	p := ledger.DatasetAdd{Name: name, CID: root, Size: 4, Blocks: int64(len(nodes)), Access: ledger.AccessOrg}
	if _, err := n.rep.Write(ctxT(t), ledger.KindDatasetAdd, p); err != nil {
		t.Fatal(err)
	}
	return root
}

// badDir is a directory (CIDv1) of the entries (name, node, ...).
func badDir(t *testing.T, entries ...any) ipld.Node {
	t.Helper()
	nd := merkledag.NodeWithData(unixfs.FolderPBData())
	for i := 0; i < len(entries); i += 2 {
		if err := nd.AddNodeLink(entries[i].(string), entries[i+1].(ipld.Node)); err != nil {
			t.Fatal(err)
		}
	}
	if err := nd.SetCidBuilder(cid.V1Builder{Codec: cid.DagProtobuf, MhType: multihash.SHA2_256}); err != nil {
		t.Fatal(err)
	}
	return nd
}

// A job mounting a dataset that cannot be written out (an entry named
// ../../x, two entries of one name) fails its items with the reason in
// job show, rather than staying queued for good; `dataset get` of it is
// refused, naming the entry, and leaves no --out behind.
func TestDatasetJobUnmountableFails(t *testing.T) {
	m := newMesh(t, meshConfig{n: 1, interval: 200 * time.Millisecond, slots: 2, runFor: 50 * time.Millisecond, onePerson: true})
	m.formOrg()
	ctx := ctxT(t)
	n := m.nodes[0].Node
	leaf := merkledag.NewRawNode([]byte("evil"))
	for _, c := range []struct {
		name string
		root ipld.Node
		want string
	}{
		{"dotdot", badDir(t, "../../x", leaf), `entry "../../x" has a name holding "/"`},
		{"twice", badDir(t, "x", leaf, "x", leaf), `entry "x" appears twice in its directory`},
	} {
		storeDAG(t, n, c.name, leaf, c.root)
		rs, re := int64(1), int64(3)
		j := submit(t, n, api.JobSubmit{Cmd: []string{"true"}, RangeStart: &rs, RangeEnd: &re, Datasets: []string{c.name + ":/data"}})
		eventually(t, 60*time.Second, "job "+c.name+" fails", func() string {
			ji, err := n.jobs.Job(ctx, j.ID)
			if err != nil || ji.State != ledger.JobFailed {
				return fmt.Sprintf("%s: %+v, %v", c.name, ji, err)
			}
			if !strings.Contains(ji.Error, "dataset \""+c.name+"\" cannot be mounted: "+c.want) {
				return fmt.Sprintf("job show says error %q, reason %q; want the dataset's fault", ji.Error, ji.Reason)
			}
			return ""
		})
		out := filepath.Join(t.TempDir(), "out")
		_, err := n.ds.GetDataset(ctx, c.name, api.DatasetGet{Out: out})
		oneLine(t, "get "+c.name, err, http.StatusUnprocessableEntity, c.want)
		if _, err := os.Lstat(out); !os.IsNotExist(err) {
			t.Fatalf("a failed get left %s (%v)", out, err)
		}
	}
	for _, r := range m.runs.all() {
		t.Errorf("an item ran with an unmountable dataset: %+v", r)
	}
	// Nothing was written outside the materialised trees.
	if _, err := os.Lstat(filepath.Join(n.opts.DataDir, "x")); !os.IsNotExist(err) {
		t.Errorf("../../x was written beside the datasets: %v", err)
	}
}

// `dataset import` of a named pipe is refused at once (it hung for good,
// a thread blocked in the node per try), and so is anything but a regular
// file; a CAR whose sizes lie (a file claiming 2^62 bytes over a 6-byte
// leaf imported as a 4 EiB dataset) is refused naming the entry, and
// records nothing.
func TestDatasetImportRefusesPipesAndLies(t *testing.T) {
	m := newMesh(t, meshConfig{n: 1, interval: 200 * time.Millisecond})
	m.formOrg()
	ctx := ctxT(t)
	n := m.nodes[0].Node
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe.car")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := n.ds.ImportDataset(ctx, api.DatasetImport{Path: fifo})
		done <- err
	}()
	select {
	case err := <-done:
		oneLine(t, "import of a named pipe", err, http.StatusBadRequest, "is a named pipe; allowed: a regular file")
	case <-time.After(30 * time.Second):
		if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil { // let the node's thread go
			w.Close()
		}
		t.Fatal("dataset import of a named pipe blocked")
	}
	_, err := n.ds.ImportDataset(ctx, api.DatasetImport{Path: dir, Name: "d"})
	oneLine(t, "import of a directory", err, http.StatusBadRequest, "is a directory")

	// A file node claiming 2^62 bytes over one 6-byte leaf, under "big".
	leaf := merkledag.NewRawNode([]byte("hello\n"))
	fsn := unixfs.NewFSNode(unixfs.TFile)
	fsn.AddBlockSize(1 << 62)
	data, _ := fsn.GetBytes()
	file := merkledag.NodeWithData(data)
	if err := file.AddNodeLink("", leaf); err != nil {
		t.Fatal(err)
	}
	if err := file.SetCidBuilder(cid.V1Builder{Codec: cid.DagProtobuf, MhType: multihash.SHA2_256}); err != nil {
		t.Fatal(err)
	}
	root := badDir(t, "big", file)
	var car bytes.Buffer
	w, err := storage.NewWritable(&car, []cid.Cid{root.Cid()}, carv2.WriteAsCarV1(true))
	if err != nil {
		t.Fatal(err)
	}
	for _, nd := range []ipld.Node{root, file, leaf} {
		if err := w.Put(ctx, nd.Cid().KeyString(), nd.RawData()); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finalize(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "lies.car")
	if err := os.WriteFile(path, car.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = n.ds.ImportDataset(ctx, api.DatasetImport{Path: path})
	oneLine(t, "import of a lying CAR", err, http.StatusBadRequest, `entry "big" has block`, "says its link 0 holds 4611686018427387904 bytes; it holds 6")
	n.rep.View(func(st *ledger.State) {
		if len(st.Datasets) != 0 {
			t.Errorf("refused imports recorded %d datasets", len(st.Datasets))
		}
	})
}

// A dataset the asker may not read is not named to them by any route: by
// CID, show, get, export, rm and a job's mount say "no such dataset", as
// job show of another's job says "no such job"; a CID shared with a
// readable dataset resolves to that one alone (it was refused as "the root
// of datasets guess, osecret").
func TestDatasetPrivateNeverNamed(t *testing.T) {
	m := newMesh(t, meshConfig{n: 2, interval: 200 * time.Millisecond})
	m.formOrg()
	ctx := ctxT(t)
	n0, n1 := m.nodes[0].Node, m.nodes[1].Node
	dir := t.TempDir()
	shared, solo := filepath.Join(dir, "shared"), filepath.Join(dir, "solo")
	if err := os.WriteFile(shared, []byte("shared bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(solo, []byte("solo bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	guess, err := n0.ds.AddDataset(ctx, api.DatasetAdd{Path: shared, Name: "guess"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n0.ds.AddDataset(ctx, api.DatasetAdd{Path: shared, Name: "osecret", Private: true}); err != nil {
		t.Fatal(err)
	}
	priv, err := n0.ds.AddDataset(ctx, api.DatasetAdd{Path: solo, Name: "hushhush", Private: true})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "n1 knows the datasets", func() string {
		k := 0
		n1.rep.View(func(st *ledger.State) { k = len(st.Datasets) })
		if k != 3 {
			return fmt.Sprintf("n1 knows %d datasets", k)
		}
		return ""
	})
	// The shared CID is guess's, for n1.
	if d, err := n1.ds.Dataset(ctx, guess.CID); err != nil || d.Name != "guess" {
		t.Fatalf("n1's show of the shared CID: %+v, %v; want guess", d, err)
	}
	// The owner still sees both names for it.
	if _, err := n0.ds.Dataset(ctx, guess.CID); statusCode(err) != http.StatusConflict || !strings.Contains(err.Error(), "osecret") {
		t.Fatalf("n0's show of the shared CID: %v; want a conflict naming both", err)
	}
	tmp := t.TempDir()
	for _, ref := range []string{priv.CID, "hushhush", "osecret"} {
		check := func(what string, err error) {
			t.Helper()
			oneLine(t, what+" "+ref, err, http.StatusNotFound, "no such dataset")
			for _, secret := range []string{"hushhush", "osecret"} {
				if secret != ref && strings.Contains(err.Error(), secret) {
					t.Fatalf("%s %s names %s: %v", what, ref, secret, err)
				}
			}
		}
		_, err := n1.ds.Dataset(ctx, ref)
		check("show", err)
		_, err = n1.ds.GetDataset(ctx, ref, api.DatasetGet{Out: filepath.Join(tmp, "get")})
		check("get", err)
		_, err = n1.ds.ExportDataset(ctx, ref, api.DatasetExport{Car: filepath.Join(tmp, "x.car")})
		check("export", err)
		_, err = n1.ds.RemoveDataset(ctx, ref)
		check("rm", err)
		_, err = n1.jobs.SubmitJob(ctx, api.JobSubmit{Cmd: []string{"true"}, Datasets: []string{ref + ":/data"}})
		check("job submit --dataset", err)
	}
}
