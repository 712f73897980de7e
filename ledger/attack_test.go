package ledger

// Attacks on the ledger, each asserting no effect and no divergence. Most
// live next to the rule they attack; this file holds the rest and is the
// index:
//
//   - forged entries (a flipped bit anywhere): TestDecodeTampered;
//     a forged delegation: TestForgedDelegation; an entry of another org:
//     TestWrongOrg; a forged block from a peer: replica.TestBadInputDropped
//   - replayed entries: TestReplayedEntriesChangeNothing (below); a replayed
//     delegation: TestForgedDelegation; forged, replayed and unauthorised
//     entries on a live mesh: node.TestMeshOrg
//   - forged and replayed heartbeats: p2p.TestForgedHeartbeatsRejected,
//     p2p.TestReplayedHeartbeatRejected, p2p.TestForgedHeadsRejected, and
//     on a live mesh node.TestMeshLiveness
//   - a member machine lying in its heartbeats (slots, leases):
//     node/attack_test.go
//   - a member acting as admin: TestNonAdminHasNoAuthority
//   - a removed admin's back-dated entries: TestBackdatedRevokedAdmin
//   - two admins removing each other at once: TestMutualRemoval,
//     TestDemotionConflict
//   - an entry naming 10,000 parents: TestTenThousandParents (below)
//   - a 1,000,000-block answer, a children-first chain, undecodable blocks:
//     ledger/replica/attack_test.go; a long chain of real entries, and a
//     ledger longer than one answer: ledger/replica/bigchain_test.go
//   - a member machine claiming items the plan does not give it:
//     node.TestLeaseClaimsOutsideThePlan
//   - oversized requests on the stream protocols: p2p/attack_test.go,
//     dataset/attack_test.go

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/fxamacker/cbor/v2"
	"github.com/ipfs/go-cid"
)

// TestTenThousandParents: an author cannot sign an entry naming 10,000
// parents, and such bytes from a peer are refused before they are decoded
// (over MaxEntrySize: 10,000 CIDs take ~360 KB), or, cut to the size cap,
// by the parents cap; the log is unchanged either way.
func TestTenThousandParents(t *testing.T) {
	w := newWorld(t)
	before, n := w.log.State().Hash(), w.log.Len()
	parents := make([]cid.Cid, 10000)
	raw := make([][]byte, len(parents))
	for i := range parents {
		parents[i] = CIDOf([]byte{byte(i), byte(i >> 8), 1})
		raw[i] = parents[i].Bytes()
	}
	if _, err := w.owner.s.Sign(w.org, KindOrgKey, OrgKey{KeyID: "k2"}, parents, 5, w.tick()); err == nil {
		t.Error("Sign made an entry naming 10,000 parents")
	}
	slices.SortFunc(raw, bytes.Compare)
	forge := func(ps [][]byte) []byte {
		wr := wire{Org: w.org, Kind: KindOrgKey, Author: w.owner.s.pub, Clock: 6, Parents: ps, Time: w.tick(), Payload: cbor.RawMessage{0xa0}}
		unsigned, err := encMode.Marshal(wr)
		if err != nil {
			t.Fatal(err)
		}
		wr.Sig = w.owner.s.SignBytes(sigDomain, unsigned)
		b, err := encMode.Marshal(wr)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if _, err := Decode(forge(raw)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("10,000 parents: %v, want ErrTooLarge", err)
	}
	fit := MaxEntrySize / (len(raw[0]) + 2)
	if _, err := Decode(forge(raw[:fit-64])); !errors.Is(err, ErrMalformed) {
		t.Errorf("%d parents (under the size cap): %v, want ErrMalformed", fit-64, err)
	}
	if w.log.State().Hash() != before || w.log.Len() != n {
		t.Error("the log changed")
	}
}

// TestReplayedEntriesChangeNothing: every entry of an org delivered again,
// in any order, and an org's entries replayed into another org's log,
// leave both logs as they were.
func TestReplayedEntriesChangeNothing(t *testing.T) {
	w := newWorld(t)
	for i := 0; i < 5; i++ {
		w.ok(w.owner, KindOrgKey, OrgKey{KeyID: string(rune('a' + i))})
	}
	before, n := w.log.State().Hash(), w.log.Len()
	all := w.log.Entries()
	replay := append(slices.Clone(all), all...)
	slices.Reverse(replay)
	_, _ = w.log.AddBatch(replay) // known entries: nothing to add
	for _, e := range all {
		_, _ = w.log.Add(e)
	}
	if w.log.State().Hash() != before || w.log.Len() != n {
		t.Errorf("replayed entries changed the log: %d entries (want %d)", w.log.Len(), n)
	}
	other := newWorldNamed(t, "other")
	ob, on := other.log.State().Hash(), other.log.Len()
	for _, e := range all {
		if _, err := other.log.Add(e); err == nil && e.Kind != KindGenesis {
			t.Errorf("%s of org %s was taken by org %s", e.Kind, w.org, other.org)
		}
	}
	if other.log.State().Hash() != ob || other.log.Len() != on {
		t.Errorf("another org's entries changed the log: %d entries (want %d)", other.log.Len(), on)
	}
}
