package p2p

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/ledger"
)

// ptWitness is a WitnessSource: an approved machine (or not) that signs
// with its key, or a crooked one that signs for another joiner or with
// another key. The test sets its fields under mu.
type ptWitness struct {
	signer   *ledger.Signer
	mu       sync.Mutex
	approved bool
	reason   string         // refuse with this, when set
	joiner   string         // sign for this joiner instead of the caller
	other    *ledger.Signer // sign with this key instead of its own
	seen     []peer.ID
}

func (s *ptWitness) Witness(org string, c ledger.Capability, joiner peer.ID) (ledger.Witness, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen = append(s.seen, joiner)
	switch {
	case !s.approved:
		return ledger.Witness{}, errors.New("this machine is not an approved machine of org " + org)
	case s.reason != "":
		return ledger.Witness{}, errors.New(s.reason)
	}
	j, sg := joiner.String(), s.signer
	if s.joiner != "" {
		j = s.joiner
	}
	if s.other != nil {
		sg = s.other
	}
	return sg.SignWitness(c, j, 1234), nil
}

func ptSigner(t testing.TB, k crypto.PrivKey) *ledger.Signer {
	t.Helper()
	s, err := ledger.NewSigner(k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// ptCap is an invite of org signed by a fresh admin key.
func ptCap(t testing.TB, org string) ledger.Capability {
	t.Helper()
	return ptSigner(t, ptKey(t)).SignCapability(ledger.Capability{Org: org, Kind: ledger.CapInvite, ID: "inv1", Role: ledger.RoleMember, Expires: 99, Uses: 1})
}

// TestRequestWitness: an approved machine witnesses the redemption of the
// stream's remote peer (the joiner is never a claimed ID); a machine that
// is not approved refuses with one line; a malformed request is refused; a
// witness for another joiner or signed by another key is rejected by the
// client.
func TestRequestWitness(t *testing.T) {
	sk := ptKey(t)
	server, client := ptHostKey(t, sk, nil), ptHost(t, nil)
	src := &ptWitness{signer: ptSigner(t, sk), approved: true}
	ServeWitness(server.LibP2P(), src)
	ptConnect(t, client, server)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := ptCap(t, ptOrg)
	ask := func() (ledger.Witness, error) {
		return RequestWitness(ctx, client.LibP2P(), server.ID(), ptOrg, c)
	}

	w, err := ask()
	if err != nil {
		t.Fatalf("witness: %v", err)
	}
	if w.Joiner != client.ID().String() || w.Time != 1234 || w.CapID != c.ID || w.Org != ptOrg {
		t.Fatalf("witness %+v: want joiner %s, time 1234, cap %s", w, client.ID(), c.ID)
	}
	if id, err := w.Check(c, client.ID().String()); err != nil || id != server.ID().String() {
		t.Fatalf("witness check: %s, %v; want signed by %s", id, err, server.ID())
	}
	src.mu.Lock()
	seen := append([]peer.ID(nil), src.seen...)
	src.mu.Unlock()
	if len(seen) != 1 || seen[0] != client.ID() {
		t.Fatalf("the source was asked for joiners %v, want [%s] (the remote peer)", seen, client.ID())
	}

	for _, c2 := range []struct {
		name  string
		setup func()
		org   string
		cap   ledger.Capability
		is    error
		says  string
	}{
		{"not approved", func() { src.approved = false }, ptOrg, c, ErrWitnessRefused, "not an approved machine of org " + ptOrg},
		{"reason of many lines", func() { src.reason = "expired\nsecond line\x1b[31m" + strings.Repeat("x", 1000) }, ptOrg, c, ErrWitnessRefused, `expired\nsecond line\x1b[31m`},
		{"another org", nil, "bafyother", c, ErrWitnessRefused, "another org"},
		{"unsigned", nil, ptOrg, ledger.Capability{Org: ptOrg, Kind: ledger.CapInvite, ID: "x"}, ErrWitnessRefused, "unsigned"},
		{"bad kind", nil, ptOrg, ledger.Capability{Org: ptOrg, Kind: "admin", ID: "x", Issuer: []byte{1}, Sig: []byte{1}}, ErrWitnessRefused, `kind "admin"`},
		{"for another joiner", func() { src.joiner = server.ID().String() }, ptOrg, c, nil, "does not hold"},
		{"another key", func() { src.other = ptSigner(t, ptKey(t)) }, ptOrg, c, nil, "signed by another machine"},
	} {
		src.mu.Lock()
		src.approved, src.reason, src.joiner, src.other = true, "", "", nil
		if c2.setup != nil {
			c2.setup()
		}
		src.mu.Unlock()
		_, err := RequestWitness(ctx, client.LibP2P(), server.ID(), c2.org, c2.cap)
		if err == nil || (c2.is != nil && !errors.Is(err, c2.is)) || !strings.Contains(err.Error(), c2.says) {
			t.Errorf("%s: %v; want %v saying %q", c2.name, err, c2.is, c2.says)
			continue
		}
		if msg := err.Error(); strings.ContainsAny(msg, "\n\r\x1b") || len(msg) > maxWitnessReason+100 {
			t.Errorf("%s: error of %d bytes is not one short line: %q", c2.name, len(msg), msg)
		}
		if c2.is == nil && errors.Is(err, ErrWitnessRefused) {
			t.Errorf("%s: %v is a refusal, want a rejected witness", c2.name, err)
		}
	}
}

// FuzzDecodeWitness: any bytes give a well-formed request or an error, and
// a witness or a one-line refusal or an error; never a panic.
func FuzzDecodeWitness(f *testing.F) {
	k, _, _ := crypto.GenerateEd25519Key(nil)
	s, err := ledger.NewSigner(k)
	if err != nil {
		f.Fatal(err)
	}
	c := s.SignCapability(ledger.Capability{Org: ptOrg, Kind: ledger.CapInvite, ID: "inv1", Role: ledger.RoleMember, Expires: 5})
	w := s.SignWitness(c, "12D3KooWjoiner", 4)
	for _, v := range []any{
		WitnessRequest{Org: ptOrg, Cap: c}, WitnessRequest{}, WitnessRequest{Org: "o", Cap: ledger.Capability{Org: "o", Kind: "orgkey", ID: "i", Uses: -1}},
		witnessResponse{Witness: &w}, witnessResponse{Err: "no\nway"}, witnessResponse{Err: "x", Witness: &w}, witnessResponse{},
	} {
		b, err := cbor.Marshal(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0xa2, 0x63})
	f.Add(bytes.Repeat([]byte{0x9f}, 5000))
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := decodeWitnessRequest(b)
		if err == nil {
			c := req.Cap
			if req.Org == "" || c.Org != req.Org || (c.Kind != ledger.CapInvite && c.Kind != ledger.CapOrgKey) || c.ID == "" || len(c.ID) > 64 ||
				c.Expires < 0 || c.Uses < 0 || len(c.Issuer) == 0 || len(c.Sig) == 0 || len(b) > maxWitnessFrame {
				t.Fatalf("accepted request %+v", req)
			}
		}
		_, err = decodeWitnessResponse(b)
		if err != nil {
			if msg := err.Error(); strings.ContainsAny(msg, "\n\r") || len(msg) > maxWitnessReason+200 {
				t.Fatalf("error of %d bytes is not one short line: %q", len(msg), msg)
			}
		} else if len(b) > maxWitnessFrame {
			t.Fatalf("accepted a response of %d bytes", len(b))
		}
	})
}
