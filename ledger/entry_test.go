package ledger

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	mh "github.com/multiformats/go-multihash"

	"github.com/cshare/cshare/internal/edkey/edkeytest"
)

// sampleEntries are valid entries of several shapes: genesis (no org, no
// parents), a register carrying a capability, results with two parents.
func sampleEntries(tb testing.TB) []*Entry {
	w := newWorld(tb)
	m := newActor(tb, 2)
	reg, err := w.join(m, w.invite(w.owner, RoleMember, 1, 0))
	if err != nil {
		tb.Fatal(err)
	}
	job := w.submit(w.owner, 3, 0)
	side := w.on(m, KindMachineUpdate, MachineUpdate{Hardware: Hardware{CPUs: 8}}, reg)
	w.mustAdd(side)
	res, err := w.write(m, KindJobResults, JobResults{Job: job, Results: []ItemResult{{Item: 1, DurationMS: 5}}})
	if err != nil {
		tb.Fatal(err)
	}
	if len(res.Parents) != 2 {
		tb.Fatalf("results entry has %d parents, want 2", len(res.Parents))
	}
	return []*Entry{w.gen, reg, side, res}
}

func TestSignDecodeRoundTrip(t *testing.T) {
	for _, e := range sampleEntries(t) {
		d, err := Decode(e.Bytes())
		if err != nil {
			t.Fatalf("%s: %v", e.Kind, err)
		}
		if !d.CID().Equals(e.CID()) || d.Key() != e.Key() || !bytes.Equal(d.Bytes(), e.Bytes()) {
			t.Fatalf("%s: decoded entry differs in CID, key or bytes", e.Kind)
		}
		if d.Org != e.Org || d.Kind != e.Kind || d.Clock != e.Clock || d.Time != e.Time ||
			!bytes.Equal(d.Payload, e.Payload) || !bytes.Equal(d.Author, e.Author) || !bytes.Equal(d.Sig, e.Sig) ||
			len(d.Parents) != len(e.Parents) {
			t.Fatalf("%s: decoded fields differ", e.Kind)
		}
		for i := range d.Parents {
			if !d.Parents[i].Equals(e.Parents[i]) {
				t.Fatalf("%s: parent %d differs", e.Kind, i)
			}
		}
		if d.CID() != CIDOf(e.Bytes()) || d.CID().Prefix().Codec != codecCBOR || d.CID().Version() != 1 {
			t.Fatalf("%s: CID is not CIDv1/cbor/sha2-256 of the bytes", e.Kind)
		}
		if _, err := DecodeWithCID(e.CID(), e.Bytes()); err != nil {
			t.Fatalf("%s: DecodeWithCID: %v", e.Kind, err)
		}
		// The author's peer ID is libp2p's.
		pk, _ := crypto.UnmarshalEd25519PublicKey(e.Author)
		id, _ := peer.IDFromPublicKey(pk)
		if d.AuthorID() != id || d.AuthorString() != id.String() {
			t.Fatalf("%s: author ID %s, want %s", e.Kind, d.AuthorID(), id)
		}
		// The message the signature covers, cut from the bytes, is the
		// canonical encoding of the entry without its signature.
		fast, err := d.appendSignedBytes(nil)
		if err != nil {
			t.Fatal(err)
		}
		slow, err := d.encodeWire(false)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(fast, append([]byte(sigDomain), slow...)) {
			t.Fatalf("%s: signed bytes cut from the entry differ from the re-encoding", e.Kind)
		}
		// Decode copies its input.
		raw := append([]byte(nil), e.Bytes()...)
		d2, _ := Decode(raw)
		raw[len(raw)-1] ^= 1
		if !bytes.Equal(d2.Bytes(), e.Bytes()) {
			t.Fatalf("%s: decoded entry shares the caller's buffer", e.Kind)
		}
	}
}

func TestDecodeTampered(t *testing.T) {
	for _, e := range sampleEntries(t) {
		raw := e.Bytes()
		for i := range raw {
			for _, bit := range []byte{0x01, 0x80} {
				b := append([]byte(nil), raw...)
				b[i] ^= bit
				_, err := Decode(b)
				if err == nil {
					t.Fatalf("%s: byte %d ^ %#x still decodes", e.Kind, i, bit)
				}
				if !errors.Is(err, ErrBadSignature) && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooLarge) {
					t.Fatalf("%s: byte %d ^ %#x: unexpected error %v", e.Kind, i, bit, err)
				}
			}
		}
		// Truncations and trailing bytes.
		for _, b := range [][]byte{raw[:len(raw)-1], raw[:1], nil, append(append([]byte(nil), raw...), 0)} {
			if _, err := Decode(b); !errors.Is(err, ErrMalformed) {
				t.Fatalf("%s: truncated/extended entry: %v, want ErrMalformed", e.Kind, err)
			}
		}
	}
}

// wireRev is wire with its fields in reverse order: encoded without sorting,
// its map keys come out descending.
type wireRev struct {
	Sig     []byte          `cbor:"8,keyasint,omitempty"`
	Time    int64           `cbor:"7,keyasint"`
	Clock   cbor.RawMessage `cbor:"6,keyasint"`
	Parents [][]byte        `cbor:"5,keyasint,omitempty"`
	Author  []byte          `cbor:"4,keyasint"`
	Payload cbor.RawMessage `cbor:"3,keyasint"`
	Kind    string          `cbor:"2,keyasint"`
	Org     string          `cbor:"1,keyasint,omitempty"`
	Extra   string          `cbor:"9,keyasint,omitempty"`
}

func TestDecodeRefusesNonCanonical(t *testing.T) {
	e := sampleEntries(t)[3]
	var parents [][]byte
	for _, p := range e.Parents {
		parents = append(parents, p.Bytes())
	}
	clock, _ := encMode.Marshal(e.Clock)
	base := wireRev{Sig: e.Sig, Time: e.Time, Clock: clock, Parents: parents, Author: e.Author,
		Payload: e.Payload, Kind: e.Kind, Org: e.Org}
	sorted, _ := cbor.CoreDetEncOptions().EncMode()
	unsorted, _ := cbor.EncOptions{Sort: cbor.SortNone}.EncMode()
	enc := func(m cbor.EncMode, w wireRev) []byte {
		b, err := m.Marshal(w)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// Sanity: the sorted encoding of wireRev is the entry itself, and it
	// decodes.
	if b := enc(sorted, base); !bytes.Equal(b, e.Bytes()) {
		t.Fatal("test encoding does not reproduce the entry")
	}
	nonMinimal := base
	nonMinimal.Clock = cbor.RawMessage{0x1a, 0, 0, 0, byte(e.Clock)} // uint32 form of a small int
	extra := base
	extra.Extra = "x"
	// splice replaces the payload inside the entry's bytes (the encoder
	// refuses to write malformed or indefinite-length CBOR itself).
	splice := func(p []byte) []byte {
		if bytes.Count(e.Bytes(), e.Payload) != 1 {
			t.Fatal("payload bytes not unique in the entry")
		}
		return bytes.Replace(e.Bytes(), e.Payload, p, 1)
	}
	// A payload whose map keys are not sorted (payloads must be canonical
	// too, so a payload has one encoding).
	var pm map[string]any
	if err := cbor.Unmarshal(e.Payload, &pm); err != nil {
		t.Fatal(err)
	}
	cases := map[string][]byte{
		"keys out of order":       enc(unsorted, base),
		"non-minimal integer":     enc(sorted, nonMinimal),
		"unknown field":           enc(sorted, extra),
		"indefinite-length map":   splice(append(append([]byte{0xbf}, e.Payload[1:]...), 0xff)),
		"duplicate key":           dupKey(e.Bytes()),
		"payload keys unsorted":   splice(unsortedPayload(t, e.Payload)),
		"payload not well-formed": splice([]byte{0xa1, 0x61}),
	}
	for name, b := range cases {
		if bytes.Equal(b, e.Bytes()) {
			t.Fatalf("%s: test case equals the canonical entry", name)
		}
		if _, err := Decode(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: Decode = %v, want ErrMalformed", name, err)
		}
	}
}

// dupKey repeats the last field (the signature) of a canonical entry.
func dupKey(raw []byte) []byte {
	n := len(raw) - len(sigTrailer) - ed25519.SignatureSize
	b := append([]byte{raw[0] + 1}, raw[1:]...)
	return append(b, raw[n:]...)
}

// unsortedPayload re-encodes a payload map with its keys in reverse order.
func unsortedPayload(t *testing.T, p []byte) cbor.RawMessage {
	var m map[string]cbor.RawMessage
	if err := cbor.Unmarshal(p, &m); err != nil || len(m) < 2 {
		t.Fatalf("payload is not a map of 2+ keys: %v", err)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	// Canonical order is by encoded bytes: length first, then bytes.
	less := func(a, b string) bool { return len(a) < len(b) || (len(a) == len(b) && a < b) }
	for i := range keys {
		for j := i + 1; j < len(keys); j++ {
			if less(keys[i], keys[j]) {
				keys[i], keys[j] = keys[j], keys[i]
			}
		}
	}
	out := []byte{0xa0 + byte(len(keys))}
	for _, k := range keys {
		kb, _ := cbor.Marshal(k)
		out = append(append(out, kb...), m[k]...)
	}
	return out
}

func TestDecodeTooLarge(t *testing.T) {
	a := newActor(t, 1)
	big := strings.Repeat("x", MaxEntrySize)
	if _, err := a.s.Sign("", KindGenesis, Genesis{Name: "big", Description: big}, nil, 0, 1); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Sign of a %d-byte payload: %v, want ErrTooLarge", len(big), err)
	}
	// A payload between the payload cap and the entry cap.
	mid := strings.Repeat("x", MaxPayloadSize+100)
	if _, err := a.s.Sign("", KindGenesis, Genesis{Name: "mid", Description: mid}, nil, 0, 1); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Sign of a payload over MaxPayloadSize: %v, want ErrTooLarge", err)
	}
	// Bytes over the cap are refused before parsing.
	raw := make([]byte, MaxEntrySize+1)
	if _, err := Decode(raw); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Decode of %d bytes: %v, want ErrTooLarge", len(raw), err)
	}
	if _, err := DecodeWithCID(CIDOf(raw), raw); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("DecodeWithCID of %d bytes: %v, want ErrTooLarge", len(raw), err)
	}
	// A well-formed entry just over the cap: an oversized payload in a
	// correctly encoded (unsigned) entry.
	w := wire{Org: "o", Kind: KindOrgUpdate, Author: a.s.pub, Clock: 2, Sig: make([]byte, 64),
		Parents: [][]byte{CIDOf([]byte("p")).Bytes()}}
	w.Payload, _ = encMode.Marshal(strings.Repeat("y", MaxEntrySize))
	b, _ := encMode.Marshal(w)
	if _, err := Decode(b); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Decode of a %d-byte entry: %v, want ErrTooLarge", len(b), err)
	}
}

func TestDecodeWithCIDMismatch(t *testing.T) {
	es := sampleEntries(t)
	e, other := es[1], es[2]
	v0, _ := mh.Sum(e.Bytes(), mh.SHA2_256, -1)
	raw := cid.NewCidV1(cid.Raw, v0)
	for name, want := range map[string]cid.Cid{
		"another entry's CID": other.CID(),
		"CIDv0 of the bytes":  cid.NewCidV0(v0),
		"raw codec":           raw,
		"undefined":           cid.Undef,
	} {
		if _, err := DecodeWithCID(want, e.Bytes()); !errors.Is(err, ErrCIDMismatch) {
			t.Errorf("%s: %v, want ErrCIDMismatch", name, err)
		}
	}
	// A bad entry with a matching CID is still refused for what it is.
	bad := append([]byte(nil), e.Bytes()...)
	bad[len(bad)-1] ^= 1
	if _, err := DecodeWithCID(CIDOf(bad), bad); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("tampered signature: %v, want ErrBadSignature", err)
	}
}

func TestDecodeRefusesBadShapes(t *testing.T) {
	a := newActor(t, 1)
	p := CIDOf([]byte("p"))
	cases := map[string]wire{
		"short author":           {Org: "o", Kind: "k", Author: a.s.pub[:31], Clock: 2, Parents: [][]byte{p.Bytes()}},
		"no kind":                {Org: "o", Author: a.s.pub, Clock: 2, Parents: [][]byte{p.Bytes()}},
		"clock 0":                {Org: "o", Kind: "k", Author: a.s.pub, Clock: 0, Parents: [][]byte{p.Bytes()}},
		"huge clock":             {Org: "o", Kind: "k", Author: a.s.pub, Clock: MaxClock + 1, Parents: [][]byte{p.Bytes()}},
		"no parents":             {Org: "o", Kind: "k", Author: a.s.pub, Clock: 2},
		"genesis with org":       {Org: "o", Kind: KindGenesis, Author: a.s.pub, Clock: 1},
		"genesis with parents":   {Kind: KindGenesis, Author: a.s.pub, Clock: 1, Parents: [][]byte{p.Bytes()}},
		"org-less non-genesis":   {Kind: "k", Author: a.s.pub, Clock: 2, Parents: [][]byte{p.Bytes()}},
		"parents unsorted":       {Org: "o", Kind: "k", Author: a.s.pub, Clock: 2, Parents: [][]byte{CIDOf([]byte("q")).Bytes(), p.Bytes()}},
		"parent not a CID":       {Org: "o", Kind: "k", Author: a.s.pub, Clock: 2, Parents: [][]byte{{1, 2, 3}}},
		"duplicate parents":      {Org: "o", Kind: "k", Author: a.s.pub, Clock: 2, Parents: [][]byte{p.Bytes(), p.Bytes()}},
		"too many parents (65+)": {Org: "o", Kind: "k", Author: a.s.pub, Clock: 2, Parents: manyParents(MaxParents + 1)},
	}
	if bytes.Compare(CIDOf([]byte("q")).Bytes(), p.Bytes()) < 0 {
		c := cases["parents unsorted"]
		c.Parents[0], c.Parents[1] = c.Parents[1], c.Parents[0]
	}
	for name, w := range cases {
		w.Payload = cbor.RawMessage{0xa0}
		unsigned, _ := encMode.Marshal(w)
		w.Sig = ed25519.Sign(a.s.priv, append([]byte(sigDomain), unsigned...))
		b, _ := encMode.Marshal(w)
		if _, err := Decode(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
}

func manyParents(n int) [][]byte {
	var out [][]byte
	for i := 0; i < n; i++ {
		out = append(out, CIDOf([]byte{byte(i), byte(i >> 8)}).Bytes())
	}
	sortBytes(out)
	return out
}

func sortBytes(bs [][]byte) {
	for i := range bs {
		for j := i + 1; j < len(bs); j++ {
			if bytes.Compare(bs[j], bs[i]) < 0 {
				bs[i], bs[j] = bs[j], bs[i]
			}
		}
	}
}

func TestClockRule(t *testing.T) {
	w := newWorld(t)
	m := w.member(2, RoleMember)
	hs, max := w.log.Heads()
	for _, clock := range []uint64{max, max + 2, 1} {
		e, err := m.s.Sign(w.org, KindMachineUpdate, MachineUpdate{}, hs, clock-1, w.tick())
		if err != nil {
			t.Fatal(err)
		}
		n := w.log.Len()
		if _, err := w.log.Add(e); !errors.Is(err, ErrMalformed) {
			t.Fatalf("clock %d (want %d): Add = %v, want ErrMalformed", e.Clock, max+1, err)
		}
		if w.log.Len() != n || w.log.Has(e.CID()) {
			t.Fatalf("clock %d: the entry was added", e.Clock)
		}
	}
	e, err := m.s.Sign(w.org, KindMachineUpdate, MachineUpdate{}, hs, max, w.tick())
	if err != nil {
		t.Fatal(err)
	}
	if v := w.mustAdd(e); v != nil || e.Clock != max+1 {
		t.Fatalf("clock %d: %v", e.Clock, v)
	}
}

func TestMissingParents(t *testing.T) {
	w := newWorld(t)
	m := newActor(t, 2)
	other := newWorldNamed(t, "other") // another org's entries are unknown here
	stray := other.ok(other.owner, KindOrgUpdate, OrgUpdate{Description: new(string)})
	e := sign(t, m, w.org, KindMachineUpdate, MachineUpdate{}, w.tick(), w.gen, stray)
	_, err := w.log.Add(e)
	var mp *MissingParentsError
	if !errors.As(err, &mp) || !errors.Is(err, ErrMissingParents) {
		t.Fatalf("Add = %v, want *MissingParentsError", err)
	}
	if len(mp.Missing) != 1 || !mp.Missing[0].Equals(stray.CID()) {
		t.Fatalf("missing %v, want [%s]", mp.Missing, stray.CID())
	}
	if w.log.Has(e.CID()) || w.log.Len() != 1 {
		t.Fatal("an entry with missing parents was added")
	}
	// In a batch: what can be added is added; the error names only what is
	// neither in the log nor in the batch.
	a := w.on(w.owner, KindOrgUpdate, OrgUpdate{Name: ptr("a")}, w.gen)
	b := w.on(w.owner, KindOrgUpdate, OrgUpdate{Name: ptr("b")}, a)
	orphan := sign(t, w.owner, w.org, KindOrgUpdate, OrgUpdate{Name: ptr("c")}, w.tick(), a, stray)
	child := w.on(w.owner, KindOrgUpdate, OrgUpdate{Name: ptr("d")}, orphan)
	errs, err := w.log.AddBatch([]*Entry{child, b, orphan, a})
	if !errors.As(err, &mp) || len(mp.Missing) != 1 || !mp.Missing[0].Equals(stray.CID()) {
		t.Fatalf("AddBatch = %v, want missing [%s]", err, stray.CID())
	}
	if errs[1] != nil || errs[3] != nil || !w.log.Has(a.CID()) || !w.log.Has(b.CID()) {
		t.Fatalf("entries with their parents present were not added: %v", errs)
	}
	if !errors.Is(errs[0], ErrMissingParents) || !errors.Is(errs[2], ErrMissingParents) || w.log.Has(orphan.CID()) {
		t.Fatalf("orphans: %v", errs)
	}
	if w.log.State().Name != "b" {
		t.Fatalf("name %q, want b", w.log.State().Name)
	}
}

func TestWrongOrg(t *testing.T) {
	w := newWorld(t)
	other := newWorldNamed(t, "other")
	// Another org's genesis: a second genesis is refused.
	g2 := sign(t, w.owner, "", KindGenesis, Genesis{Name: "other", OrgKeyID: "k", Settings: DefaultSettings()}, 5)
	if _, err := w.log.Add(g2); !errors.Is(err, ErrWrongOrg) {
		t.Fatalf("second genesis: %v, want ErrWrongOrg", err)
	}
	// An entry naming another org but built on this org's entries.
	e := sign(t, w.owner, other.org, KindOrgUpdate, OrgUpdate{Name: ptr("x")}, w.tick(), w.gen)
	if _, err := w.log.Add(e); !errors.Is(err, ErrWrongOrg) {
		t.Fatalf("entry of another org: %v, want ErrWrongOrg", err)
	}
	// Also inside the batch that carries the genesis.
	l := NewLog()
	_, err := l.AddBatch([]*Entry{e, w.gen})
	if !errors.Is(err, ErrWrongOrg) || l.Len() != 1 {
		t.Fatalf("batch with genesis and another org's entry: %v, len %d", err, l.Len())
	}
}

func ptr[T any](v T) *T { return &v }

// sameSentinel reports whether two decode errors wrap the same sentinel.
func sameSentinel(a, b error) bool {
	for _, s := range []error{ErrTooLarge, ErrMalformed, ErrBadSignature, ErrCIDMismatch} {
		if errors.Is(a, s) != errors.Is(b, s) {
			return false
		}
	}
	return (a == nil) == (b == nil)
}

// resigned is e signed again by a with R carrying the small-order point
// EIGHT_TORSION[tor]: valid by the cofactored equation, and by the
// cofactorless one (crypto/ed25519's) only when tor is 0.
func resigned(tb testing.TB, a *actor, e *Entry, tor int) []byte {
	tb.Helper()
	unsigned, err := e.encodeWire(false)
	if err != nil {
		tb.Fatal(err)
	}
	w := wire{Org: e.Org, Kind: e.Kind, Payload: e.Payload, Author: e.Author, Clock: e.Clock, Time: e.Time,
		Sig: edkeytest.TorsionSign(a.s.priv, append([]byte(sigDomain), unsigned...), tor)}
	for _, p := range e.Parents {
		w.Parents = append(w.Parents, p.Bytes())
	}
	raw, err := encMode.Marshal(w)
	if err != nil {
		tb.Fatal(err)
	}
	return raw
}

// TestDecodeBatch: DecodeBatch and DecodeBatchWithCID give, entry by entry,
// Decode's and DecodeWithCID's verdicts, over batches that mix valid,
// tampered, malformed, wrongly addressed and torsioned entries, within one
// signature batch and across several (batchMax), and below batchMin.
func TestDecodeBatch(t *testing.T) {
	samples := sampleEntries(t)
	m := newActor(t, 2) // the author of samples[1:]
	res := samples[3]
	tampered := append([]byte(nil), res.Bytes()...)
	tampered[len(tampered)-5] ^= 1
	tor4, tor1 := resigned(t, m, res, 4), resigned(t, m, res, 1)
	if ed25519.Verify(res.Author, append([]byte(sigDomain), mustUnsigned(t, res)...), tor4[len(tor4)-64:]) {
		t.Fatal("crypto/ed25519 accepts the torsioned signature: the test checks nothing")
	}
	if _, err := Decode(tor4); err != nil {
		t.Fatalf("Decode refuses a signature valid by the cofactored equation: %v", err)
	}
	mixed := [][]byte{samples[0].Bytes(), tampered, samples[1].Bytes(), tor4, {0xa0}, nil, samples[2].Bytes(), tor1,
		res.Bytes(), resigned(t, m, res, 0)}
	check := func(name string, raws [][]byte, want []cid.Cid) {
		t.Helper()
		var out []*Entry
		var errs []error
		if want == nil {
			out, errs = DecodeBatch(raws)
		} else {
			out, errs = DecodeBatchWithCID(want, raws)
		}
		if len(out) != len(raws) || len(errs) != len(raws) {
			t.Fatalf("%s: %d entries and %d errors for %d blocks", name, len(out), len(errs), len(raws))
		}
		bad := 0
		for i, raw := range raws {
			var e *Entry
			var err error
			if want == nil {
				e, err = Decode(raw)
			} else {
				e, err = DecodeWithCID(want[i], raw)
			}
			if !sameSentinel(err, errs[i]) || (out[i] == nil) != (e == nil) {
				t.Fatalf("%s: block %d: Decode %v; batch %v (entry %v)", name, i, err, errs[i], out[i] != nil)
			}
			if e != nil && (!bytes.Equal(out[i].Bytes(), raw) || out[i].Key() != e.Key() || out[i].AuthorString() != e.AuthorString()) {
				t.Fatalf("%s: block %d decodes differently", name, i)
			}
			if err != nil {
				bad++
			}
		}
		if bad == 0 || bad == len(raws) {
			t.Fatalf("%s: %d of %d blocks refused: the batch mixes nothing", name, bad, len(raws))
		}
	}
	check("mixed", mixed, nil)
	cids := make([]cid.Cid, len(mixed))
	for i, raw := range mixed {
		cids[i] = CIDOf(raw)
	}
	cids[2] = samples[0].CID() // a block that is not what was asked for
	check("mixed with CIDs", mixed, cids)
	check("fewer than batchMin", mixed[:batchMin-1], nil)
	check("fewer than batchMin, with CIDs", mixed[:batchMin-1], cids[:batchMin-1])
	// More than one signature batch, with a bad entry in the second only,
	// then in the first only.
	var long [][]byte
	for i := 0; i < batchMax+6; i++ {
		long = append(long, samples[1+i%3].Bytes())
	}
	long[batchMax+3] = tampered
	check("second batch bad", long, nil)
	long[batchMax+3], long[7] = res.Bytes(), tor1
	long[8] = tampered
	check("first batch bad", long, nil)
	if out, errs := DecodeBatch(nil); len(out) != 0 || len(errs) != 0 {
		t.Fatal("an empty batch gives entries")
	}
}

func mustUnsigned(tb testing.TB, e *Entry) []byte {
	tb.Helper()
	b, err := e.encodeWire(false)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
