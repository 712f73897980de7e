package orgsvc

import (
	"strings"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/cshare/cshare/ledger"
)

// TestOrgExit: when the ledger says a machine is out of its org.
func TestOrgExit(t *testing.T) {
	st := &ledger.State{Org: "o", Members: map[string]*ledger.Member{"p": {ID: "p", Role: ledger.RoleMember}},
		Machines: map[string]*ledger.Machine{}}
	add := func(id, owner, status string) {
		st.Machines[id] = &ledger.Machine{ID: id, Owner: owner, Status: status}
	}
	add("a", "p", ledger.MachineApproved)
	add("b", "p", ledger.MachineRemoved)
	add("c", "gone", ledger.MachineRemoved)
	add("d", "p", ledger.MachineRejected)
	add("e", "p", ledger.MachinePending)
	for id, want := range map[string]string{"a": "", "e": "", "unknown": "", "b": "this machine was removed",
		"c": "person left the org or was removed", "d": "rejected"} {
		got := orgExit(st, id)
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("machine %s: %q, want %q", id, got, want)
		}
	}
	st.Deleted = true
	if got := orgExit(st, "a"); !strings.Contains(got, "deleted") {
		t.Errorf("deleted org: %q", got)
	}
	if got := orgExit(&ledger.State{}, "a"); got != "" {
		t.Errorf("no org: %q", got)
	}
}

// TestCheckTombstone: a tombstone is accepted only when it verifies, is an
// org.delete of this org naming the org's name, and its author is an
// approved machine of the owner.
func TestCheckTombstone(t *testing.T) {
	owner, member, stranger := testSigner(t), testSigner(t), testSigner(t)
	now := time.Now().UnixMilli()
	lg := ledger.NewLog()
	add := func(s *ledger.Signer, org, kind string, p any) *ledger.Entry {
		t.Helper()
		heads, clock := lg.Heads()
		e, err := s.Sign(org, kind, p, heads, clock, now)
		if err != nil {
			t.Fatal(err)
		}
		if applyErr, err := lg.Add(e); err != nil || applyErr != nil {
			t.Fatalf("%s: %v %v", kind, applyErr, err)
		}
		return e
	}
	g := add(owner, "", ledger.KindGenesis, ledger.Genesis{Name: "acme", OrgKeyID: "k1", Settings: ledger.DefaultSettings(), Nonce: []byte("nonce-0123456789")})
	org := g.CID().String()
	c := owner.SignCapability(ledger.Capability{Org: org, Kind: ledger.CapOrgKey, ID: "k1", Role: ledger.RoleMember})
	add(member, org, ledger.KindMachineReg, ledger.MachineRegister{Name: "m", Cap: c})
	add(owner, org, ledger.KindMachineApprove, ledger.MachineRef{Machine: member.ID().String()})
	st := lg.State()
	if st.Machines[member.ID().String()].Status != ledger.MachineApproved {
		t.Fatal("member not approved")
	}
	sign := func(s *ledger.Signer, org, kind string, p any) []byte {
		parents, clock := []cid.Cid{g.CID()}, uint64(1)
		if kind == ledger.KindGenesis {
			parents, clock = nil, 0
		}
		e, err := s.Sign(org, kind, p, parents, clock, now)
		if err != nil {
			t.Fatal(err)
		}
		return e.Bytes()
	}
	good := sign(owner, org, ledger.KindOrgDelete, ledger.OrgDelete{Name: "acme"})
	if err := checkTombstone(st, good); err != nil {
		t.Fatalf("the owner's tombstone: %v", err)
	}
	forged := append([]byte(nil), good...)
	forged[len(forged)-5] ^= 1 // in the signature
	otherGenesis := sign(owner, "", ledger.KindGenesis, ledger.Genesis{Name: "acme", OrgKeyID: "k2", Settings: ledger.DefaultSettings(), Nonce: []byte("other-0123456789")})
	otherOrg := ledger.CIDOf(otherGenesis).String()
	for name, c := range map[string]struct {
		raw  []byte
		says string
	}{
		"forged":           {forged, "signature"},
		"garbage":          {[]byte("not an entry"), "tombstone:"},
		"other org":        {sign(owner, otherOrg, ledger.KindOrgDelete, ledger.OrgDelete{Name: "acme"}), "of org"},
		"other name":       {sign(owner, org, ledger.KindOrgDelete, ledger.OrgDelete{Name: "acne"}), "names"},
		"other kind":       {sign(owner, org, ledger.KindOrgUpdate, ledger.OrgUpdate{}), "kind"},
		"member's machine": {sign(member, org, ledger.KindOrgDelete, ledger.OrgDelete{Name: "acme"}), "not an approved machine of the owner"},
		"stranger":         {sign(stranger, org, ledger.KindOrgDelete, ledger.OrgDelete{Name: "acme"}), "not an approved machine of the owner"},
	} {
		if err := checkTombstone(st, c.raw); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v; want an error saying %q", name, err, c.says)
		}
	}
}

func testSigner(t *testing.T) *ledger.Signer {
	t.Helper()
	k, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ledger.NewSigner(k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
