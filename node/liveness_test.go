package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/p2p"
)

// allStatuses is, for every live node, the `machine ls` status of every
// machine, as "viewer/machine" -> status.
func (m *mesh) allStatuses(t testing.TB) map[string]string {
	out := map[string]string{}
	for _, mn := range m.live() {
		ms, err := mn.orgs.Machines(context.Background())
		if err != nil {
			t.Fatalf("%s: machines: %v", mn.name, err)
		}
		for _, mi := range ms {
			out[mn.name+"/"+mi.ID] = mi.Status
		}
	}
	return out
}

// waitAllStatus waits until every live node shows every machine in ids with
// status want.
func (m *mesh) waitAllStatus(d time.Duration, want string, ids ...string) {
	m.t.Helper()
	eventually(m.t, d, "every node to show "+want, func() string {
		for _, mn := range m.live() {
			for _, id := range ids {
				if st := liveStatus(m.t, mn.Node, id); st != want {
					pid, _ := peer.Decode(id)
					hb, at, _ := mn.peers.Last(pid.String())
					return fmt.Sprintf("%s sees %s as %q (last heartbeat seq %d %v ago, connected %v)%s", mn.name, id, st,
						hb.Seq, time.Since(at), mn.host.LibP2P().Network().Connectedness(pid), gossipTrouble(mn.Node))
				}
			}
		}
		return ""
	})
}

func (m *mesh) ids() []string {
	var out []string
	for _, mn := range m.nodes {
		out = append(out, mn.ID().String())
	}
	return out
}

// rejected sums a node's gossip rejections "heartbeat/<reason>".
func rejected(n *Node, reason string) uint64 {
	n.mu.RLock()
	o := n.org
	n.mu.RUnlock()
	if o == nil {
		return 0
	}
	return o.Rejected()["heartbeat/"+reason]
}

// TestMeshLiveness: ten machines with a short interval see each other
// available; one stopped goes offline everywhere within 3 intervals + 1s and
// comes back when restarted on the same address; heartbeats from outside the
// org, forged and replayed ones change nothing anywhere (issue 3).
func TestMeshLiveness(t *testing.T) {
	const iv = time.Second
	m := newMesh(t, meshConfig{n: 10, interval: iv, fixPorts: true})
	m.formOrg()
	ids := m.ids()
	m.waitAllStatus(30*time.Second, StatusAvailable, ids...)

	// Stopped: offline on every other node within 3 intervals + 1s.
	victim := 4
	vid := ids[victim]
	t0 := time.Now()
	m.stop(victim)
	bound := 3*iv + time.Second
	seen := map[string]time.Duration{}
	for time.Since(t0) < bound+5*time.Second && len(seen) < len(m.live()) {
		for _, mn := range m.live() {
			if _, ok := seen[mn.name]; ok {
				continue
			}
			if liveStatus(t, mn.Node, vid) == StatusOffline {
				seen[mn.name] = time.Since(t0)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, mn := range m.live() {
		d, ok := seen[mn.name]
		vpid, _ := peer.Decode(vid)
		_, at, _ := mn.peers.Last(vpid.String())
		if !ok || d > bound {
			t.Errorf("%s saw the stopped machine offline after %v (ok %v), bound %v; its last heartbeat arrived %v after the stop began", mn.name, d, ok, bound, at.Sub(t0))
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// Restarted on the same address: available again everywhere.
	m.restart(victim)
	m.waitAllStatus(30*time.Second, StatusAvailable, ids...)

	// An approved machine that is only a bare host (no node), to publish
	// arbitrary bytes on the heartbeat topic as a machine of the org.
	n0 := m.nodes[0]
	org := n0.rep.Org()
	// (It connects once approved: a stranger's connections are closed.)
	rkey, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	rpid, err := peer.IDFromPrivateKey(rkey)
	if err != nil {
		t.Fatal(err)
	}
	rid := rpid.String()
	okey, err := n0.orgs.OrgKey(ctxT(t), false)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := ledger.ParseToken(okey.Key)
	if err != nil {
		t.Fatal(err)
	}
	rsigner, err := ledger.NewSigner(rkey)
	if err != nil {
		t.Fatal(err)
	}
	hs, clock := heads(n0.Node)
	reg, err := rsigner.Sign(org, ledger.KindMachineReg, ledger.MachineRegister{Name: "rogue", Cap: tok.Cap}, hs, clock, time.Now().UnixMilli())
	if err != nil {
		t.Fatal(err)
	}
	if err := n0.importEntries([]*ledger.Entry{reg}); err != nil {
		t.Fatal(err)
	}
	m.approve(n0.Node, rid)
	m.waitConverged(30 * time.Second)
	rogue := newRogueKey(t, m, rkey)
	hbTopic, err := rogue.PubSub().Join(p2p.TopicHeartbeat(org))
	if err != nil {
		t.Fatal(err)
	}
	defer hbTopic.Close()
	waitTopicPeers(t, hbTopic, m)
	publish := func(hb p2p.Heartbeat, sign bool) []byte {
		t.Helper()
		if sign {
			if err := hb.Sign(org, rkey); err != nil {
				t.Fatal(err)
			}
		}
		b, err := p2p.EncodeHeartbeat(&hb)
		if err != nil {
			t.Fatal(err)
		}
		if err := hbTopic.Publish(context.Background(), b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	mk := func(machine string, seq uint64) p2p.Heartbeat {
		return p2p.Heartbeat{Machine: machine, Seq: seq, Time: time.Now().UnixMilli(), Interval: iv.Milliseconds(),
			Total: p2p.Resources{Cores: 1000, Slots: 1}, Free: p2p.Resources{Cores: 1000, Slots: 1}, Name: "rogue"}
	}
	// One genuine heartbeat: every node accepts it (the bare machine is
	// available for 3 intervals).
	seq := uint64(time.Now().UnixNano())
	first := publish(mk(rid, seq), true)
	eventually(t, 10*time.Second, "every node to accept the bare machine's heartbeat", func() string {
		for _, mn := range m.live() {
			if hb, _, _ := mn.peers.Last(rogue.ID().String()); hb.Seq != seq {
				return mn.name + " has not"
			}
		}
		return ""
	})
	// Then it falls silent: offline everywhere.
	m.waitAllStatus(10*time.Second, StatusOffline, rid)
	before := m.allStatuses(t)

	reasons := []string{p2p.ReasonReplay, p2p.ReasonBadSignature, p2p.ReasonNotApproved}
	base := map[string]uint64{}
	for _, mn := range m.live() {
		for _, r := range reasons {
			base[mn.name+"/"+r] = rejected(mn.Node, r)
		}
	}
	// Replayed: the same bytes again (the seen-cache drops them), then an
	// older sequence number with fresh content, older than the reorder
	// window (the validator rejects it).
	if err := hbTopic.Publish(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	publish(mk(rid, seq-2*uint64(p2p.ReorderWindow)), true)
	// Forged: its own heartbeat with a broken signature, and one in the
	// name of a node of the org (signed by the rogue's key: a bad signature
	// too, as the signature is checked against the named machine's key).
	forged := mk(rid, seq+1)
	if err := forged.Sign(org, rkey); err != nil {
		t.Fatal(err)
	}
	forged.Sig[0] ^= 1
	publish(forged, false)
	publish(mk(ids[2], seq+2), true)

	// A peer outside the org publishing its own, validly signed heartbeats.
	outsider, okey2 := newRogue(t, m)
	otopic, err := outsider.PubSub().Join(p2p.TopicHeartbeat(org))
	if err != nil {
		t.Fatal(err)
	}
	defer otopic.Close()
	waitTopicPeers(t, otopic, m)
	ohb := mk(outsider.ID().String(), uint64(time.Now().UnixNano()))
	if err := ohb.Sign(org, okey2); err != nil {
		t.Fatal(err)
	}
	ob, _ := p2p.EncodeHeartbeat(&ohb)
	if err := otopic.Publish(context.Background(), ob); err != nil {
		t.Fatal(err)
	}

	// Every node gets each bad heartbeat straight from its publisher (which
	// is connected to all) and rejects it; rejected messages are neither
	// delivered nor forwarded, so once counted they can have no effect.
	eventually(t, 10*time.Second, "every node's validators to reject every bad heartbeat", func() string {
		for _, mn := range m.live() {
			for _, r := range reasons {
				if rejected(mn.Node, r) <= base[mn.name+"/"+r] {
					return mn.name + ": no rejection for " + r
				}
			}
		}
		return ""
	})
	after := m.allStatuses(t)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s: %s -> %s", k, v, after[k])
		}
	}
	for _, mn := range m.live() {
		oid, _ := peer.Decode(ohb.Machine)
		if _, _, ok := mn.peers.Last(oid.String()); ok {
			t.Errorf("%s recorded a heartbeat of a peer outside the org", mn.name)
		}
		hb, _, _ := mn.peers.Last(rogue.ID().String())
		if hb.Seq != seq {
			t.Errorf("%s: the bare machine's last heartbeat has seq %d, want %d", mn.name, hb.Seq, seq)
		}
		if st := liveStatus(t, mn.Node, outsider.ID().String()); st != "" {
			t.Errorf("%s lists the outsider as %q", mn.name, st)
		}
	}
}

// waitTopicPeers waits until the topic has every live node of m as a peer.
func waitTopicPeers(t testing.TB, tp *pubsub.Topic, m *mesh) {
	t.Helper()
	eventually(t, 20*time.Second, "the topic mesh", func() string {
		have := map[peer.ID]bool{}
		for _, p := range tp.ListPeers() {
			have[p] = true
		}
		for _, mn := range m.live() {
			if !have[mn.ID()] {
				return mn.name + " not a topic peer"
			}
		}
		return ""
	})
}
