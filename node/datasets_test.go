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

	"github.com/ipfs/go-cid"
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
		if _, err := n0.AddDataset(ctx, c.req); statusCode(err) != c.code {
			t.Errorf("add %+v: %v, want %d", c.req, err, c.code)
		}
	}

	d, err := n0.AddDataset(ctx, api.DatasetAdd{Path: src, Name: "set"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n0.AddDataset(ctx, api.DatasetAdd{Path: src, Name: "set"}); statusCode(err) != http.StatusConflict {
		t.Fatalf("taken name: %v", err)
	}
	priv, err := n0.AddDataset(ctx, api.DatasetAdd{Path: filepath.Join(src, "a.txt"), Name: "mine", Private: true})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "n1 sees the datasets", func() string {
		k := 0
		n1.snapshot(func(st *ledger.State) { k = len(st.Datasets) })
		if k != 2 {
			return fmt.Sprintf("n1 knows %d datasets", k)
		}
		if ds, _ := n1.Datasets(ctx); len(ds) != 1 || ds[0].Name != "set" {
			return "n1 lists the wrong datasets"
		}
		return ""
	})
	if _, err := n1.Dataset(ctx, priv.CID); statusCode(err) != http.StatusForbidden {
		t.Fatalf("n1 reads the private dataset: %v", err)
	}
	if _, err := n1.GetDataset(ctx, "mine", api.DatasetGet{Out: filepath.Join(t.TempDir(), "x")}); statusCode(err) != http.StatusForbidden {
		t.Fatalf("n1 gets the private dataset: %v", err)
	}
	if _, err := n1.RemoveDataset(ctx, "set"); statusCode(err) != http.StatusForbidden {
		t.Fatalf("n1 removes n0's dataset: %v", err)
	}
	// Holders are the online machines that hold it (liveness is heartbeats:
	// polled).
	eventually(t, 30*time.Second, "n1 shows set held by n0", func() string {
		show, err := n1.Dataset(ctx, d.CID)
		if err != nil || show.Local || len(show.Holders) != 1 || show.Holders[0] != n0.ID().String() {
			return fmt.Sprintf("show on n1: %+v, %v; want held by n0 only", show, err)
		}
		return ""
	})
	out := filepath.Join(t.TempDir(), "out")
	if _, err := n1.GetDataset(ctx, "set", api.DatasetGet{Out: out}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(out, "sub", "big.bin"))
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("fetched big.bin differs (%v)", err)
	}
	if ds, _ := n1.Datasets(ctx); len(ds) != 1 || !ds[0].Local {
		t.Fatalf("n1 does not hold set after get: %+v", ds)
	}
	// A CAR written on n1 and imported on n2 is the same DAG.
	car := filepath.Join(t.TempDir(), "set.car")
	if _, err := n1.ExportDataset(ctx, "set", api.DatasetExport{Car: car}); err != nil {
		t.Fatal(err)
	}
	n2 := m.nodes[2].Node
	if _, err := n2.ImportDataset(ctx, api.DatasetImport{Path: car}); statusCode(err) != http.StatusConflict {
		t.Fatalf("import under a taken name: %v", err)
	}
	imp, err := n2.ImportDataset(ctx, api.DatasetImport{Path: car, Name: "set-copy"})
	if err != nil || imp.CID != d.CID || imp.Size != d.Size || imp.Blocks != d.Blocks {
		t.Fatalf("import: %+v, %v; want the CID, size and blocks of %+v", imp, err, d)
	}
	if _, err := n2.RemoveDataset(ctx, "set-copy"); err != nil {
		t.Fatal(err)
	}
	if _, err := n0.RemoveDataset(ctx, "set"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "n1 drops the blocks of set", func() string {
		if n1.datasetLocal(ctx, d.CID) {
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
	d, err := n0.AddDataset(ctx, api.DatasetAdd{Path: src, Name: "set"})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "n1 knows set", func() string {
		if _, _, err := n1.resolveDataset("set"); err != nil {
			return err.Error()
		}
		return ""
	})
	for _, bad := range []string{"set:data", "nope:/data", "set"} {
		if _, err := n1.SubmitJob(ctx, api.JobSubmit{Cmd: []string{"true"}, Datasets: []string{bad}}); statusCode(err)/100 != 4 {
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
		if on[mn.ID().String()] && !mn.datasetLocal(ctx, d.CID) {
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
	if _, err := n.AddDataset(ctx, api.DatasetAdd{Path: src, Name: "set"}); statusCode(err) != http.StatusBadRequest {
		t.Fatalf("add over a named pipe: %v, want 400", err)
	}
	n.snapshot(func(st *ledger.State) {
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
	if err := n.collectDatasets(ctx); err != nil {
		t.Fatal(err)
	}
	if after := stored(n); !maps.Equal(after, half) {
		t.Fatalf("after a restart and a collection %d blocks are stored, want the %d of the interrupted add", len(after), len(half))
	}

	if err := os.Remove(pipe); err != nil {
		t.Fatal(err)
	}
	d, err := n.AddDataset(ctx, api.DatasetAdd{Path: src, Name: "set"})
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
	if err := n.collectDatasets(ctx); err != nil {
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
	d, err := n0.AddDataset(ctx, api.DatasetAdd{Path: src, Name: "set"})
	if err != nil {
		t.Fatal(err)
	}
	f := &fetch{name: "set", size: d.Size, have: 6, known: 12, done: make(chan struct{})}
	n1.jf.mu.Lock()
	n1.jf.of = map[string]*fetch{d.CID: f}
	n1.jf.mu.Unlock()
	js, err := n0.SubmitJob(ctx, api.JobSubmit{Cmd: []string{"true"}, GPUs: 1, Datasets: []string{"set:/data"}})
	if err != nil {
		t.Fatal(err)
	}
	const want = "fetching dataset set (1.5 of 3.0 MB)"
	eventually(t, 20*time.Second, "n0 shows n1's fetch", func() string {
		if j, err := n0.Job(ctx, js.ID); err != nil || j.Reason != want {
			return fmt.Sprintf("reason %q, %v; want %q", j.Reason, err, want)
		}
		return ""
	})
	close(f.done)
	eventually(t, 20*time.Second, "the reason goes with the fetch", func() string {
		if j, err := n0.Job(ctx, js.ID); err != nil || strings.HasPrefix(j.Reason, "fetching") {
			return fmt.Sprintf("reason %q, %v", j.Reason, err)
		}
		return ""
	})
}
