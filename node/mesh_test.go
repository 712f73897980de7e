package node

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/p2p"
)

// rogueSource serves the sync protocol from a fixed set of blocks, whatever
// they are: a peer that sends forged or replayed entries.
type rogueSource struct {
	org    string
	blocks [][]byte
}

func (r *rogueSource) SyncOrg() string { return r.org }
func (r *rogueSource) Collect(want []cid.Cid, floor uint64, limit int) [][]byte {
	return r.blocks
}
func (r *rogueSource) Announced(peer.ID, []cid.Cid) {}

// newRogue starts a bare libp2p host outside the org, connected to every
// live node of m.
func newRogue(t testing.TB, m *mesh) (*p2p.Host, crypto.PrivKey) {
	t.Helper()
	k, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	return newRogueKey(t, m, k), k
}

// newRogueKey is newRogue with the host's key.
func newRogueKey(t testing.TB, m *mesh, k crypto.PrivKey) *p2p.Host {
	t.Helper()
	h, err := p2p.New(context.Background(), p2p.Config{Key: k, ListenAddrs: []string{"/ip4/127.0.0.1/tcp/0"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	for _, mn := range m.live() {
		if err := h.Connect(ctxT(t), mn.Addrs()); err != nil {
			t.Fatalf("rogue connect to %s: %v", mn.name, err)
		}
	}
	return h
}

// forge returns e's bytes with one bit of its signature flipped (the
// signature is the entry's last field) and the CID of those bytes.
func forge(e *ledger.Entry) ([]byte, cid.Cid) {
	raw := append([]byte(nil), e.Bytes()...)
	raw[len(raw)-1] ^= 0x01
	return raw, ledger.CIDOf(raw)
}

func droppedCount(n *Node, reason string) float64 {
	mfs, _ := n.reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "cshare_ledger_dropped_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestMeshOrg: five nodes form one org and converge to one state hash;
// forged, replayed and unauthorised entries have no effect anywhere; a node
// closed and restarted keeps its State and catches up (issue 2).
func TestMeshOrg(t *testing.T) {
	m := newMesh(t, meshConfig{n: 6, interval: 250 * time.Millisecond})
	ctx := ctxT(t)
	// Five machines form the org; the sixth registers and stays pending, the
	// target of the approvals below.
	all := m.nodes
	m.nodes = all[:5]
	key := m.formOrg()
	m.nodes = all
	n0, member, pend := m.nodes[0], m.nodes[1], m.nodes[5]
	org := n0.rep.Org()
	if _, err := pend.orgs.Join(ctx, api.JoinRequest{OrgKey: key}); err != nil {
		t.Fatalf("join: %v", err)
	}
	pid := pend.ID().String()
	eventually(t, 30*time.Second, "the sixth machine pending everywhere", func() string {
		for _, mn := range m.nodes {
			if st := machineStatus(mn.Node, pid); st != ledger.MachinePending {
				return mn.name + " sees " + st
			}
		}
		return ""
	})
	base := m.waitConverged(30 * time.Second)
	if st, _ := member.Status(ctx); st.Role != ledger.RoleMember {
		t.Fatalf("node 1 has role %q, want member", st.Role)
	}

	// A non-admin's approval is refused by its own API...
	_, err := member.orgs.MachineAction(ctx, pid, "approve")
	if statusCode(err) != http.StatusForbidden {
		t.Fatalf("member approve: got %v, want a 403", err)
	}
	if msg := err.Error(); msg == "" || containsNewline(msg) {
		t.Fatalf("member approve: error %q is not one line", msg)
	}
	if h := stateHash(member.Node); h != base {
		t.Fatalf("a refused approval changed the member's state")
	}

	// A forged approval (admin-signed, signature bit flipped) served through
	// the sync protocol by a peer outside the org, and announced to every
	// node: dropped at the door as a bad block.
	h0, _ := heads(n0.Node)
	_, clock := heads(n0.Node)
	good, err := n0.signer.Sign(org, ledger.KindMachineApprove, ledger.MachineRef{Machine: pid}, h0, clock, time.Now().UnixMilli())
	if err != nil {
		t.Fatal(err)
	}
	forged, forgedCID := forge(good)
	if _, err := ledger.Decode(forged); err == nil {
		t.Fatal("the forged entry decodes")
	}
	// A replayed entry: the bytes of the machine's own registration, again.
	var regBytes []byte
	lg, unlock := n0.rep.ReadLog()
	es := lg.Entries()
	unlock()
	for _, e := range es {
		if e.Kind == ledger.KindMachineReg && e.AuthorString() == pid {
			regBytes = e.Bytes()
		}
	}
	if regBytes == nil {
		t.Fatal("no registration entry of the pending machine")
	}
	rogue, _ := newRogue(t, m)
	p2p.ServeSync(rogue.LibP2P(), &rogueSource{org: org, blocks: [][]byte{regBytes, forged}})
	// A stranger may not even announce (the closed org, issue 20)...
	if err := p2p.AnnounceHeads(ctx, rogue.LibP2P(), n0.ID(), org, []cid.Cid{forgedCID}); err == nil {
		t.Fatal("a stranger's announcement was taken")
	}
	// ...a holder of the org key (a joiner, admitted by the approved
	// machines) may, and its forged block is dropped at the door.
	tok, err := ledger.ParseToken(key)
	if err != nil {
		t.Fatal(err)
	}
	approved := m.nodes[:5]
	badBefore := map[string]float64{}
	for _, mn := range approved {
		badBefore[mn.name] = droppedCount(mn.Node, "bad_block")
		if err := rogue.Admit(ctx, mn.ID(), org, tok.Cap); err != nil {
			t.Fatalf("admission at %s: %v", mn.name, err)
		}
		if err := p2p.AnnounceHeads(ctx, rogue.LibP2P(), mn.ID(), org, []cid.Cid{forgedCID}); err != nil {
			t.Fatalf("announce to %s: %v", mn.name, err)
		}
	}
	eventually(t, 20*time.Second, "every node to drop the forged block", func() string {
		for _, mn := range approved {
			if droppedCount(mn.Node, "bad_block") <= badBefore[mn.name] {
				return mn.name + " has not dropped it yet"
			}
		}
		return ""
	})
	// The replayed registration, and the genuine registration added again
	// directly: nothing new.
	for _, mn := range m.nodes {
		e, err := ledger.Decode(regBytes)
		if err != nil {
			t.Fatal(err)
		}
		before := entryCount(mn.Node)
		if err := mn.importEntries([]*ledger.Entry{e}); err != nil {
			t.Fatal(err)
		}
		lg, unlock := mn.rep.ReadLog()
		has, after := lg.Has(forgedCID), lg.Len()
		unlock()
		if has || after != before {
			t.Fatalf("%s: forged entry kept %v, entries %d -> %d", mn.name, has, before, after)
		}
		if h := stateHash(mn.Node); h != base {
			t.Fatalf("%s: state changed by forged or replayed entries", mn.name)
		}
		if st := machineStatus(mn.Node, pid); st != ledger.MachinePending {
			t.Fatalf("%s: the pending machine is %q", mn.name, st)
		}
	}

	// A member's approval put on the wire directly, past its API's check:
	// kept in the DAG, without effect, on every node alike.
	e, err := member.rep.Write(ctx, ledger.KindMachineApprove, ledger.MachineRef{Machine: pid})
	if err == nil {
		t.Fatalf("a member's approval took effect on its own node")
	}
	eventually(t, 30*time.Second, "every node to have the member's approval", func() string {
		for _, mn := range m.nodes {
			ok := mn.rep.Has(e.CID())
			if !ok {
				return mn.name + " lacks it"
			}
		}
		return ""
	})
	m.waitConverged(30 * time.Second)
	for _, mn := range m.nodes {
		if st := machineStatus(mn.Node, pid); st != ledger.MachinePending {
			t.Fatalf("%s: the member's approval took effect: %q", mn.name, st)
		}
		lg, unlock := mn.rep.ReadLog()
		eff := lg.Effective(e.CID())
		unlock()
		if eff {
			t.Fatalf("%s: the member's approval is effective", mn.name)
		}
	}

	// Restart without changes: the State is the one it had.
	victim := 3
	vh, ve := stateHash(m.nodes[victim].Node), entryCount(m.nodes[victim].Node)
	m.stop(victim)
	n := m.restart(victim)
	if h, l := stateHash(n), entryCount(n); h != vh || l != ve {
		t.Fatalf("restarted node: state %.8s (%d entries), want %.8s (%d)", h, l, vh, ve)
	}
	m.waitConverged(30 * time.Second)

	// Down while the org changes: it keeps what it had, then catches up.
	vheads, _ := heads(n)
	ve = entryCount(n)
	m.stop(victim)
	if _, err := n0.orgs.MachineAction(ctx, pid, "approve"); err != nil {
		t.Fatalf("approve: %v", err)
	}
	if _, err := n0.orgs.SetSettings(ctx, api.SettingsRequest{Set: map[string]string{"smartshare.preempt_policy": "passive"}}); err != nil {
		t.Fatalf("settings: %v", err)
	}
	want := m.waitConverged(30 * time.Second) // the live ones
	n = m.restart(victim)
	for _, h := range vheads {
		if !n.rep.Has(h) {
			t.Errorf("restarted node lost head %s", h)
		}
	}
	if l := n.rep.Len(); l < ve {
		t.Errorf("restarted node has %d entries, had %d", l, ve)
	}
	got := m.waitConverged(30 * time.Second)
	if got != want {
		t.Fatalf("converged to %.8s, want %.8s (nothing was written since)", got, want)
	}
	if st := machineStatus(n, pid); st != ledger.MachineApproved {
		t.Fatalf("restarted node sees the approved machine as %q", st)
	}
	var pol string
	n.rep.View(func(st *ledger.State) { pol = st.Settings.SmartShare.PreemptPolicy })
	if pol != "passive" {
		t.Fatalf("restarted node has preempt_policy %q", pol)
	}
}

func containsNewline(s string) bool {
	for _, c := range s {
		if c == '\n' {
			return true
		}
	}
	return false
}
