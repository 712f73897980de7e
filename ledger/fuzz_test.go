package ledger

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"

	"github.com/cshare/cshare/market"
)

// FuzzDecodeEntry: Decode never panics; it refuses with one of the sentinel
// errors; DecodeBatch gives the same verdict; whatever decodes re-encodes to
// the same bytes, has the CID of those bytes, and carries a signature the
// cofactored equation accepts (everything crypto/ed25519 accepts, and more:
// see edkey).
func FuzzDecodeEntry(f *testing.F) {
	samples := sampleEntries(f)
	good := samples[1].Bytes()
	for _, e := range samples {
		f.Add(e.Bytes())
		b := append([]byte(nil), e.Bytes()...)
		b[len(b)/2] ^= 0x20
		f.Add(b)
	}
	f.Add([]byte{0xa0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		// The hand-written envelope parser agrees with the CBOR library.
		if len(b) <= MaxEntrySize {
			w1, err1 := parseWire(b)
			w2, err2 := decodeWireReflect(b)
			if err2 == nil { // the library copies the payload as it is
				err2 = checkCanonical(w2.Payload)
			}
			if (err1 == nil) != (err2 == nil) {
				t.Fatalf("parseWire: %v; CBOR library: %v", err1, err2)
			}
			if err1 == nil && !reflect.DeepEqual(normWire(w1), normWire(w2)) {
				t.Fatalf("parseWire and the CBOR library disagree:\n%+v\n%+v", w1, w2)
			}
		}
		e, err := Decode(b)
		outs, errs := DecodeBatch([][]byte{b, good})
		if (outs[0] == nil) != (err != nil) || (err != nil && !sameSentinel(err, errs[0])) || outs[1] == nil {
			t.Fatalf("Decode: %v; DecodeBatch: %v, %v", err, errs[0], errs[1])
		}
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrBadSignature) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		again, err := e.encodeWire(true)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, b) || !bytes.Equal(e.Bytes(), b) {
			t.Fatalf("decoded entry re-encodes differently:\n in  %x\n out %x", b, again)
		}
		if e.CID() != CIDOf(b) {
			t.Fatal("CID is not the CID of the bytes")
		}
		if _, err := DecodeWithCID(e.CID(), b); err != nil {
			t.Fatalf("DecodeWithCID with its own CID: %v", err)
		}
		unsigned, err := e.encodeWire(false)
		if err != nil {
			t.Fatal(err)
		}
		if !e.ak.VerifyCofactored(append([]byte(sigDomain), unsigned...), e.Sig) {
			t.Fatal("the cofactored rule refuses a signature Decode accepted")
		}
		if checkCanonical(e.Payload) != nil {
			t.Fatal("accepted a non-canonical payload")
		}
	})
}

// normWire makes empty slices nil, so the two decoders compare equal.
func normWire(w wire) wire {
	if len(w.Parents) == 0 {
		w.Parents = nil
	}
	if len(w.Author) == 0 {
		w.Author = nil
	}
	if len(w.Sig) == 0 {
		w.Sig = nil
	}
	return w
}

// FuzzApply: any payload of any kind, signed by a member, admin, owner,
// machine or stranger, applied to a populated State, never panics, and an
// error leaves the State unchanged.
func FuzzApply(f *testing.F) {
	w := newWorld(f)
	admin := w.member(2, RoleAdmin)
	mem := w.member(3, RoleMember)
	job := w.submit(mem, 4, 1)
	pend := newActor(f, 4)
	if _, err := w.join(pend, w.orgKey(w.owner, "k1")); err != nil {
		f.Fatal(err)
	}
	actors := []*actor{w.owner, admin, mem, pend, newActor(f, 5)}
	kinds := []string{KindGenesis, KindOrgUpdate, KindOrgKey, KindMachineReg, KindMachineApprove, KindMachineReject,
		KindMachineRemove, KindMachineUpdate, KindMemberRole, KindMemberRemove, KindJobSubmit, KindJobModify,
		KindJobCancel, KindJobResults, "no.such.kind",
		KindContractRequest, KindContractAccept, KindContractReject, KindContractStop, KindContractStart, KindContractExtend, KindContractRm,
		KindDatasetAdd, KindDatasetRm, KindOrgTransfer, KindOrgDelete,
		KindJobStart, KindJobExpire, KindContractAck, KindContractWitness, KindSSHKeyAdd, KindSSHKeyRm, KindDatasetAccess}
	seed := func(k int, who int, p any) {
		b, err := EncodePayload(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(k), uint8(who), b)
	}
	seed(3, 4, MachineRegister{Cap: w.invite(admin, RoleAdmin, 1, 0)})
	seed(4, 1, MachineRef{Machine: pend.id})
	seed(8, 1, MemberRole{Member: mem.id, Role: RoleAdmin})
	seed(9, 0, MemberRef{Member: admin.id})
	seed(10, 2, JobSpec{Driver: "exec", Cmd: []string{"x"}, RangeStart: -5, RangeEnd: 5, Priority: 1, CPUs: 1})
	seed(10, 2, JobSpec{Driver: "exec", Cmd: []string{"x"}, RangeStart: -1 << 63, RangeEnd: 1<<63 - 1, Priority: 1, CPUs: 1})
	seed(11, 2, JobModify{Job: job, MaxCPUs: i64(-1)})
	seed(13, 0, JobResults{Job: job, Results: []ItemResult{{Item: 4, Code: 1}, {Item: 4}}})
	seed(13, 0, JobResults{Job: job, Results: []ItemResult{{Item: -1 << 63}}})
	seed(1, 1, OrgUpdate{MaxCPUsLimit: i64(-3)})
	w.ok(w.owner, KindMachineUpdate, MachineUpdate{Hardware: Hardware{CPUs: 8, MemoryMB: 8192, DiskMB: 8192}})
	offer := w.owner.s.SignOffer(w.org, market.Offer{CPUs: 8, MemoryMB: 8192, DiskMB: 8192, Price: 1, Created: 1_700_000_000_000, Until: 1_900_000_000_000})
	creq := ContractRequest{Offer: offer, Ask: market.Ask{CPUs: 2}, Spec: ContractSpec{Image: "x"}}
	contract := ContractIDFor(w.ok(mem, KindContractRequest, creq))
	seed(15, 2, creq)
	seed(16, 0, ContractRef{Contract: contract})
	seed(17, 0, ContractReject{Contract: contract, Reason: "no"})
	seed(20, 0, ContractExtend{Contract: contract, Duration: -1})
	seed(1, 0, OrgUpdate{MarketDeleteAfter: i64(-1)})
	seed(22, 2, DatasetAdd{Name: "d", CID: "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku", Size: 0, Blocks: 1, Access: AccessOrg})
	seed(23, 2, DatasetRef{Name: "d"})
	seed(24, 0, OrgTransfer{To: admin.id})
	seed(24, 1, OrgTransfer{To: mem.id})
	seed(25, 0, OrgDelete{Name: "acme"})
	seed(25, 1, OrgDelete{Name: "acme"})
	seed(1, 0, OrgUpdate{Policies: map[string]int64{PolicyMaxConcurrentJobs: 1, PolicyMaxJobRuntime: 1000}})
	seed(26, 0, JobRef{Job: job})
	seed(27, 0, JobRef{Job: job})
	seed(28, 0, ContractMarks{Contract: contract, Requests: []string{"x"}})
	seed(29, 1, ContractMarks{Contract: contract, Requests: make([]string, 65)})
	seed(30, 2, SSHKeyAdd{Key: scenarioSSHKey("k")})
	seed(31, 2, SSHKeyRef{Fingerprint: "SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"})
	w.ok(mem, KindSSHKeyAdd, SSHKeyAdd{Key: scenarioSSHKey("m")})
	base := w.log.State()
	heads := w.heads()
	f.Fuzz(func(t *testing.T, kind, who uint8, payload []byte) {
		if checkCanonical(payload) != nil || payload[0]>>5 != 5 {
			return // Decode refuses these (not canonical, not a map) before Apply sees them
		}
		a := actors[int(who)%len(actors)]
		k := kinds[int(kind)%len(kinds)]
		org := w.org
		var parents []*Entry
		if k == KindGenesis {
			org = ""
		} else {
			parents = heads
		}
		e := sign(t, a, org, k, cbor.RawMessage(payload), 1_800_000_000_000, parents...)
		st := base.Clone()
		before := st.Hash()
		if err := Apply(st, e); err != nil && st.Hash() != before {
			t.Fatalf("%s failed (%v) but changed the state", k, err)
		}
	})
}

func sampleTokens(tb testing.TB) []Token {
	w := newWorld(tb)
	return []Token{
		{Cap: w.orgKey(w.owner, "k1"), Addrs: []string{"/ip4/127.0.0.1/tcp/4001/p2p/" + w.owner.id}},
		{Cap: w.invite(w.owner, RoleAdmin, 1, 1_900_000_000_000), Addrs: []string{"/ip4/10.0.0.1/udp/4001/quic-v1", "/dns4/example.org/tcp/1"}},
	}
}

// FuzzParseToken: ParseToken never panics, and a token it accepts encodes to
// a string it accepts again as the same token.
func FuzzParseToken(f *testing.F) {
	for _, t := range sampleTokens(f) {
		s := t.Encode()
		f.Add(s)
		f.Add("  " + s + "\n")
		f.Add(s[:len(s)-3])
		f.Add(strings.Replace(s, "A", "B", 1))
	}
	f.Add("cshare1")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := ParseToken(s)
		if err != nil {
			if !errors.Is(err, ErrBadToken) {
				t.Fatalf("error does not wrap ErrBadToken: %v", err)
			}
			return
		}
		again, err := ParseToken(tok.Encode())
		if err != nil {
			t.Fatalf("re-encoded token refused: %v", err)
		}
		if !reflect.DeepEqual(again, tok) {
			t.Fatalf("token changed through Encode: %+v != %+v", again, tok)
		}
	})
}

func TestTokenRoundTrip(t *testing.T) {
	for _, tok := range sampleTokens(t) {
		s := tok.Encode()
		if !strings.HasPrefix(s, "cshare1") || strings.ContainsAny(s, " \n+/=") {
			t.Fatalf("token %q is not one copy-pasteable word", s)
		}
		got, err := ParseToken("\t" + s + "\n")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, tok) {
			t.Fatalf("round trip: %+v != %+v", got, tok)
		}
	}
}

func TestParseTokenRefuses(t *testing.T) {
	good := sampleTokens(t)[1]
	mutate := func(f func(*Token)) string {
		tk := good
		tk.Cap.Issuer = append([]byte(nil), good.Cap.Issuer...)
		tk.Addrs = append([]string(nil), good.Addrs...)
		f(&tk)
		return tk.Encode()
	}
	w := newWorld(t)
	other := newActor(t, 9)
	cases := map[string]string{
		"empty":         "",
		"no prefix":     strings.TrimPrefix(good.Encode(), "cshare1"),
		"not base64":    "cshare1***",
		"cut":           good.Encode()[:40],
		"too long":      "cshare1" + strings.Repeat("A", MaxTokenLen),
		"org not a CID": mutate(func(t *Token) { t.Cap.Org = "acme" }),
		"bad kind":      mutate(func(t *Token) { t.Cap.Kind = "root" }),
		"owner role":    mutate(func(t *Token) { t.Cap.Role = RoleOwner }),
		"no addresses":  mutate(func(t *Token) { t.Addrs = nil }),
		"bad address":   mutate(func(t *Token) { t.Addrs = []string{"127.0.0.1:4001"} }),
		"negative uses": mutate(func(t *Token) { t.Cap.Uses = -1 }),
		"forged fields": mutate(func(t *Token) { t.Cap.Uses = 100 }),
		"other issuer":  mutate(func(t *Token) { t.Cap.Issuer = other.s.pub }),
		"resigned, bad role": mutate(func(t *Token) {
			t.Cap = other.s.SignCapability(Capability{Org: w.org, Kind: CapInvite, ID: "x", Role: "root"})
		}),
	}
	for name, s := range cases {
		if _, err := ParseToken(s); !errors.Is(err, ErrBadToken) {
			t.Errorf("%s: ParseToken = %v, want ErrBadToken", name, err)
		}
	}
}
