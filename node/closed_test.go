package node

import (
	"bytes"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/store"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/p2p"
)

// TestJoinWithRotatedKeyHoldsNothing (issue 20, a closed org): a node that
// runs join with an org key that `org key --rotate` replaced is refused
// before it is served a block: its data dir holds nothing of the org (not
// the org's description, not a single entry) and its connection is closed;
// a join with the current key, at once, works.
func TestJoinWithRotatedKeyHoldsNothing(t *testing.T) {
	m := newMesh(t, meshConfig{n: 3, interval: 250 * time.Millisecond})
	ctx := ctxT(t)
	n0, n1, old := m.nodes[0], m.nodes[1], m.nodes[2]
	const secret = "closed-org-description-7f3a9c"
	key, err := n0.orgs.CreateOrg(ctx, api.OrgCreate{Name: "acme", Description: secret})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n1.orgs.Join(ctx, api.JoinRequest{OrgKey: key.Key}); err != nil {
		t.Fatalf("join: %v", err)
	}
	m.approve(n0.Node, n1.ID().String())
	if _, err := n0.orgs.OrgKey(ctx, true); err != nil {
		t.Fatalf("rotate: %v", err)
	}

	_, err = old.orgs.Join(ctx, api.JoinRequest{OrgKey: key.Key})
	oneLineErr(t, "join with a rotated key", err, http.StatusForbidden, "this org key was rotated", "cshare org key")
	if org, k := old.rep.Org(), entryCount(old.Node); org != "" || k != 0 {
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

	// The current key, at once: admitted, pending as before.
	now, err := n0.orgs.OrgKey(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	res, err := old.orgs.Join(ctx, api.JoinRequest{OrgKey: now.Key})
	if err != nil || res.Status != ledger.MachinePending {
		t.Fatalf("join with the current key: %+v, %v; want pending", res, err)
	}
}

// TestStrangerGetsNothingFromNodes (issue 20, must hold): a libp2p peer
// that knows the org's ID and a node's addresses, and is no machine of the
// org, gets no ledger block, no heartbeat and no log from a running node,
// and its connection is not kept.
func TestStrangerGetsNothingFromNodes(t *testing.T) {
	pr := p2p.Probation
	p2p.Probation = time.Second
	t.Cleanup(func() { p2p.Probation = pr })
	m := newMesh(t, meshConfig{n: 2, interval: 250 * time.Millisecond})
	m.formOrg()
	n0 := m.nodes[0]
	org := n0.rep.Org()
	ctx := ctxT(t)
	stranger, _ := newRogue(t, m)
	// It runs the org's topics, believing n0 a machine, to keep whatever
	// n0 sent it.
	got := 0
	var mu sync.Mutex
	so, err := stranger.JoinOrg(org, strangerView{n0.ID()})
	if err != nil {
		t.Fatal(err)
	}
	so.OnHeartbeat(func(p2p.Heartbeat) { mu.Lock(); got++; mu.Unlock() })

	blocks := 0
	err = p2p.FetchBlocks(ctx, stranger.LibP2P(), n0.ID(), org, nil, 0, func(b [][]byte) error { blocks += len(b); return nil })
	if err == nil || blocks != 0 {
		t.Fatalf("the stranger's ledger fetch: %d blocks, %v; want refused", blocks, err)
	}
	if seen, err := so.FetchSeen(ctx, n0.ID()); err == nil || len(seen) != 0 {
		t.Fatalf("the stranger's heartbeat fetch: %d heartbeats, %v; want refused", len(seen), err)
	}
	if out, err := p2p.FetchLog(ctx, stranger.LibP2P(), n0.ID(), p2p.LogsRequest{Org: org, Job: "any", Item: 1}, 1<<20); err == nil || out != nil {
		t.Fatalf("the stranger's log fetch: %q, %v; want refused", out, err)
	}
	eventually(t, 20*time.Second, "the stranger's connection closed", func() string {
		if n0.host.LibP2P().Network().Connectedness(stranger.ID()) == network.Connected {
			return "still connected"
		}
		return ""
	})
	// n0 heartbeats every 250 ms: by now several were published, none to
	// the stranger.
	mu.Lock()
	defer mu.Unlock()
	if got != 0 {
		t.Fatalf("the stranger got %d heartbeats by gossip", got)
	}
}

// strangerView is a Membership in which the listed peers are approved.
type strangerView []peer.ID

func (v strangerView) IsMachine(p peer.ID) bool  { return slices.Contains(v, p) }
func (v strangerView) IsApproved(p peer.ID) bool { return slices.Contains(v, p) }

// TestRemovedWhileOfflineLearnsIt (issue 20): a machine removed while it
// was stopped learns it when it starts again: the org's machines serve it
// the ledger up to the entry that removed it, so it leaves the org (as one
// removed while online does), and what was written after its removal (a
// job) never reaches its data dir.
func TestRemovedWhileOfflineLearnsIt(t *testing.T) {
	m := newMesh(t, meshConfig{n: 3, interval: 250 * time.Millisecond, slots: 1})
	m.formOrg()
	ctx := ctxT(t)
	n0, n1 := m.nodes[0].Node, m.nodes[1].Node
	org, idC := n0.rep.Org(), m.nodes[2].idStr
	m.stop(2)
	if _, err := n0.orgs.MachineAction(ctx, idC, "remove"); err != nil {
		t.Fatalf("remove: %v", err)
	}
	var removal string
	n0.rep.View(func(st *ledger.State) {
		h := st.Machines[idC].History
		removal = h[len(h)-1].Entry
	})
	const secret = "written-after-the-removal-5e1d"
	job := submit(t, n0, api.JobSubmit{Cmd: []string{"echo", secret}})
	eventually(t, 20*time.Second, "n1 has the job", func() string {
		has := false
		n1.rep.View(func(st *ledger.State) { has = st.Jobs[job.ID] != nil })
		if !has {
			return "not yet"
		}
		return ""
	})

	m.restart(2)
	m.waitNoOrg(30*time.Second, 2)
	// Its status says so (not only its log), and keeps saying so.
	st, err := m.nodes[2].Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Left == nil || st.Left.Org != org || !strings.Contains(st.Left.Why, "removed") {
		t.Errorf("node status: left %+v; want org %s, removed", st.Left, org)
	}
	dir := filepath.Join(m.nodes[2].opts.DataDir, "orgs", org, "ledger")
	s, err := store.Open(dir, nil)
	if err != nil {
		t.Fatalf("the removed machine's archived ledger: %v", err)
	}
	defer s.Close()
	sawRemoval := false
	err = s.ForEachBlock(func(c cid.Cid, data []byte) error {
		sawRemoval = sawRemoval || c.String() == removal
		if bytes.Contains(data, []byte(secret)) {
			kind := "?"
			if e, err := ledger.Decode(data); err == nil {
				kind = e.Kind
			}
			t.Errorf("the removed machine holds entry %s (%s), written after its removal", c, kind)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !sawRemoval {
		t.Fatalf("the removed machine's ledger lacks the entry that removed it (%s)", removal)
	}
}
