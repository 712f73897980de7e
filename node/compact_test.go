package node

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/replica"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/node/orgsvc"
	"github.com/cshare/cshare/runtime"
	"github.com/cshare/cshare/runtime/hw"
)

// TestLedgerCompactsItself (issue 29): in a 3-node org with a checkpoint
// every 100 entries, every node moves the entries below the newest
// barrier every online machine has passed to disk by itself (one barrier
// of lag kept) and all reach one state; a restarted node opens from its
// stored checkpoint, with the same state and only the entries after it;
// with ledger.retain set, the entries below a checkpoint older than it
// (checkpoint times, the clocks moved 2 h on) are pruned but the
// authority ones; the history exports and reads back; a fresh node joins
// from the checkpoint.
func TestLedgerCompactsItself(t *testing.T) {
	var skew atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	m := newMesh(t, meshConfig{n: 3, interval: 200 * time.Millisecond, fixPorts: true, now: now})
	key := m.formOrg()
	ctx := ctxT(t)
	n0 := m.nodes[0].Node
	if _, err := n0.orgs.SetSettings(ctx, api.SettingsRequest{Set: map[string]string{"ledger.checkpoint_every": "100", "ledger.retain": "1h"}}); err != nil {
		t.Fatal(err)
	}
	var first []*ledger.Entry
	round := func(k int) {
		t.Helper()
		_, top := n0.rep.Start()
		for i := range 110 {
			name := fmt.Sprintf("acme-%d-%d", k, i)
			e, err := n0.rep.Write(ctx, ledger.KindOrgUpdate, ledger.OrgUpdate{Name: &name})
			if err != nil {
				t.Fatal(err)
			}
			if k == 0 {
				first = append(first, e)
			}
		}
		eventually(t, 30*time.Second, "a new checkpoint", func() string {
			if _, t2 := n0.rep.Start(); t2 <= top {
				return fmt.Sprintf("top barrier %d", t2)
			}
			return ""
		})
	}
	round(0)
	round(1)
	skew.Store(int64(2 * time.Hour)) // every node's clock at once
	round(2)
	round(3)
	_, top := n0.rep.Start()
	eventually(t, 30*time.Second, "every node compacted to the barrier before the top", func() string {
		for _, mn := range m.nodes {
			if s, tp := mn.rep.Start(); s < top-1 || tp < top {
				return fmt.Sprintf("%s starts at barrier %d of %d, want %d of %d", mn.name, s, tp, top-1, top)
			}
		}
		return ""
	})
	hash := m.waitConverged(30 * time.Second)
	// Every checkpoint follows at least 100 entries after the one before,
	// so at least 300 sort below a start at depth 3 or more.
	st := n0.rep.Snapshot().State
	total := int(st.Applied + st.Ineffective)
	for _, mn := range m.nodes {
		if mn.rep.Len() > total-300 {
			t.Errorf("%s holds %d entries of %d in memory after compacting", mn.name, mn.rep.Len(), total)
		}
	}
	eventually(t, 30*time.Second, "the first round pruned on every node", func() string {
		for _, mn := range m.nodes {
			if mn.store.HasBlock(first[5].CID()) {
				return mn.name + " still has an entry of the first round"
			}
			if g, _ := cid.Decode(mn.rep.Org()); !mn.store.HasBlock(g) {
				t.Fatalf("%s pruned the genesis", mn.name)
			}
		}
		return ""
	})

	// A restarted node opens from its stored checkpoint.
	m.stop(2)
	n2 := m.restart(2)
	if s, _ := n2.rep.Start(); s == 0 || n2.rep.Len() > total-300 || stateHash(n2) != hash {
		t.Fatalf("restarted: starts at barrier %d with %d entries, same state %v", s, n2.rep.Len(), stateHash(n2) == hash)
	}
	m.waitConverged(30 * time.Second)

	// The history exports (org export-history) and reads back, every
	// signature checked.
	out := filepath.Join(t.TempDir(), "history.bin")
	h, err := orgsvc.HistoryOf(n0.orgs).ExportHistory(ctx, api.HistoryExport{Out: out})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := orgsvc.HistoryOf(n0.orgs).ExportHistory(ctx, api.HistoryExport{Out: out}); statusCode(err) != http.StatusConflict {
		t.Fatalf("an export over an existing file: %v", err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	read := 0
	if err := replica.ReadHistory(f, func(*ledger.Entry) error { read++; return nil }); err != nil || read != h.Entries || h.Entries < total/4 {
		t.Fatalf("export: wrote %d, read %d: %v", h.Entries, read, err)
	}

	// A fresh node joins from the checkpoint.
	nb, err := Start(context.Background(), Options{DataDir: t.TempDir(), API: "127.0.0.1:0", Listen: []string{"/ip4/127.0.0.1/tcp/0"}, DisableMDNS: true,
		HeartbeatInterval: 200 * time.Millisecond, Name: "fresh", NVML: hw.NoNVML{}, Driver: runtime.NewFake(), Now: now, Logger: testLogger("fresh")})
	if err != nil {
		t.Fatal(err)
	}
	defer nb.Close()
	if _, err := nb.orgs.Join(ctx, api.JoinRequest{OrgKey: key}); err != nil {
		t.Fatal(err)
	}
	m.approve(n0, nb.ID().String())
	eventually(t, 30*time.Second, "the fresh node at the org's state", func() string {
		if s, _ := nb.rep.Start(); s == 0 {
			return "it did not start from a checkpoint"
		}
		if h := stateHash(nb); h != stateHash(n0) {
			return fmt.Sprintf("state %.8s, want %.8s", h, stateHash(n0))
		}
		return ""
	})
}
