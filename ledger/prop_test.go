package ledger

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// replica is one actor's node: its own incremental Log, fed by its own writes
// and by syncs with others.
type replica struct {
	a    *actor
	view *Log
}

// dagGen builds a random DAG of signed entries written by several replicas
// that sync now and then, so there are concurrent branches, back-dated
// entries, power struggles and plenty of entries without authority.
type dagGen struct {
	t    *testing.T
	rt   *rapid.T
	org  string
	now  int64
	reps []*replica
	all  []*Entry // every entry, in creation order (a topological order)
	keys int
	pat  *actor // a person (not a machine) who may delegate replicas 3 and 5
}

func newDagGen(t *testing.T, rt *rapid.T, actors []*actor) *dagGen {
	g := &dagGen{t: t, rt: rt, now: 1_700_000_000_000, pat: newActor(t, 99)}
	for _, a := range actors {
		g.reps = append(g.reps, &replica{a: a, view: newLog(rapid.IntRange(1, 6).Draw(rt, "cpEvery"), 3)})
	}
	owner := g.reps[0]
	gen := sign(t, owner.a, "", KindGenesis, Genesis{Name: "prop", OrgKeyID: "k0", Settings: DefaultSettings()}, g.now)
	g.org = gen.CID().String()
	g.add(owner, gen)
	// A starting org: two admins and a member by invite, one machine pending
	// on the org key. Everyone hears of it.
	// Replica 3 acts for a person of its own (pat), who may later join
	// replica 5 too: two machines, one member.
	for i, role := range []string{RoleAdmin, RoleAdmin, RoleMember} {
		r := g.reps[1+i]
		g.sync(r, owner)
		g.write(r, KindMachineReg, g.reg(r.a, g.invite(owner.a, role, 1, 0), owner.a, 1+i == 3), nil)
		g.sync(owner, r)
	}
	g.sync(g.reps[4], owner)
	g.write(g.reps[4], KindMachineReg, MachineRegister{Cap: g.orgKey(owner.a, "k0")}, nil)
	for _, r := range g.reps {
		for _, o := range g.reps {
			g.sync(r, o)
		}
	}
	return g
}

func (g *dagGen) add(r *replica, e *Entry) {
	if _, err := r.view.Add(e); err != nil {
		g.t.Fatalf("replica %s: add own %s: %v", r.a.id, e.Kind, err)
	}
	g.all = append(g.all, e)
}

// sync gives r every entry o has that r lacks, in one batch in random order.
func (g *dagGen) sync(r, o *replica) {
	var missing []*Entry
	for _, e := range o.view.Entries() {
		if !r.view.Has(e.CID()) {
			missing = append(missing, e)
		}
	}
	rand.New(rand.NewPCG(uint64(len(g.all)), uint64(len(missing)))).Shuffle(len(missing), func(i, j int) {
		missing[i], missing[j] = missing[j], missing[i]
	})
	if _, err := r.view.AddBatch(missing); err != nil {
		g.t.Fatalf("sync: %v", err)
	}
}

// write signs an entry by r on its heads, or on the given parents.
func (g *dagGen) write(r *replica, kind string, p any, parents []*Entry) *Entry {
	if parents == nil {
		hs, _ := r.view.Heads()
		for _, c := range hs {
			parents = append(parents, r.view.Get(c))
		}
	}
	g.now += int64(rapid.IntRange(1, 3).Draw(g.rt, "dt"))
	e := sign(g.t, r.a, g.org, kind, p, g.now, parents...)
	g.add(r, e)
	return e
}

func (g *dagGen) invite(issuer *actor, role string, uses, expires int64) Capability {
	g.keys++
	return issuer.s.SignCapability(Capability{Org: g.org, Kind: CapInvite, ID: fmt.Sprintf("i%d", g.keys), Role: role, Uses: uses, Expires: expires})
}

// reg is joiner's register payload for c, witnessed by witness at the
// current time (none if witness is nil), delegated by pat if asPat.
func (g *dagGen) reg(joiner *actor, c Capability, witness *actor, asPat bool) MachineRegister {
	p := MachineRegister{Cap: c}
	if witness != nil {
		wt := witness.s.SignWitness(c, joiner.id, g.now)
		p.Witness = &wt
	}
	if asPat {
		d := g.pat.s.SignDelegation("pat", joiner.id, g.org)
		p.Delegation = &d
	}
	return p
}

func (g *dagGen) orgKey(issuer *actor, id string) Capability {
	return issuer.s.SignCapability(Capability{Org: g.org, Kind: CapOrgKey, ID: id, Role: RoleMember})
}

func (g *dagGen) pick(label string) *replica {
	return g.reps[rapid.IntRange(0, len(g.reps)-1).Draw(g.rt, label)]
}

// step does one random thing: a write (on the replica's heads or, now and
// then, on stale parents), a sync, or a power struggle.
func (g *dagGen) step() {
	rt := g.rt
	op := rapid.IntRange(0, 18).Draw(rt, "op")
	r := g.pick("who")
	target := g.pick("target").a.id
	if rapid.IntRange(0, 5).Draw(rt, "topat") == 0 {
		target = g.pat.id
	}
	st := r.view.State()
	var parents []*Entry
	if rapid.IntRange(0, 9).Draw(rt, "stale") == 0 {
		// Back-dated: parents chosen among old entries of its view.
		es := r.view.Entries()
		n := rapid.IntRange(1, 2).Draw(rt, "nparents")
		for i := 0; i < n; i++ {
			parents = append(parents, es[rapid.IntRange(0, len(es)-1).Draw(rt, "parent")])
		}
	}
	jobID := func() string {
		js := st.SortedJobs()
		if len(js) == 0 || rapid.IntRange(0, 9).Draw(rt, "nojob") == 0 {
			return "nope"
		}
		return js[rapid.IntRange(0, len(js)-1).Draw(rt, "job")].ID
	}
	switch op {
	case 17, 18: // a checkpoint: of the replica's State, on its heads (or stale parents: a wrong hash)
		var prev string
		if t := r.view.Top(); t.Entry != nil {
			prev = t.Entry.CID().String()
		}
		g.write(r, KindCheckpoint, Checkpoint{Prev: prev, Entries: st.Applied + st.Ineffective, Hash: r.view.StateHash()}, parents)
	case 0, 1: // sync
		g.sync(r, g.pick("peer"))
	case 2: // join
		issuer := g.pick("issuer").a
		var c Capability
		if rapid.Bool().Draw(rt, "invite") {
			role := rapid.SampledFrom([]string{RoleMember, RoleAdmin, RoleOwner}).Draw(rt, "role")
			exp := rapid.SampledFrom([]int64{0, g.now - 5, g.now + 50}).Draw(rt, "expires")
			c = g.invite(issuer, role, int64(rapid.IntRange(0, 2).Draw(rt, "uses")), exp)
		} else {
			c = g.orgKey(issuer, rapid.SampledFrom([]string{"k0", "k1", st.OrgKeyID}).Draw(rt, "keyid"))
		}
		var witness *actor
		if rapid.IntRange(0, 4).Draw(rt, "nowitness") > 0 {
			witness = g.pick("witness").a
		}
		asPat := (r == g.reps[3] || r == g.reps[5]) && rapid.Bool().Draw(rt, "aspat")
		g.write(r, KindMachineReg, g.reg(r.a, c, witness, asPat), parents)
	case 3:
		g.write(r, rapid.SampledFrom([]string{KindMachineApprove, KindMachineReject, KindMachineRemove}).Draw(rt, "mkind"),
			MachineRef{Machine: target}, parents)
	case 4, 5:
		g.write(r, KindMemberRole, MemberRole{Member: target, Role: rapid.SampledFrom([]string{RoleMember, RoleAdmin}).Draw(rt, "newrole")}, parents)
	case 6:
		g.write(r, KindMemberRemove, MemberRef{Member: target}, parents)
	case 7:
		g.keys++
		g.write(r, KindOrgKey, OrgKey{KeyID: fmt.Sprintf("k%d", g.keys%3)}, parents)
	case 8:
		g.write(r, KindOrgUpdate, OrgUpdate{RequireMachineApproval: ptr(rapid.Bool().Draw(rt, "approval")),
			PreemptPolicy: ptr(rapid.SampledFrom([]string{"passive", "aggressive", "bogus"}).Draw(rt, "preempt"))}, parents)
	case 9, 10:
		g.write(r, KindJobSubmit, JobSpec{Driver: "exec", Cmd: []string{"x"}, RangeStart: 1,
			RangeEnd: int64(rapid.IntRange(1, 4).Draw(rt, "items")), Priority: 5, CPUs: 1,
			Retries: int64(rapid.IntRange(0, 1).Draw(rt, "retries")), Nonce: []byte{byte(g.now)}}, parents)
	case 11:
		if rapid.Bool().Draw(rt, "cancel") {
			g.write(r, KindJobCancel, JobRef{Job: jobID()}, parents)
		} else {
			g.write(r, KindJobModify, JobModify{Job: jobID(), Priority: i64(int64(rapid.IntRange(0, 9).Draw(rt, "prio")))}, parents)
		}
	case 12, 13:
		var res []ItemResult
		for i := rapid.IntRange(1, 3).Draw(rt, "nres"); i > 0; i-- {
			res = append(res, ItemResult{Item: int64(rapid.IntRange(0, 5).Draw(rt, "item")), Code: int64(rapid.IntRange(0, 1).Draw(rt, "code"))})
		}
		g.write(r, KindJobResults, JobResults{Job: jobID(), Results: res}, parents)
	case 14:
		if rapid.IntRange(0, 3).Draw(rt, "transfer") == 0 {
			g.write(r, KindOrgTransfer, OrgTransfer{To: target}, parents)
			return
		}
		g.write(r, KindMachineUpdate, MachineUpdate{Hardware: Hardware{CPUs: int64(rapid.IntRange(1, 64).Draw(rt, "cpus"))}}, parents)
	default: // a power struggle: two replicas revoke each other unaware
		o := g.pick("rival")
		if o == r {
			return
		}
		kind := rapid.SampledFrom([]string{KindMemberRemove, KindMemberRole}).Draw(rt, "struggle")
		pr := func(x *replica, y *actor) any {
			if kind == KindMemberRemove {
				return MemberRef{Member: y.id}
			}
			return MemberRole{Member: y.id, Role: RoleMember}
		}
		g.write(r, kind, pr(r, o.a), nil)
		g.write(o, kind, pr(o, r.a), nil)
	}
}

// topoOrder is a random topological order of es (parents before children).
func topoOrder(es []*Entry, rng *rand.Rand) []*Entry {
	in := map[string]bool{}
	for _, e := range es {
		in[e.Key().CID] = true
	}
	children := map[string][]*Entry{}
	waiting := map[*Entry]int{}
	var ready []*Entry
	for _, e := range es {
		n := 0
		for _, p := range e.Parents {
			if in[p.KeyString()] {
				n++
				children[p.KeyString()] = append(children[p.KeyString()], e)
			}
		}
		waiting[e] = n
		if n == 0 {
			ready = append(ready, e)
		}
	}
	out := make([]*Entry, 0, len(es))
	for len(ready) > 0 {
		i := rng.IntN(len(ready))
		e := ready[i]
		ready[i] = ready[len(ready)-1]
		ready = ready[:len(ready)-1]
		out = append(out, e)
		for _, c := range children[e.Key().CID] {
			if waiting[c]--; waiting[c] == 0 {
				ready = append(ready, c)
			}
		}
	}
	return out
}

// TestPropertyDeliveryOrder: whatever order and batches a random DAG is
// delivered in, every Log folds it to the same State, with the same verdict
// on every entry; and the "revocation wins" rule holds in the result.
func TestPropertyDeliveryOrder(t *testing.T) {
	var actors []*actor
	for i := 0; i < 6; i++ {
		actors = append(actors, newActor(t, byte(1+i)))
	}
	stats := map[string]int{}
	rapid.Check(t, func(rt *rapid.T) {
		g := newDagGen(t, rt, actors)
		for n := rapid.IntRange(5, 60).Draw(rt, "steps"); n > 0; n-- {
			g.step()
		}
		rng := rand.New(rand.NewPCG(rapid.Uint64().Draw(rt, "seed"), 7))

		// The reference: everything in one batch, in random order.
		ref := NewLog()
		all := append([]*Entry(nil), g.all...)
		rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
		if _, err := ref.AddBatch(all); err != nil {
			rt.Fatalf("batch load: %v", err)
		}
		want := ref.State().Hash()
		same := func(name string, l *Log) {
			if l.Len() != ref.Len() {
				rt.Fatalf("%s: %d entries, want %d", name, l.Len(), ref.Len())
			}
			if got := l.State().Hash(); got != want {
				rt.Fatalf("%s: state hash differs from the batch load\n got  %+v\n want %+v", name, l.State(), ref.State())
			}
			for _, e := range g.all {
				if l.Effective(e.CID()) != ref.Effective(e.CID()) {
					rt.Fatalf("%s: %s by %s: effective %v, batch load says %v", name, e.Kind, e.AuthorString(),
						l.Effective(e.CID()), ref.Effective(e.CID()))
				}
			}
		}
		// Delivered one by one, in random topological orders.
		for k := 0; k < 2; k++ {
			l := newLog(1+rng.IntN(5), 2+rng.IntN(3))
			for _, e := range topoOrder(g.all, rng) {
				if _, err := l.Add(e); err != nil {
					rt.Fatalf("add: %v", err)
				}
			}
			same(fmt.Sprintf("one-by-one #%d", k), l)
		}
		// In random chunks, each shuffled.
		for k := 0; k < 2; k++ {
			l := newLog(1+rng.IntN(5), 2+rng.IntN(3))
			order := topoOrder(g.all, rng)
			for len(order) > 0 {
				n := min(len(order), 1+rng.IntN(8))
				chunk := append([]*Entry(nil), order[:n]...)
				order = order[n:]
				rng.Shuffle(len(chunk), func(i, j int) { chunk[i], chunk[j] = chunk[j], chunk[i] })
				if _, err := l.AddBatch(chunk); err != nil {
					rt.Fatalf("chunk: %v", err)
				}
			}
			same(fmt.Sprintf("chunks #%d", k), l)
		}
		g.converge(same)
		// Adding again changes nothing.
		if _, err := ref.AddBatch(g.all); err != nil || ref.State().Hash() != want {
			rt.Fatalf("re-adding changed the state: %v", err)
		}
		checkRevocationWins(rt, ref)
		checkBarriers(rt, ref, stats)
		for _, n := range ref.order {
			if n.applied {
				stats["effective"]++
			} else if n.void {
				stats["void"]++
			} else {
				stats["no effect"]++
			}
			if n.revoked {
				stats["revocations"]++
			}
		}
		stats["runs"]++
	})
	t.Logf("entries over all runs: %v", stats)
	if stats["void"] == 0 || stats["revocations"] == 0 || stats["effective"] == 0 || stats["no effect"] == 0 {
		t.Fatalf("the generator did not exercise every verdict: %v", stats)
	}
}

// checkRevocationWins: after any effective revocation R of A, no entry by A
// that sorts before R and is not an ancestor of R has an effect.
func checkRevocationWins(rt *rapid.T, l *Log) {
	for _, r := range l.revs {
		if !r.revoked {
			continue
		}
		for _, n := range l.byPerson[r.target] {
			if n.seg == r.seg && n.before(r) && !l.isAncestor(n, r) && n.applied {
				rt.Fatalf("%s by %s is effective though %s revoked its author without seeing it", n.e.Kind, r.target, r.e.Kind)
			}
		}
	}
}

// checkBarriers: every barrier's position holds the fold of its ancestors;
// a checkpoint written on its author's heads names that State's hash; a
// Log started at the top (when the top is such a checkpoint and took
// effect) and given the tail, in any order, reaches the State of the whole.
func checkBarriers(rt *rapid.T, l *Log, stats map[string]int) {
	for _, b := range l.bar.chain {
		pos := l.posOf(b)
		for _, n := range l.order[:pos] {
			if n.seg > b.seg || !l.isAncestor(n, b) {
				rt.Fatalf("%s sorts before barrier %s but is not its ancestor", n.e.Kind, b.key.CID)
			}
		}
		for _, n := range l.order[pos+1:] {
			if l.isAncestor(n, b) {
				rt.Fatalf("%s is an ancestor of barrier %s but sorts after it", n.e.Kind, b.key.CID)
			}
		}
		stats["barriers"]++
	}
	top := l.Top()
	if top.Entry == nil {
		return
	}
	st, below, err := l.AtBarrier(top.Entry)
	if err != nil {
		rt.Fatalf("AtBarrier: %v", err)
	}
	j, err := NewLogAt(st, top.Entry, top.Depth, below)
	if err != nil {
		stats["no join: "+strings.SplitN(err.Error(), ":", 2)[0]]++
		return
	}
	tail := l.Tail()
	rng := rand.New(rand.NewPCG(uint64(len(tail)), 3))
	rng.Shuffle(len(tail), func(i, k int) { tail[i], tail[k] = tail[k], tail[i] })
	if _, err := j.AddBatch(tail); err != nil {
		rt.Fatalf("joiner: tail: %v", err)
	}
	if got, want := j.StateHash(), l.StateHash(); got != want {
		rt.Fatalf("a Log started at the top reaches %s, the whole ledger %s\n got  %+v\n want %+v", got, want, j.State(), l.State())
	}
	// A sync answer sends the top's ancestors again, with everything
	// after them: nothing changes.
	all := l.Entries()
	_, _ = j.AddBatch(all[rng.IntN(len(all)):])
	if got, want := j.StateHash(), l.StateHash(); got != want {
		rt.Fatalf("a Log started at the top, sent entries again, reaches %s, the whole ledger %s", got, want)
	}
	stats["joins"]++
}
