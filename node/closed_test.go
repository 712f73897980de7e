package node

import (
	"bytes"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
)

// TestJoinWithRotatedKeyHoldsNothing (issue 20, a closed org): a node that
// runs join with an org key that `org key --rotate` replaced is refused
// before it is served a block: its data dir holds nothing of the org (not
// the org's description, not a single entry), its connection is closed and
// it cannot come back at once; a join with the current key still works.
func TestJoinWithRotatedKeyHoldsNothing(t *testing.T) {
	m := newMesh(t, meshConfig{n: 4, interval: 250 * time.Millisecond})
	ctx := ctxT(t)
	n0, n1, old, cur := m.nodes[0], m.nodes[1], m.nodes[2], m.nodes[3]
	const secret = "closed-org-description-7f3a9c"
	key, err := n0.CreateOrg(ctx, api.OrgCreate{Name: "acme", Description: secret})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n1.Join(ctx, api.JoinRequest{OrgKey: key.Key}); err != nil {
		t.Fatalf("join: %v", err)
	}
	m.approve(n0.Node, n1.ID().String())
	if _, err := n0.OrgKey(ctx, true); err != nil {
		t.Fatalf("rotate: %v", err)
	}

	_, err = old.Join(ctx, api.JoinRequest{OrgKey: key.Key})
	oneLineErr(t, "join with a rotated key", err, http.StatusForbidden, "this org key was rotated", "cshare org key")
	if org, k := old.orgID(), entryCount(old.Node); org != "" || k != 0 {
		t.Fatalf("the refused joiner is in org %q with %d entries", org, k)
	}
	err = filepath.WalkDir(old.opts.DataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(secret)) {
			t.Errorf("%s holds the org's description", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the refused joiner cut off", func() string {
		if n0.host.LibP2P().Network().Connectedness(old.ID()) == network.Connected {
			return "still connected"
		}
		return ""
	})
	if !n0.host.Gate().IsBlocked(old.ID()) {
		t.Fatal("the refused joiner may connect again at once")
	}

	// The current key: admitted, pending as before.
	now, err := n0.OrgKey(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cur.Join(ctx, api.JoinRequest{OrgKey: now.Key})
	if err != nil || res.Status != ledger.MachinePending {
		t.Fatalf("join with the current key: %+v, %v; want pending", res, err)
	}
}
