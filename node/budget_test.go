package node

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/replica"
	"github.com/cshare/cshare/p2p"
)

// TestFloodingMemberCappedByBudget: a member's machine, running code of
// its own, writes entries without effect (a member may not reject
// machines) as fast as the heads rate limit lets them out: each signed on
// its previous one and pushed inline on the ledger topic. The three honest
// nodes take its entries up to the one that caps it, then refuse what it
// sends: their ledgers stop growing, they agree on the State and on the
// cap, the flooder's announcements are ignored and its sync requests
// refused. An entry of the capped machine that an honest node passes on
// is taken by all; the capped machine's own writes are refused at their
// source; the honest members' writes land everywhere.
//
// The bound on each honest ledger: the org's entries, the budget and the
// entry past it, exactly. Each node takes of what the flooder sends itself
// only up to the entry that caps it in that node's fold (the replica's
// gate folds the flooder's entries in parts that end where its budget
// would run out), and the flood is one chain, so every node holds the
// same prefix of it, and honest nodes pass on nothing more.
func TestFloodingMemberCappedByBudget(t *testing.T) {
	m := newMesh(t, meshConfig{n: 4, interval: 250 * time.Millisecond})
	m.formOrg()
	honest, fl := m.nodes[:3], m.nodes[3].Node
	fid := fl.ID().String()
	base, fbase := 0, without(honest[0].Node, fid)
	effBase := map[string]int{} // each node's effective entries before the flood
	for _, n := range honest {
		base = max(base, entryCount(n.Node))
		effBase[n.name] = effectiveCount(n.Node)
	}
	const flood = 400
	const at = 1_700_000_000_000 // the entries' advisory time
	ctx := ctxT(t)
	heads, clock := fl.rep.Heads()
	// push signs an entry without effect on the last and pushes it: into
	// the flooder's own replica first (which serves it to peers that miss
	// the announcement, until it caps itself), then on the ledger topic.
	push := func(name string) {
		t.Helper()
		e, err := fl.signer.Sign(fl.rep.Org(), ledger.KindMachineReject, ledger.MachineRef{Machine: name}, heads, clock, at)
		if err != nil {
			t.Fatal(err)
		}
		_ = fl.rep.Import([]*ledger.Entry{e})
		b, err := replica.HeadsPayload([]cid.Cid{e.CID()}, e.Clock, e)
		if err != nil {
			t.Fatal(err)
		}
		if err := fl.topics().PublishHeads(ctx, b); err != nil {
			t.Fatalf("publish %s: %v", name, err)
		}
		heads, clock = []cid.Cid{e.CID()}, e.Clock
	}
	for i := range flood {
		push(fmt.Sprintf("nobody-%d", i))
	}
	bound := base + ledger.IneffectiveBudget + 1
	eventually(t, 30*time.Second, "every honest node capping the flooder", func() string {
		for _, n := range honest {
			if !n.rep.Snapshot().State.IsCapped(fid) {
				o := n.topics()
				return fmt.Sprintf("%s: not capped, %d entries (gossip ignored %v rejected %v)", n.name, entryCount(n.Node), o.Ignored(), o.Rejected())
			}
		}
		return ""
	})
	for _, n := range honest {
		if got := without(n.Node, fid) - fbase; got > ledger.IneffectiveBudget+1 {
			t.Errorf("%s holds %d of the %d entries flooded; want at most %d (the budget and the entry past it)", n.name, got, flood, ledger.IneffectiveBudget+1)
		}
		if got, eff := entryCount(n.Node), effectiveCount(n.Node)-effBase[n.name]; got-eff > bound {
			t.Errorf("%s holds %d entries after a flood of %d, %d of them new and effective; want at most %d without effect (the org's %d, the budget and the entry past it)", n.name, got, flood, eff, bound, base)
		}
		t.Logf("%s: %d of the flooder's entries without effect, %d in all more than before", n.name, without(n.Node, fid)-fbase, entryCount(n.Node)-base)
	}

	// Cut off at the door: announcements ignored, sync refused.
	push("after")
	eventually(t, 30*time.Second, "the flooder's announcements ignored as capped", func() string {
		if k := honest[0].topics().Ignored()["ledger/"+p2p.IgnoreCapped]; k == 0 {
			return fmt.Sprintf("ignored %v", honest[0].topics().Ignored())
		}
		return ""
	})
	// Its entry that an honest node passes on is taken by every node (it
	// comes with that node's heads): refusing it would split the DAG.
	hh, hc := honest[0].rep.Heads()
	late, err := fl.signer.Sign(fl.rep.Org(), ledger.KindMachineReject, ledger.MachineRef{Machine: "by-another-way"}, hh, hc, at)
	if err != nil {
		t.Fatal(err)
	}
	if err := honest[0].rep.Import([]*ledger.Entry{late}); err != nil {
		t.Fatal(err)
	}
	ferr := p2p.FetchBlocks(ctx, fl.host.LibP2P(), honest[0].ID(), fl.rep.Org(), nil, 0, func([][]byte) error { return nil })
	if ferr == nil || !strings.Contains(ferr.Error(), "capped") {
		t.Errorf("the flooder's sync request: %v, want refused as capped", ferr)
	}

	// The capped machine's own write is refused at its source (no node
	// would take it from it); honest writes land, and every honest node
	// folds one State.
	if _, err := fl.rep.Write(ctx, ledger.KindJobSubmit, ledger.JobSpec{Driver: "exec", Cmd: []string{"true"}, RangeStart: 1, RangeEnd: 1,
		Priority: 5, CPUs: 1, Nonce: []byte("capped")}); !errors.Is(err, replica.ErrCapped) {
		t.Fatalf("the capped machine's job: %v, want replica.ErrCapped", err)
	}
	for _, n := range honest[1:] {
		if _, err := n.rep.Write(ctx, ledger.KindJobSubmit, ledger.JobSpec{Driver: "exec", Cmd: []string{"true"}, RangeStart: 1, RangeEnd: 1,
			Priority: 5, CPUs: 1, Nonce: []byte(n.name)}); err != nil {
			t.Fatalf("%s: an honest job after the flood: %v", n.name, err)
		}
	}
	eventually(t, 30*time.Second, "the honest nodes on one State with both jobs and the entry passed on", func() string {
		hash := ""
		for _, n := range honest {
			st := n.rep.Snapshot()
			if !n.rep.Has(late.CID()) {
				return fmt.Sprintf("%s lacks the entry passed on", n.name)
			}
			if len(st.State.Jobs) != 2 {
				return fmt.Sprintf("%s: %d jobs", n.name, len(st.State.Jobs))
			}
			if hash != "" && st.StateHash() != hash {
				return fmt.Sprintf("%s: state %s, another %s", n.name, st.StateHash(), hash)
			}
			hash = st.StateHash()
		}
		return ""
	})
	for _, n := range honest {
		if got, eff := entryCount(n.Node), effectiveCount(n.Node)-effBase[n.name]; got-eff > bound+1 { // and the entry passed on
			t.Errorf("%s holds %d entries, %d of them new and effective; want at most %d", n.name, got, eff, bound+1)
		}
	}
}

// without counts the entries of n's ledger that machine id signed and
// that have no effect.
func without(n *Node, id string) int {
	rd, done := n.rep.ReadLog()
	defer done()
	k := 0
	for _, e := range rd.Entries() {
		if e.AuthorString() == id && !rd.Effective(e.CID()) {
			k++
		}
	}
	return k
}

// effectiveCount counts the effective entries of n's ledger.
func effectiveCount(n *Node) int {
	rd, done := n.rep.ReadLog()
	defer done()
	k := 0
	for _, e := range rd.Entries() {
		if rd.Effective(e.CID()) {
			k++
		}
	}
	return k
}
