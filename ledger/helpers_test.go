package ledger

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"testing"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/crypto"
)

// actor is a test identity with a deterministic key.
type actor struct {
	s  *Signer
	id string
}

func newActor(tb testing.TB, seed byte) *actor {
	tb.Helper()
	var sd [32]byte
	sd[0], sd[31] = seed, 0x5a
	priv := ed25519.NewKeyFromSeed(sd[:])
	k, err := crypto.UnmarshalEd25519PrivateKey(priv)
	if err != nil {
		tb.Fatal(err)
	}
	s, err := NewSigner(k)
	if err != nil {
		tb.Fatal(err)
	}
	return &actor{s: s, id: s.ID().String()}
}

// sign builds an entry by a on the given parents (clock from the parents).
func sign(tb testing.TB, a *actor, org, kind string, payload any, t int64, parents ...*Entry) *Entry {
	tb.Helper()
	var ps []cid.Cid
	var clock uint64
	for _, p := range parents {
		ps = append(ps, p.CID())
		if p.Clock > clock {
			clock = p.Clock
		}
	}
	e, err := a.s.Sign(org, kind, payload, ps, clock, t)
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

func i64(v int64) *int64 { return &v }

// world is a scripted org: an owner, a genesis entry, a clock, and a
// reference Log that entries written with write are added to.
type world struct {
	t     testing.TB
	owner *actor
	gen   *Entry
	org   string
	now   int64
	log   *Log
}

func newWorld(t testing.TB) *world { t.Helper(); return newWorldNamed(t, "acme") }

func newWorldNamed(t testing.TB, name string) *world {
	t.Helper()
	w := &world{t: t, owner: newActor(t, 1), now: 1_700_000_000_000, log: NewLog()}
	w.gen = sign(t, w.owner, "", KindGenesis, Genesis{Name: name, OrgKeyID: "k1", Settings: DefaultSettings()}, w.now)
	w.org = w.gen.CID().String()
	w.mustAdd(w.gen)
	return w
}

func (w *world) tick() int64 { w.now++; return w.now }

// heads are the reference log's heads as entries.
func (w *world) heads() []*Entry {
	hs, _ := w.log.Heads()
	out := make([]*Entry, len(hs))
	for i, c := range hs {
		out[i] = w.log.Get(c)
	}
	return out
}

// on signs an entry by a on the given parents without adding it anywhere.
func (w *world) on(a *actor, kind string, p any, parents ...*Entry) *Entry {
	w.t.Helper()
	return sign(w.t, a, w.org, kind, p, w.tick(), parents...)
}

// write signs an entry by a on the reference log's heads and adds it; it
// returns the entry and its verdict.
func (w *world) write(a *actor, kind string, p any) (*Entry, error) {
	w.t.Helper()
	e := w.on(a, kind, p, w.heads()...)
	return e, w.mustAdd(e)
}

// ok is write that must take effect.
func (w *world) ok(a *actor, kind string, p any) *Entry {
	w.t.Helper()
	e, err := w.write(a, kind, p)
	if err != nil {
		w.t.Fatalf("%s by %s: %v", kind, a.id, err)
	}
	return e
}

// denied is write that must have no effect, with a verdict wrapping want.
func (w *world) denied(want error, a *actor, kind string, p any) *Entry {
	w.t.Helper()
	before := w.log.State().Hash()
	e, err := w.write(a, kind, p)
	if err == nil {
		w.t.Fatalf("%s by %s took effect, want %v", kind, a.id, want)
	}
	if !errors.Is(err, want) {
		w.t.Fatalf("%s by %s: verdict %v, want %v", kind, a.id, err, want)
	}
	st := w.log.State().Clone()
	uncount(st, e) // the only change an ineffective entry makes
	if st.Hash() != before {
		w.t.Fatalf("%s by %s had no effect but changed the state", kind, a.id)
	}
	return e
}

// mustAdd adds e to the reference log; it fails the test if e cannot be
// added, and returns its verdict.
func (w *world) mustAdd(e *Entry) error {
	w.t.Helper()
	v, err := w.log.Add(e)
	if err != nil {
		w.t.Fatalf("add %s: %v", e.Kind, err)
	}
	return v
}

func (w *world) invite(issuer *actor, role string, uses, expires int64) Capability {
	return issuer.s.SignCapability(Capability{Org: w.org, Kind: CapInvite, ID: fmt.Sprintf("inv-%d", w.tick()),
		Role: role, Uses: uses, Expires: expires})
}

func (w *world) orgKey(issuer *actor, id string) Capability {
	return issuer.s.SignCapability(Capability{Org: w.org, Kind: CapOrgKey, ID: id, Role: RoleMember})
}

// join registers a's machine with c, witnessed by the owner's machine now
// when c needs a witness.
func (w *world) join(a *actor, c Capability) (*Entry, error) {
	w.t.Helper()
	return w.write(a, KindMachineReg, w.register(a, c))
}

// register is a's machine.register payload for c, witnessed by the owner's
// machine at the world's time when c needs a witness.
func (w *world) register(a *actor, c Capability) MachineRegister {
	p := MachineRegister{Name: "m-" + a.id[len(a.id)-4:], Cap: c}
	if NeedsWitness(c) {
		wt := w.owner.s.SignWitness(c, a.id, w.now)
		p.Witness = &wt
	}
	return p
}

// member adds a new approved member with role, invited by the owner.
func (w *world) member(seed byte, role string) *actor {
	w.t.Helper()
	a := newActor(w.t, seed)
	if _, err := w.join(a, w.invite(w.owner, role, 1, 0)); err != nil {
		w.t.Fatalf("join %d: %v", seed, err)
	}
	if got := w.log.State().Role(a.id); got != role {
		w.t.Fatalf("member %d has role %q, want %q", seed, got, role)
	}
	return a
}

// submit submits a job with items 1..n and the given retries.
func (w *world) submit(a *actor, n, retries int64) string {
	w.t.Helper()
	e := w.ok(a, KindJobSubmit, JobSpec{Driver: "exec", Cmd: []string{"true"}, RangeStart: 1, RangeEnd: n,
		Priority: 5, CPUs: 1, Retries: retries, Nonce: []byte{byte(w.tick())}})
	return JobIDFor(e)
}

// replay folds entries, added one by one in the given order, into a new Log.
func replay(tb testing.TB, es []*Entry) *Log {
	tb.Helper()
	l := newLog(3, 4)
	for _, e := range es {
		if _, err := l.Add(e); err != nil {
			tb.Fatalf("replay %s: %v", e.Kind, err)
		}
	}
	return l
}
