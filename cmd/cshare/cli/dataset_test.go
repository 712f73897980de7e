package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cshare/cshare/node/api"
)

const dsCID = "bafybeihpifpwnap6bllkyu2nuyapapp2qdu3om5gskksj4qmvon5zrjd6u"

func (f *fakeNode) AddDataset(_ context.Context, req api.DatasetAdd) (api.DatasetInfo, error) {
	if err := f.call("dataset add"); err != nil {
		return api.DatasetInfo{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dsAdd = &req
	name := req.Name
	if name == "" {
		name = filepath.Base(req.Path)
	}
	for _, d := range f.datasets {
		if d.Name == name {
			return api.DatasetInfo{}, api.FieldErrorf(http.StatusConflict, "name", "name: dataset %q exists; allowed: a name no dataset has (--name)", name)
		}
	}
	access := "org"
	if req.Private {
		access = "private"
	}
	d := api.DatasetInfo{Name: name, CID: dsCID, Size: 1234, Blocks: 7, Access: access, Owner: ownerID, OwnerName: "alice",
		Added: api.FormatTime(testNow), Local: true}
	f.datasets = append(f.datasets, d)
	return d, nil
}

func (f *fakeNode) DatasetProgress(context.Context, string) (api.DatasetProgress, error) {
	return api.DatasetProgress{}, f.call("dataset progress")
}

func (f *fakeNode) Datasets(context.Context) ([]api.DatasetInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]api.DatasetInfo(nil), f.datasets...), f.fail
}

func (f *fakeNode) Dataset(_ context.Context, ref string) (api.DatasetInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, d := range f.datasets {
		if d.Name == ref || d.CID == ref {
			d.Holders = []string{m1ID}
			return d, f.fail
		}
	}
	return api.DatasetInfo{}, api.Errorf(http.StatusNotFound, "dataset: no dataset is named or has the CID %q", ref)
}

func (f *fakeNode) RemoveDataset(ctx context.Context, ref string) (api.DatasetInfo, error) {
	d, err := f.Dataset(ctx, ref)
	if err != nil {
		return d, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var keep []api.DatasetInfo
	for _, x := range f.datasets {
		if x.Name != d.Name {
			keep = append(keep, x)
		}
	}
	f.datasets = keep
	return d, nil
}

func (f *fakeNode) SetDatasetAccess(ctx context.Context, ref string, req api.DatasetAccessRequest) (api.DatasetInfo, error) {
	d, err := f.Dataset(ctx, ref)
	if err != nil {
		return d, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.datasets {
		if f.datasets[i].Name == d.Name {
			f.datasets[i].Access = req.Access
		}
	}
	d.Access = req.Access
	return d, nil
}

func (f *fakeNode) GetDataset(ctx context.Context, ref string, req api.DatasetGet) (api.DatasetInfo, error) {
	d, err := f.Dataset(ctx, ref)
	if err != nil {
		return d, err
	}
	f.mu.Lock()
	f.dsGet = &req
	f.mu.Unlock()
	d.Relayed = []string{m2ID} // held by a machine reached through a relay
	return d, nil
}

func TestDatasetCLI(t *testing.T) {
	n := startNode(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "data.bin"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)

	r := n.run("dataset", "add", "data.bin", "--private")
	if r.code != 0 || r.lastLine() != dsCID {
		t.Fatalf("add: %+v", r)
	}
	if got := n.dsAdd.Path; got != filepath.Join(dir, "data.bin") || !n.dsAdd.Private || n.dsAdd.Progress != "" {
		t.Fatalf("add sent %+v: want the absolute path, private, no progress off a terminal", n.dsAdd)
	}
	r = n.run("dataset", "add", "data.bin", "--name", "second", "--json")
	var out map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || r.code != 0 {
		t.Fatalf("add --json: %+v (%v)", r, err)
	}
	if len(out) != 4 || out["cid"] != dsCID || out["name"] != "second" || out["size"] != float64(1234) || out["blocks"] != float64(7) {
		t.Fatalf(`add --json printed %s, want exactly {"cid","name","size","blocks"}`, r.stdout)
	}
	r = n.run("dataset", "add", "data.bin")
	if r.code == 0 || !strings.Contains(r.stderr, "exists") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Fatalf("taken name: %+v", r)
	}
	r = n.run("dataset", "ls")
	if r.code != 0 || !strings.Contains(r.stdout, "second") || !strings.Contains(r.stdout, "private") {
		t.Fatalf("ls: %+v", r)
	}
	r = n.run("dataset", "ls", "--json")
	var ls []api.DatasetInfo
	if err := json.Unmarshal([]byte(r.stdout), &ls); err != nil || len(ls) != 2 {
		t.Fatalf("ls --json: %+v (%v)", r, err)
	}
	r = n.run("dataset", "show", "second")
	if r.code != 0 || !strings.Contains(r.stdout, "held by") || !strings.Contains(r.stdout, m1ID) {
		t.Fatalf("show: %+v", r)
	}
	r = n.run("dataset", "access", "second", "everyone")
	if r.code != 2 || !strings.Contains(r.stderr, "access: ") {
		t.Fatalf("access everyone: %+v", r)
	}
	r = n.run("dataset", "access", "second", "org")
	if r.code != 0 || !strings.Contains(r.stdout, "is now org: every member") {
		t.Fatalf("access org: %+v", r)
	}
	var shared api.DatasetInfo
	if r = n.run("dataset", "access", "second", "private", "--json"); json.Unmarshal([]byte(r.stdout), &shared) != nil || shared.Access != "private" {
		t.Fatalf("access private --json: %+v", r)
	}
	r = n.run("dataset", "get", "second")
	if r.code != 2 || !strings.Contains(r.stderr, "--out") {
		t.Fatalf("get without --out: %+v", r)
	}
	r = n.run("dataset", "get", "second", "--out", "copy")
	if r.code != 0 || n.dsGet.Out != filepath.Join(dir, "copy") {
		t.Fatalf("get: %+v, sent %+v", r, n.dsGet)
	}
	if want := "fetched partly through a relay: no direct connection yet to " + short(m2ID); !strings.Contains(r.stdout, want) {
		t.Fatalf("get: %q, want it to say %q", r.stdout, want)
	}
	r = n.run("dataset", "rm", "second")
	if r.code != 0 || !strings.Contains(r.stdout, "removed dataset") {
		t.Fatalf("rm: %+v", r)
	}
	r = n.run("dataset", "show", "second")
	if r.code != 1 || !strings.Contains(r.stderr, "no dataset") {
		t.Fatalf("show removed: %+v", r)
	}
}

func TestProgressBar(t *testing.T) {
	for _, c := range []struct {
		done, total int64
		want        string
	}{
		{0, 100, "[>                             ]   0%"},
		{50, 100, "[===============>              ]  50%"},
		{100, 100, "[==============================] 100%"},
		{5, 0, "[==============================] 100%"},
	} {
		if got := progressBar(c.done, c.total); !strings.HasPrefix(got, c.want) {
			t.Errorf("progressBar(%d, %d) = %q, want prefix %q", c.done, c.total, got, c.want)
		}
	}
}

func TestJobSubmitDataset(t *testing.T) {
	n := startNode(t)
	r := n.run("job", "submit", "--dataset", "imagenet:/data", "--dataset", dsCID+":/big", "--", "true")
	if r.code != 0 {
		t.Fatalf("submit: %+v", r)
	}
	if got := n.submit.Datasets; len(got) != 2 || got[0] != "imagenet:/data" || got[1] != dsCID+":/big" {
		t.Fatalf("sent datasets %v", got)
	}
	r = n.run("job", "submit", "--dataset", "imagenet:data", "--", "true")
	if r.code != 2 || !strings.Contains(r.stderr, "--dataset") {
		t.Fatalf("relative mount path: %+v", r)
	}
}

// importHeld, when not nil, makes the fake's dataset import say so on it
// and then wait for its request to end (a node blocked on the import).
var importHeld atomic.Pointer[chan struct{}]

func (f *fakeNode) ImportDataset(ctx context.Context, req api.DatasetImport) (api.DatasetInfo, error) {
	if held := importHeld.Swap(nil); held != nil {
		close(*held)
		<-ctx.Done()
		return api.DatasetInfo{}, ctx.Err()
	}
	return f.AddDataset(ctx, api.DatasetAdd{Path: req.Path, Name: req.Name, Private: req.Private})
}

// TestInterruptedIsNotNoNode: Ctrl-C while the node works on a request
// (here a dataset import it is blocked on) says the command was
// interrupted, not "no node running" (which it said, with the node up).
func TestInterruptedIsNotNoNode(t *testing.T) {
	n := startNode(t)
	dir := t.TempDir()
	car := filepath.Join(dir, "set.car")
	writeFile(t, car, "not really a CAR")
	held := make(chan struct{})
	importHeld.Store(&held)
	defer importHeld.Store(nil)
	go func() {
		<-held
		// The CLI is inside its request, its signal handler set: this
		// SIGINT is its Ctrl-C, not the test binary's death.
		_ = syscall.Kill(os.Getpid(), syscall.SIGINT)
	}()
	r := n.run("dataset", "import", car)
	oneErrorLine(t, r, 1, "interrupted before the node answered")
	if strings.Contains(r.stderr, "no node") {
		t.Fatalf("an interrupted command blamed the node: %q", r.stderr)
	}
}

// TestDatasetImportNotRegular: dataset import of a named pipe or a
// directory is refused at once, naming FILE.car, and never reaches the
// node (whose open of a pipe used to hang).
func TestDatasetImportNotRegular(t *testing.T) {
	n := startNode(t)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe.car")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip("no named pipes here:", err)
	}
	oneErrorLine(t, n.run("dataset", "import", fifo), 2, "FILE.car", "is a named pipe; allowed: a regular file")
	oneErrorLine(t, n.run("dataset", "import", dir), 2, "FILE.car", "is a directory")
	if calls := n.called(); len(calls) != 0 {
		t.Fatalf("the node was asked: %v", calls)
	}
}

func (f *fakeNode) ExportDataset(ctx context.Context, ref string, req api.DatasetExport) (api.DatasetInfo, error) {
	f.mu.Lock()
	f.dsGet = &api.DatasetGet{Out: req.Car}
	f.mu.Unlock()
	return f.Dataset(ctx, ref)
}

func TestDatasetCARCLI(t *testing.T) {
	n := startNode(t)
	dir := t.TempDir()
	t.Chdir(dir)
	r := n.run("dataset", "import", "set.car", "--name", "set")
	if r.code != 0 || r.lastLine() != dsCID || n.dsAdd.Path != filepath.Join(dir, "set.car") {
		t.Fatalf("import: %+v, sent %+v", r, n.dsAdd)
	}
	r = n.run("dataset", "export", "set")
	if r.code != 2 || !strings.Contains(r.stderr, "--car") {
		t.Fatalf("export without --car: %+v", r)
	}
	r = n.run("dataset", "export", "set", "--car", "out.car")
	if r.code != 0 || n.dsGet.Out != filepath.Join(dir, "out.car") {
		t.Fatalf("export: %+v, sent %+v", r, n.dsGet)
	}
}
