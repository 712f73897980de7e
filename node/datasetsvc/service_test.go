package datasetsvc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/p2p"
)

// A --dataset value without ":/path", or with a bad path, is a field error
// on "datasets" before any dataset is looked up.
func TestResolveMountsBadValues(t *testing.T) {
	s := New(context.Background(), Deps{})
	for _, v := range []string{"set", ":/data", "set:/", "set:/a/../b"} {
		_, err := s.ResolveMounts([]string{v})
		var se *api.StatusError
		if !errors.As(err, &se) || se.Field != "datasets" {
			t.Errorf("ResolveMounts(%q) = %v, want a field error on datasets", v, err)
		}
	}
	if m, err := s.ResolveMounts(nil); err != nil || m != nil {
		t.Errorf("no values: %v, %v", m, err)
	}
}

// A fetch in progress is in the heartbeat's report, scaled to the
// dataset's size, until it ends.
func TestFetchReport(t *testing.T) {
	s := New(context.Background(), Deps{})
	end := s.HoldFetch("bafyb", "b", 3_000_000, 6, 12)
	endA := s.HoldFetch("bafya", "a", 100, 0, 0)
	got := s.FetchReport()
	want := []p2p.DatasetFetch{{CID: "bafya", Have: 0, Size: 100}, {CID: "bafyb", Have: 1_500_000, Size: 3_000_000}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("report %v, want %v", got, want)
	}
	if r := fetchText("b", got[1]); r != "fetching dataset b (1.5 of 3.0 MB)" {
		t.Errorf("reason %q", r)
	}
	end()
	endA()
	if got := s.FetchReport(); len(got) != 0 {
		t.Errorf("ended fetches reported: %v", got)
	}
}

// readOnly takes the write bits off a tree; removeTree still removes it.
func TestReadOnlyTree(t *testing.T) {
	root := filepath.Join(t.TempDir(), "tree")
	if err := os.MkdirAll(filepath.Join(root, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "d", "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := readOnly(root); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{root, filepath.Join(root, "d"), filepath.Join(root, "d", "f")} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o222 != 0 {
			t.Errorf("%s is writable: %v", p, fi.Mode())
		}
	}
	if err := removeTree(root); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Errorf("the tree is still there: %v", err)
	}
}

// datasetsKey changes with a dataset's name, root or access.
func TestDatasetsKey(t *testing.T) {
	st := ledger.NewState()
	k0 := datasetsKey(st)
	st.Datasets = map[string]*ledger.Dataset{"a": {Name: "a", CID: "bafya", Access: ledger.AccessOrg}}
	k1 := datasetsKey(st)
	st.Datasets["a"].Access = ledger.AccessPrivate
	k2 := datasetsKey(st)
	if k0 == k1 || k1 == k2 {
		t.Errorf("keys %q %q %q", k0, k1, k2)
	}
}
