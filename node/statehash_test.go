package node

import (
	"context"
	"testing"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/replica"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/runtime"
	"github.com/cshare/cshare/runtime/hw"
)

// node status and org show give the state hash kept with each fold's
// snapshot: asked many times of a ledger of thousands of entries, they
// encode the State once per snapshot they see, not once per call; and the
// hash is the State's.
func TestStatusKeepsTheStateHash(t *testing.T) {
	ctx := context.Background()
	a, err := Start(ctx, Options{DataDir: t.TempDir(), API: "127.0.0.1:0", Listen: []string{"/ip4/127.0.0.1/tcp/0"}, DisableMDNS: true,
		HeartbeatInterval: time.Second, Name: "a", NVML: hw.NoNVML{}, Driver: runtime.NewFake()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.orgs.CreateOrg(ctx, api.OrgCreate{Name: "hash"}); err != nil {
		t.Fatal(err)
	}
	buildLedger(t, a, 3000)
	snaps := map[*replica.Snapshot]bool{}
	before := ledger.Hashes()
	var hash string
	for i := range 20 {
		snaps[a.rep.Snapshot()] = true
		s, err := a.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		o, err := a.orgs.Org(ctx)
		if err != nil {
			t.Fatal(err)
		}
		snaps[a.rep.Snapshot()] = true
		if i == 0 {
			hash = s.StateHash
		}
		if s.StateHash == "" || o.StateHash == "" {
			t.Fatalf("call %d: status hash %q, org show hash %q", i, s.StateHash, o.StateHash)
		}
	}
	if n := ledger.Hashes() - before; n > int64(len(snaps)) {
		t.Fatalf("40 calls encoded the State %d times over %d snapshots, want at most one per snapshot", n, len(snaps))
	}
	if snap := a.rep.Snapshot(); len(snaps) == 1 && (snap.State.Hash() != hash || snap.StateHash() != hash) {
		t.Fatalf("status gave %s, the State hashes to %s", hash, snap.State.Hash())
	}
}
