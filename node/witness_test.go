package node

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/p2p"
)

// Witnessed redemptions (issue 17, deliverable 5): tests of witness.go and
// of the fold's witness rule through whole nodes.

// prepJoin does what Join does before it registers: dial the key's
// addresses (and those of also), fetch the ledger, join the org's topics.
// A modified client would do this, then write what it likes.
func prepJoin(t *testing.T, j *Node, tok ledger.Token, also ...*meshNode) {
	t.Helper()
	ctx := ctxT(t)
	if err := j.host.Connect(ctx, tok.Addrs); err != nil {
		t.Fatalf("connect: %v", err)
	}
	for _, o := range also {
		if err := j.host.Connect(ctx, o.Addrs()); err != nil {
			t.Fatalf("connect to %s: %v", o.name, err)
		}
	}
	ai, err := peer.AddrInfoFromString(tok.Addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	p := ai.ID
	// The closed org: the key is shown before the ledger is served.
	for _, q := range append([]peer.ID{p}, meshIDs(also)...) {
		if err := j.host.Admit(ctx, q, tok.Cap.Org, tok.Cap); err != nil {
			t.Fatalf("admission: %v", err)
		}
	}
	if err := j.rep.CatchUp(ctx, p, tok.Cap.Org); err != nil {
		t.Fatalf("catch up: %v", err)
	}
	j.mu.RLock()
	joined := j.org != nil
	j.mu.RUnlock()
	if !joined {
		if err := j.joinTopics(tok.Cap.Org); err != nil {
			t.Fatalf("join topics: %v", err)
		}
	}
}

func meshIDs(ns []*meshNode) []peer.ID {
	out := make([]peer.ID, len(ns))
	for i, n := range ns {
		out[i] = n.ID()
	}
	return out
}

// noBlock lifts, for the test, the block that follows a refused admission
// (p2p's TestRotatedKeyAdmission's subject): the modified clients below,
// refused, come back with the ledger anyway.
func noBlock(t *testing.T) {
	bf := p2p.BlockFor
	p2p.BlockFor = 0
	t.Cleanup(func() { p2p.BlockFor = bf })
}

// holdOrgKey admits j, as a holder of the org's current org key (admin
// issues it), at every approved node of to: the modified clients below
// hold the ledger, whichever capability they then try to register with.
func holdOrgKey(t *testing.T, j, admin *Node, to []*meshNode) {
	t.Helper()
	ctx := ctxT(t)
	key, err := admin.orgs.OrgKey(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := ledger.ParseToken(key.Key)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range to {
		if o.Node == j || !o.rep.IsApproved(o.ID()) {
			continue
		}
		// A refused joiner's connection is closed a moment after the
		// refusal: try again until the admission holds.
		var last error
		eventually(t, 10*time.Second, "admission at "+o.name, func() string {
			if last = j.host.Connect(ctx, o.Addrs()); last == nil {
				if last = j.host.Admit(ctx, o.ID(), tok.Cap.Org, tok.Cap); last == nil {
					return ""
				}
			}
			return last.Error()
		})
	}
}

// forceRegister writes reg as j, whatever j's own fold says of it, and
// pushes it to every node of to (as Join does to the bootstrap peers).
func forceRegister(t *testing.T, j *Node, reg ledger.MachineRegister, to []*meshNode) *ledger.Entry {
	t.Helper()
	ctx := ctxT(t)
	e, err := j.rep.Write(ctx, ledger.KindMachineReg, reg)
	if e == nil {
		t.Fatalf("write register: %v", err)
	}
	for _, o := range to {
		if o.Node == j {
			continue
		}
		if err := j.host.Connect(ctx, o.Addrs()); err != nil {
			t.Fatalf("connect to %s: %v", o.name, err)
		}
		if err := p2p.AnnounceHeads(ctx, j.host.LibP2P(), o.ID(), j.rep.Org(), []cid.Cid{e.CID()}); err != nil {
			t.Fatalf("announce to %s: %v", o.name, err)
		}
	}
	return e
}

// effective waits until every node of on has every entry of es, then
// reports for each node whether each entry is effective there.
func effective(t *testing.T, on []*meshNode, es ...*ledger.Entry) map[string][]bool {
	t.Helper()
	eventually(t, 30*time.Second, "every node to have the registers", func() string {
		for _, mn := range on {
			for i, e := range es {
				if !mn.rep.Has(e.CID()) {
					return fmt.Sprintf("%s lacks register %d", mn.name, i)
				}
			}
		}
		return ""
	})
	out := map[string][]bool{}
	for _, mn := range on {
		lg, unlock := mn.rep.ReadLog()
		for _, e := range es {
			out[mn.name] = append(out[mn.name], lg.Effective(e.CID()))
		}
		unlock()
	}
	return out
}

// registersBy counts the machine.register entries by machine id in n's ledger.
func registersBy(n *Node, id string) int {
	lg, unlock := n.rep.ReadLog()
	defer unlock()
	k := 0
	for _, e := range lg.Entries() {
		if e.Kind == ledger.KindMachineReg && e.AuthorString() == id {
			k++
		}
	}
	return k
}

func oneLineErr(t *testing.T, what string, err error, code int, says ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want one saying %q", what, says)
	}
	msg := err.Error()
	if statusCode(err) != code || strings.ContainsAny(msg, "\n\r") {
		t.Fatalf("%s: %q (HTTP %d), want one line with HTTP %d", what, msg, statusCode(err), code)
	}
	for _, s := range says {
		if !strings.Contains(msg, s) {
			t.Fatalf("%s: %q does not say %q", what, msg, s)
		}
	}
}

// TestWitnessExpiredInvite: a joiner whose clock is set back an hour
// redeems an invite that expired a minute ago: its own clock lets it
// through, the witness (the issuing machine) refuses on its clock, and no
// register is written. A modified client then writes registers anyway:
// without a witness (its entry back-dated by its clock), with a witness it
// signed itself, with a genuine witness dated after the expiry, with that
// witness's time altered, and with a genuine witness for another joiner.
// None has effect on any node.
func TestWitnessExpiredInvite(t *testing.T) {
	noBlock(t)
	m := newMesh(t, meshConfig{n: 3, interval: 250 * time.Millisecond})
	ctx := ctxT(t)
	all := m.nodes
	m.nodes = all[:2]
	m.formOrg()
	m.nodes = all
	n0, n1, jn := all[0], all[1], all[2]
	// The joiner's clock is an hour behind.
	m.stop(2)
	jn.opts.Now = func() time.Time { return time.Now().Add(-time.Hour) }
	m.restart(2)
	j, jid := jn.Node, jn.ID().String()
	org := n0.rep.Org()

	expires := time.Now().Add(-time.Minute).UnixMilli()
	c := n0.signer.SignCapability(ledger.Capability{Org: org, Kind: ledger.CapInvite, ID: randomID(), Role: ledger.RoleMember, Expires: expires})
	tok := ledger.Token{Cap: c, Addrs: n0.orgs.BootstrapAddrs()}
	_, err := j.orgs.Join(ctx, api.JoinRequest{OrgKey: tok.Encode()})
	oneLineErr(t, "join with an expired invite", err, http.StatusForbidden,
		"this invite expired at "+api.FormatTime(time.UnixMilli(expires)), "(clock of machine n0)", "ask an admin for a new one")
	for _, mn := range all {
		if k := registersBy(mn.Node, jid); k != 0 {
			t.Fatalf("%s has %d registers of the refused joiner", mn.name, k)
		}
	}
	if k := entryCount(j); k != 0 {
		t.Fatalf("the refused joiner holds %d entries of the org", k)
	}

	// The modified client: it holds the ledger (through the current org
	// key) and writes.
	holdOrgKey(t, j, n0.Node, all[:2])
	if err := j.rep.CatchUp(ctx, n0.ID(), org); err != nil {
		t.Fatalf("catch up: %v", err)
	}
	if err := j.joinTopics(org); err != nil { // as Join does: the machines fetch from it
		t.Fatalf("join topics: %v", err)
	}
	before := j.opts.Now().UnixMilli()
	if before > expires {
		t.Fatalf("the joiner's clock reads %d, after the expiry %d", before, expires)
	}
	late := n0.signer.SignWitness(c, jid, time.Now().UnixMilli())
	altered := late
	altered.Time = expires - 1000
	self := j.signer.SignWitness(c, jid, expires-1000)
	other := n1.signer.SignWitness(c, n0.ID().String(), expires-1000)
	cases := []struct {
		name string
		w    *ledger.Witness
	}{
		{"no witness, back-dated entry", nil},
		{"self-signed witness", &self},
		{"genuine witness after the expiry", &late},
		{"witness time altered", &altered},
		{"witness for another joiner", &other},
	}
	var es []*ledger.Entry
	for _, cs := range cases {
		es = append(es, forceRegister(t, j, ledger.MachineRegister{Name: "forger", Cap: c, Witness: cs.w}, all))
		if e := es[len(es)-1]; e.Time > expires {
			t.Fatalf("%s: the entry's time %d is not back-dated (expiry %d)", cs.name, e.Time, expires)
		}
	}
	got := effective(t, all, es...)
	for _, mn := range all {
		for i, cs := range cases {
			if got[mn.name][i] {
				t.Errorf("%s: register with %s is effective", mn.name, cs.name)
			}
		}
		if st := machineStatus(mn.Node, jid); st != "" {
			t.Errorf("%s: the forger is a machine, %q", mn.name, st)
		}
	}
}

// TestWitnessInviteUses: an invite with one use, redeemed by two machines,
// admits one. The second is refused by the witness; forcing its register
// with a genuine witness got earlier from another machine is ineffective
// everywhere (uses count in ledger order). Two joiners that register at
// once with witnesses from different machines, neither seeing the other:
// exactly one is admitted, the same one on every node.
func TestWitnessInviteUses(t *testing.T) {
	noBlock(t)
	m := newMesh(t, meshConfig{n: 6, interval: 250 * time.Millisecond})
	ctx := ctxT(t)
	all := m.nodes
	m.nodes = all[:2]
	m.formOrg()
	m.nodes = all
	n0, n1, j1, j2, j3, j4 := all[0], all[1], all[2], all[3], all[4], all[5]
	org := n0.rep.Org()
	inviteOnce := func() (string, ledger.Token) {
		res, err := n0.orgs.Invite(ctx, api.InviteRequest{Uses: 1})
		if err != nil {
			t.Fatalf("invite: %v", err)
		}
		tok, err := ledger.ParseToken(res.Key)
		if err != nil {
			t.Fatal(err)
		}
		return res.Key, tok
	}

	// Sequential: j2 gets a witness from n1 first and keeps it; j1 joins.
	key, tok := inviteOnce()
	prepJoin(t, j2.Node, tok, n1)
	w2, err := p2p.RequestWitness(ctx, j2.host.LibP2P(), n1.ID(), org, tok.Cap)
	if err != nil {
		t.Fatalf("witness from n1: %v", err)
	}
	res, err := j1.orgs.Join(ctx, api.JoinRequest{OrgKey: key})
	if err != nil || res.Status != ledger.MachineApproved {
		t.Fatalf("j1 join: %+v, %v; want approved", res, err)
	}
	j1id := j1.ID().String()
	eventually(t, 30*time.Second, "j1 approved on n0 and n1", func() string {
		for _, mn := range all[:2] {
			if st := machineStatus(mn.Node, j1id); st != ledger.MachineApproved {
				return mn.name + " sees " + st
			}
		}
		return ""
	})
	_, err = j2.orgs.Join(ctx, api.JoinRequest{OrgKey: key})
	oneLineErr(t, "second redemption", err, http.StatusForbidden, "this invite has been used 1 of 1 times", "ask an admin for a new one")
	if k := registersBy(j2.Node, j2.ID().String()); k != 0 {
		t.Fatalf("the refused join wrote %d registers", k)
	}
	holdOrgKey(t, j2.Node, n0.Node, all[:3])
	// j2 has seen j1's register (a joiner gets the ledger's heads, not the
	// heartbeats that name them: it may take a periodic announcement).
	eventually(t, 10*time.Second, "j2 to have j1's register", func() string {
		if registersBy(j2.Node, j1id) == 0 {
			return "not yet"
		}
		return ""
	})
	e2 := forceRegister(t, j2.Node, ledger.MachineRegister{Name: "j2", Cap: tok.Cap, Witness: &w2}, all[:3])
	on := []*meshNode{n0, n1, j1, j2}
	got := effective(t, on, e2)
	for _, mn := range on {
		if got[mn.name][0] {
			t.Errorf("%s: the over-used register is effective", mn.name)
		}
		if st := machineStatus(mn.Node, j2.ID().String()); st != "" {
			t.Errorf("%s: the second joiner is a machine, %q", mn.name, st)
		}
		if st := machineStatus(mn.Node, j1id); st != ledger.MachineApproved {
			t.Errorf("%s: the first joiner is %q", mn.name, st)
		}
	}

	// Concurrent: j3 and j4 hold the ledger, get witnesses from n0 and n1,
	// and register before either sees the other's register.
	_, tok = inviteOnce()
	prepJoin(t, j3.Node, tok, n1, j1)
	prepJoin(t, j4.Node, tok, n1, j1)
	w3, err := p2p.RequestWitness(ctx, j3.host.LibP2P(), n0.ID(), org, tok.Cap)
	if err != nil {
		t.Fatalf("witness from n0: %v", err)
	}
	w4, err := p2p.RequestWitness(ctx, j4.host.LibP2P(), n1.ID(), org, tok.Cap)
	if err != nil {
		t.Fatalf("witness from n1: %v", err)
	}
	e3, _ := j3.rep.Write(ctx, ledger.KindMachineReg, ledger.MachineRegister{Name: "j3", Cap: tok.Cap, Witness: &w3})
	e4, _ := j4.rep.Write(ctx, ledger.KindMachineReg, ledger.MachineRegister{Name: "j4", Cap: tok.Cap, Witness: &w4})
	if e3 == nil || e4 == nil {
		t.Fatal("a register was not written")
	}
	on = []*meshNode{n0, n1, j1, j3, j4}
	for _, e := range []struct {
		from *Node
		e    *ledger.Entry
	}{{j3.Node, e3}, {j4.Node, e4}} {
		for _, o := range []*meshNode{n0, n1, j1} {
			// To the machines of the org: a joiner serves no other
			// joiner (the closed org); j3 and j4 learn each other's
			// register from the machines.
			if e.from.rep.IsApproved(o.ID()) {
				if err := e.from.host.Connect(ctx, o.Addrs()); err != nil {
					t.Fatalf("connect to %s: %v", o.name, err)
				}
				if err := p2p.AnnounceHeads(ctx, e.from.host.LibP2P(), o.ID(), org, []cid.Cid{e.e.CID()}); err != nil {
					t.Fatalf("announce to %s: %v", o.name, err)
				}
			}
		}
	}
	got = effective(t, []*meshNode{n0, n1, j1}, e3, e4)
	want := got["n0"]
	if want[0] == want[1] {
		t.Fatalf("n0: registers effective %v, want exactly one", want)
	}
	winner, loser := j3, j4
	if want[1] {
		winner, loser = j4, j3
	}
	// The loser is no machine of the org, so (a closed org) it is served
	// nothing more, the winner's register included: only the machines and
	// the winner are asked to agree.
	on = []*meshNode{n0, n1, j1, winner}
	got = effective(t, on, e3, e4)
	for _, mn := range on {
		if g := got[mn.name]; g[0] != want[0] || g[1] != want[1] {
			t.Errorf("%s: registers effective %v, n0 says %v", mn.name, g, want)
		}
	}
	eventually(t, 30*time.Second, "one of the two admitted everywhere", func() string {
		for _, mn := range on {
			if st := machineStatus(mn.Node, winner.ID().String()); st != ledger.MachineApproved {
				return fmt.Sprintf("%s sees %s as %q", mn.name, winner.name, st)
			}
			if st := machineStatus(mn.Node, loser.ID().String()); st != "" {
				return fmt.Sprintf("%s sees %s as %q", mn.name, loser.name, st)
			}
		}
		return ""
	})
}

// TestWitnessRefusals: the witness's own refusals, through the protocol: a
// machine that is not approved, an org key that was rotated, an invite
// whose issuer is no admin, another org; and one joiner asking twice for
// the last use is witnessed twice, while a second joiner is told the use
// is being redeemed.
func TestWitnessRefusals(t *testing.T) {
	m := newMesh(t, meshConfig{n: 4, interval: 250 * time.Millisecond})
	ctx := ctxT(t)
	all := m.nodes
	m.nodes = all[:2]
	m.formOrg()
	m.nodes = all
	n0, n1, ja, jb := all[0], all[1], all[2], all[3]
	org := n0.rep.Org()
	for _, j := range []*meshNode{ja, jb} {
		for _, o := range all[:2] {
			if err := j.host.Connect(ctx, o.Addrs()); err != nil {
				t.Fatal(err)
			}
		}
	}
	ask := func(j, w *meshNode, c ledger.Capability) error {
		_, err := p2p.RequestWitness(ctx, j.host.LibP2P(), w.ID(), org, c)
		return err
	}
	inv := func(s *ledger.Signer, uses int64) ledger.Capability {
		return s.SignCapability(ledger.Capability{Org: org, Kind: ledger.CapInvite, ID: randomID(), Role: ledger.RoleMember, Uses: uses})
	}
	// Pending machine: jb registers with the org key (approval required).
	key, err := n0.orgs.OrgKey(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jb.orgs.Join(ctx, api.JoinRequest{OrgKey: key.Key}); err != nil {
		t.Fatalf("jb join: %v", err)
	}
	if err := ja.host.Connect(ctx, jb.Addrs()); err != nil {
		t.Fatal(err)
	}
	okc := inv(n0.signer, 0)
	for _, c := range []struct {
		name string
		j, w *meshNode
		c    ledger.Capability
		says string
	}{
		{"not approved (pending)", ja, jb, okc, "is not an approved machine of org"},
		{"issuer not an admin", ja, n0, inv(n1.signer, 0), "which is not an approved machine of an admin"},
		{"rotated org key", ja, n0, n0.signer.SignCapability(ledger.Capability{Org: org, Kind: ledger.CapOrgKey, ID: "old", Role: ledger.RoleMember, Uses: 3}), "this org key was rotated"},
	} {
		err := ask(c.j, c.w, c.c)
		if err == nil || !strings.Contains(err.Error(), c.says) || strings.ContainsAny(err.Error(), "\n\r") {
			t.Errorf("%s: %v; want a one-line refusal saying %q", c.name, err, c.says)
		}
	}
	// Another org: a node with no org refuses.
	fresh := newMesh(t, meshConfig{n: 1, interval: 250 * time.Millisecond}).nodes[0]
	if err := ja.host.Connect(ctx, fresh.Addrs()); err != nil {
		t.Fatal(err)
	}
	if err := ask(ja, fresh, okc); err == nil || !strings.Contains(err.Error(), "is not in org") {
		t.Errorf("no org: %v; want a refusal saying it is not in the org", err)
	}

	// The last use: ja asks twice (witnessed twice), jb is told to wait.
	once := inv(n0.signer, 1)
	if err := ask(ja, n0, once); err != nil {
		t.Fatalf("first witness: %v", err)
	}
	if err := ask(ja, n0, once); err != nil {
		t.Fatalf("the same joiner again: %v", err)
	}
	if err := ask(jb, n0, once); err == nil || !strings.Contains(err.Error(), "is witnessing 1 more redemption(s) of it now") {
		t.Fatalf("another joiner for the held use: %v", err)
	}
}

func randomID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
