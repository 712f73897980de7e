package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/cshare/cshare/ledger"
)

// TestHeadsMerged: three machines write at once, leaving three heads; once
// the ledger is quiet, one ledger.merge entry (or a few, while views
// differ) folds them into one head on every node, and no more are written.
func TestHeadsMerged(t *testing.T) {
	m := newMesh(t, meshConfig{n: 3, interval: 250 * time.Millisecond, merge: 1})
	m.formOrg()
	m.waitAllStatus(30*time.Second, StatusAvailable, m.ids()...)
	m.waitConverged(30 * time.Second)

	// Three concurrent writes, one per machine, on the same parents.
	n0 := m.nodes[0].Node
	hs, clock := heads(n0)
	var fork []*ledger.Entry
	for _, mn := range m.nodes {
		e, err := mn.signer.Sign(n0.rep.Org(), ledger.KindMerge, ledger.Merge{}, hs, clock, time.Now().UnixMilli())
		if err != nil {
			t.Fatal(err)
		}
		fork = append(fork, e)
	}
	for _, mn := range m.nodes {
		if err := mn.importEntries(fork); err != nil {
			t.Fatal(err)
		}
	}
	for _, mn := range m.nodes {
		if hs, _ := heads(mn.Node); len(hs) < 3 {
			t.Fatalf("%s: %d heads after the fork, want 3 or more", mn.name, len(hs))
		}
	}
	merged := func() string {
		var want string
		for _, mn := range m.nodes {
			hs, _ := heads(mn.Node)
			if len(hs) != 1 {
				return fmt.Sprintf("%s has %d heads", mn.name, len(hs))
			}
			kind := mn.rep.Get(hs[0]).Kind
			if kind != ledger.KindMerge {
				return fmt.Sprintf("%s's head is a %s", mn.name, kind)
			}
			if want == "" {
				want = hs[0].String()
			} else if hs[0].String() != want {
				return "the nodes' heads differ"
			}
		}
		return ""
	}
	eventually(t, 30*time.Second, "one merged head everywhere", merged)

	// Quiet from now on: a single head is not merged again. Wait until every
	// node has heard four more heartbeats from every other.
	count := entryCount(n0)
	seqs := map[string]uint64{}
	for _, mn := range m.nodes {
		for _, o := range m.nodes {
			hb, _, _ := mn.peers.Last(o.ID().String())
			seqs[mn.name+o.name] = hb.Seq
		}
	}
	beats := 0
	eventually(t, 30*time.Second, "four more heartbeats", func() string {
		for _, mn := range m.nodes {
			for _, o := range m.nodes {
				if hb, _, _ := mn.peers.Last(o.ID().String()); hb.Seq <= seqs[mn.name+o.name] {
					return fmt.Sprintf("%s has no newer heartbeat of %s", mn.name, o.name)
				}
			}
		}
		for k := range seqs {
			delete(seqs, k)
		}
		for _, mn := range m.nodes {
			for _, o := range m.nodes {
				hb, _, _ := mn.peers.Last(o.ID().String())
				seqs[mn.name+o.name] = hb.Seq
			}
		}
		if beats++; beats < 4 {
			return "more heartbeats"
		}
		return ""
	})
	if got := entryCount(n0); got != count {
		t.Fatalf("%d entries written after the heads were merged", got-count)
	}
	if s := merged(); s != "" {
		t.Fatal(s)
	}
}
