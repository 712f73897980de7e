package ledger

import "slices"

// "Revocation wins" (docs/design.md §6): which entries a revocation voids, and
// the fixed point the log re-folds to. Everything here is a function of the
// set of entries (the DAG and the delegations in it), never of the order
// they came in.

// resolve re-folds after a change that may change the void set, and
// recomputes that set: "revocation wins" (docs/design.md §6).
//
// When an effective entry R revokes (removes or demotes) member A, every entry
// by A that sorts before R and is not an ancestor of R (R's author had not
// seen it) is void: it is kept with no effect. Entries by A that sort after R
// need no rule: they are applied to a State in which A has lost the role.
//
// When a revocation R by X of A fails because X had been revoked by a
// concurrent R' of A (R' is not an ancestor of R), the two void each other;
// the stronger side wins: the higher role (at the time of the revocation),
// then the earlier grant of that role, then the lower revocation CID. If X
// wins, R' is overridden: void, so that R takes effect.
//
// The void set is computed from scratch, as a function of the set of entries
// alone: start with no voids, fold, derive the voids, and repeat until the
// set is stable. Voids are sticky within that computation: a revocation that
// took effect in some round keeps its entries void even if, with them void,
// it no longer takes effect (say R removes A, and A's concurrent re-join
// sorts before R: voiding the re-join makes R moot, but A stays out). Only
// an override lifts a revocation's voids. So both the set of revocations that
// contributed voids and the set of overridden ones only grow, and the
// computation ends within 2*len(revs)+1 rounds. Each round re-folds only from
// the first position where the void set changed.
func (l *Log) resolve(minPos int) {
	from := minPos
	if len(l.void) > 0 {
		from = min(from, l.firstPos(l.void))
		l.setVoid(map[*node]bool{})
	}
	contributed, overridden := map[*node]bool{}, map[*node]bool{}
	for round := 0; round <= 2*len(l.revs)+1; round++ {
		l.foldFrom(from)
		next := l.computeVoid(contributed, overridden)
		if sameSet(next, l.void) {
			return
		}
		from = min(l.firstPos(symDiff(next, l.void)), len(l.order))
		l.setVoid(next)
	}
	panic("ledger: void set did not converge") // unreachable: see above
}

func (l *Log) setVoid(v map[*node]bool) {
	for n := range l.void {
		n.void = false
	}
	for n := range v {
		n.void = true
	}
	l.void = v
}

func (l *Log) firstPos(set map[*node]bool) int {
	p := len(l.order)
	for n := range set {
		p = min(p, l.posOf(n))
	}
	return p
}

func symDiff(a, b map[*node]bool) map[*node]bool {
	d := map[*node]bool{}
	for n := range a {
		if !b[n] {
			d[n] = true
		}
	}
	for n := range b {
		if !a[n] {
			d[n] = true
		}
	}
	return d
}

// computeVoid derives the void set from the last fold and the revocations
// that contributed or were overridden in earlier rounds. The result does not
// depend on the order of l.revs: each check reads only the fold's facts.
func (l *Log) computeVoid(contributed, overridden map[*node]bool) map[*node]bool {
	for _, r := range l.revs {
		c := r.conflict
		if c == nil || r.target != c.By {
			continue
		}
		rp := l.nodes[c.Entry.CID]
		if rp == nil || rp == r || rp.seg != r.seg || overridden[rp] || l.isAncestor(rp, r) {
			continue
		}
		if stronger(c.TargetRank, c.TargetGrant, r.key, c.ByRank, c.ByGrant, rp.key) {
			overridden[rp] = true
		}
	}
	next := make(map[*node]bool, len(overridden))
	for n := range overridden {
		next[n] = true
	}
	for _, r := range l.revs {
		if r.revoked {
			contributed[r] = true
		}
	}
	for r := range contributed {
		if overridden[r] {
			continue
		}
		for _, n := range l.candidates(r) {
			next[n] = true
		}
	}
	return next
}

// candidates are the entries "revocation wins" voids when r takes effect: by
// r's target, sorting before r, not ancestors of r.
func (l *Log) candidates(r *node) []*node {
	list := l.byPerson[r.target]
	if r.candSeen == len(list) {
		return r.cand
	}
	var check []*node
	minClock := r.e.Clock
	for _, n := range list[r.candSeen:] {
		if n.seg == r.seg && n.before(r) { // within r's segment: a barrier's State never changes
			check = append(check, n)
			minClock = min(minClock, n.e.Clock)
		}
	}
	r.candSeen = len(list)
	if len(check) == 0 {
		return r.cand
	}
	if len(check) <= 4 {
		for _, n := range check {
			if !l.isAncestor(n, r) {
				r.cand = append(r.cand, n)
			}
		}
		return r.cand
	}
	anc := ancestors(r, minClock)
	for _, n := range check {
		if !anc[n] {
			r.cand = append(r.cand, n)
		}
	}
	return r.cand
}

// ancestors is the set of b's ancestors with clock >= minClock.
func ancestors(b *node, minClock uint64) map[*node]bool {
	seen := map[*node]bool{}
	stack := append([]*node(nil), b.parents...)
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[n] || n.e.Clock < minClock {
			continue
		}
		seen[n] = true
		stack = append(stack, n.parents...)
	}
	return seen
}

// notePerson records the person a genesis or machine.register entry's valid
// delegation names for its author machine, and files the machine's earlier
// entries under that person. Which machines act for which persons is then a
// fact of the set of entries alone (their own signed bytes), whatever the
// order they came in, so "revocation wins" finds a person's entries before
// any fold. A machine delegated by two persons (re-registered after a
// removal) files its entries under both: a revocation of either voids its
// concurrent entries, which errs on the side of the revocation.
func (l *Log) notePerson(e *Entry) {
	var d *Delegation
	var org string
	switch e.Kind {
	case KindGenesis:
		var p Genesis
		if DecodePayload(e.Payload, &p) != nil || p.Owner == nil {
			return
		}
		d, org = p.Owner, GenesisOrg(p.Nonce)
	case KindMachineReg:
		var p MachineRegister
		if DecodePayload(e.Payload, &p) != nil || p.Delegation == nil {
			return
		}
		d, org = p.Delegation, e.Org
	default:
		return
	}
	a := e.author
	id, err := d.Check(a, org)
	if err != nil || id == a || slices.Contains(l.persons[a], id) {
		return
	}
	l.persons[a] = append(l.persons[a], id)
	prior := l.byAuthor[a]
	l.byPerson[id] = append(l.byPerson[id], prior[:len(prior)-1]...) // e itself is filed by link
	if len(prior) > 1 {
		// The machine's earlier entries are now also the person's: a
		// revocation of the person may void them though e sorts after it.
		l.refiled = true
	}
}

func revTarget(e *Entry) string {
	switch e.Kind {
	case KindMemberRole:
		var p MemberRole
		if DecodePayload(e.Payload, &p) == nil {
			return p.Member
		}
	case KindMemberRemove:
		var p MemberRef
		if DecodePayload(e.Payload, &p) == nil {
			return p.Member
		}
	}
	return ""
}

// stronger reports whether side X (rank, grant, entry) beats side A.
func stronger(xRank int, xGrant, xEntry OrderKey, aRank int, aGrant, aEntry OrderKey) bool {
	if xRank != aRank {
		return xRank > aRank
	}
	if xGrant != aGrant {
		return xGrant.Less(aGrant)
	}
	return xEntry.CID < aEntry.CID
}

// isAncestor reports whether a is an ancestor of b.
func (l *Log) isAncestor(a, b *node) bool {
	if a.e.Clock >= b.e.Clock {
		return false
	}
	seen := map[*node]bool{}
	stack := append([]*node(nil), b.parents...)
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if n == a {
			return true
		}
		if seen[n] || n.e.Clock <= a.e.Clock {
			continue
		}
		seen[n] = true
		stack = append(stack, n.parents...)
	}
	return false
}

func sameSet(a, b map[*node]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}
