package edkey

import (
	"bytes"
	"crypto/ed25519"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/internal/edkey/edkeytest"
)

func seedKey(seed byte) ed25519.PrivateKey {
	var sd [32]byte
	sd[0], sd[31] = seed, 0x5a
	return ed25519.NewKeyFromSeed(sd[:])
}

// TestVerifyAgreesWithStdlib: the fast verifier accepts exactly what
// crypto/ed25519 accepts, including the edge cases (small-order and
// non-canonical keys) where Ed25519 implementations are known to differ.
func TestVerifyAgreesWithStdlib(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var keys [][]byte
	for i := 0; i < 8; i++ {
		keys = append(keys, seedKey(byte(100+i)).Public().(ed25519.PublicKey))
	}
	identity := make([]byte, 32)
	identity[0] = 1
	nonCanon := bytes.Repeat([]byte{0xff}, 32)
	nonCanon[31] = 0x7f
	keys = append(keys, identity, make([]byte, 32), nonCanon, bytes.Repeat([]byte{0xee}, 32))
	agree := func(pub, msg, sig []byte) {
		t.Helper()
		k, err := Of(pub)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := k.Verify(msg, sig), ed25519.Verify(pub, msg, sig); got != want {
			t.Fatalf("pub %x msg %x sig %x: fast %v, stdlib %v", pub, msg, sig, got, want)
		}
	}
	// The trivial forgery for the identity key: R = identity, S = 0. The
	// cofactorless equation holds, and the standard library accepts it.
	trivial := append(append([]byte(nil), identity...), make([]byte, 32)...)
	if !ed25519.Verify(identity, []byte("m"), trivial) {
		t.Log("stdlib refuses the identity-key signature")
	}
	agree(identity, []byte("m"), trivial)
	for i := 0; i < 300; i++ {
		pub := keys[r.IntN(len(keys))]
		msg := make([]byte, r.IntN(64))
		for j := range msg {
			msg[j] = byte(r.Uint32())
		}
		sig := make([]byte, 64)
		switch r.IntN(3) {
		case 0: // a valid signature, maybe mutated
			priv := seedKey(byte(100 + r.IntN(8)))
			pub = priv.Public().(ed25519.PublicKey)
			copy(sig, ed25519.Sign(priv, msg))
			if r.IntN(2) == 0 {
				sig[r.IntN(64)] ^= byte(1 << r.IntN(8))
			}
		case 1: // S >= L (non-canonical S)
			priv := seedKey(byte(100 + r.IntN(8)))
			pub = priv.Public().(ed25519.PublicKey)
			copy(sig, ed25519.Sign(priv, msg))
			sig[63] |= 0xf0
		default:
			for j := range sig {
				sig[j] = byte(r.Uint32())
			}
		}
		agree(pub, msg, sig)
	}
}

// TestCofactoredRule: VerifyCofactored accepts everything Verify (and
// crypto/ed25519) accepts, and also signatures whose R has a small-order
// component, which the standard library refuses; a Batch gives, for every
// mix of valid, torsioned and bad signatures, the AND of VerifyCofactored.
func TestCofactoredRule(t *testing.T) {
	priv := seedKey(42)
	pub := priv.Public().(ed25519.PublicKey)
	k, err := Of(pub)
	if err != nil {
		t.Fatal(err)
	}
	msg := []byte("an entry")
	if sig := ed25519.Sign(priv, msg); !k.VerifyCofactored(msg, sig) || !k.Verify(msg, sig) {
		t.Fatal("an honest signature is refused")
	}
	if sig := edkeytest.TorsionSign(priv, msg, 0); !ed25519.Verify(pub, msg, sig) || !k.VerifyCofactored(msg, sig) {
		t.Fatal("the torsion-free control signature is refused")
	}
	for tor := 1; tor < 8; tor++ {
		sig := edkeytest.TorsionSign(priv, msg, tor)
		if ed25519.Verify(pub, msg, sig) || k.Verify(msg, sig) {
			t.Fatalf("torsion %d: the cofactorless rule accepts it", tor)
		}
		if !k.VerifyCofactored(msg, sig) {
			t.Fatalf("torsion %d: the cofactored rule refuses it", tor)
		}
		b := NewBatch(1)
		b.Add(k, msg, sig)
		if !b.Verify() {
			t.Fatalf("torsion %d: a batch of it refuses it", tor)
		}
	}

	// Random batches: valid, torsioned (two with order-2 components, which
	// cancel in an unweighted sum), mutated, wrong key, random bytes.
	r := rand.New(rand.NewPCG(3, 4))
	var keys []*Key
	var privs []ed25519.PrivateKey
	for i := 0; i < 4; i++ {
		p := seedKey(byte(60 + i))
		kk, err := Of(p.Public().(ed25519.PublicKey))
		if err != nil {
			t.Fatal(err)
		}
		keys, privs = append(keys, kk), append(privs, p)
	}
	for round := 0; round < 60; round++ {
		n := 1 + r.IntN(40)
		b := NewBatch(n)
		want := true
		for i := 0; i < n; i++ {
			ki := r.IntN(len(keys))
			m := []byte(fmt.Sprint("msg ", round, i))
			var sig []byte
			switch c := r.IntN(20); {
			case c == 0:
				sig = ed25519.Sign(privs[ki], m)
				sig[r.IntN(64)] ^= byte(1 << r.IntN(8))
			case c == 1:
				sig = ed25519.Sign(privs[(ki+1)%len(keys)], m)
			case c == 2:
				sig = make([]byte, 64)
				for j := range sig {
					sig[j] = byte(r.Uint32())
				}
			case c < 5:
				sig = edkeytest.TorsionSign(privs[ki], m, []int{4, 4, 1, 2, 6}[r.IntN(5)])
			default:
				sig = ed25519.Sign(privs[ki], m)
			}
			want = want && keys[ki].VerifyCofactored(m, sig)
			b.Add(keys[ki], m, sig)
		}
		if b.Len() != n {
			t.Fatalf("round %d: Len %d, want %d", round, b.Len(), n)
		}
		if got := b.Verify(); got != want {
			t.Fatalf("round %d (%d signatures): batch %v, one by one %v", round, n, got, want)
		}
		b.Reset()
		if b.Len() != 0 || !b.Verify() {
			t.Fatal("a reset batch is not empty")
		}
	}
	// A key that is not a curve point verifies nothing, alone or in a batch.
	bad, err := Of(bytes.Repeat([]byte{0xee}, 32))
	if err != nil {
		t.Fatal(err)
	}
	b := NewBatch(2)
	b.Add(k, msg, ed25519.Sign(priv, msg))
	b.Add(bad, msg, make([]byte, 64))
	if bad.VerifyCofactored(msg, make([]byte, 64)) || b.Verify() {
		t.Fatal("a key that is not a point verified")
	}
}

// TestOfID: a key found by peer ID is the key of the ID's public key, and
// IDs that do not embed an Ed25519 key are refused.
func TestOfID(t *testing.T) {
	priv := seedKey(7)
	pk, err := crypto.UnmarshalEd25519PublicKey(priv.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPublicKey(pk)
	if err != nil {
		t.Fatal(err)
	}
	k, err := OfID(id.String())
	if err != nil {
		t.Fatal(err)
	}
	if k.ID != id || k.S != id.String() {
		t.Fatalf("OfID: got %s, want %s", k.S, id)
	}
	msg := []byte("heartbeat")
	if !k.Verify(msg, ed25519.Sign(priv, msg)) {
		t.Fatal("valid signature refused")
	}
	if k.Verify([]byte("other"), ed25519.Sign(priv, msg)) {
		t.Fatal("signature of another message accepted")
	}
	for _, bad := range []string{"", "not-an-id", "QmYyQSo1c1Ym7orWxLYvCrM2EmxFTANf8wXmmE7DWjhx5N"} {
		if _, err := OfID(bad); err == nil {
			t.Errorf("OfID(%q): no error", bad)
		}
	}
}

func BenchmarkVerify(b *testing.B) {
	priv := seedKey(9)
	pub := priv.Public().(ed25519.PublicKey)
	msg := bytes.Repeat([]byte{1}, 300)
	sig := ed25519.Sign(priv, msg)
	k, err := Of(pub)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("edkey", func(b *testing.B) {
		for b.Loop() {
			if !k.Verify(msg, sig) {
				b.Fatal("refused")
			}
		}
	})
	b.Run("stdlib", func(b *testing.B) {
		for b.Loop() {
			if !ed25519.Verify(pub, msg, sig) {
				b.Fatal("refused")
			}
		}
	})
	b.Run("cofactored", func(b *testing.B) {
		for b.Loop() {
			if !k.VerifyCofactored(msg, sig) {
				b.Fatal("refused")
			}
		}
	})
	// batch=n: ns/op is per signature.
	for _, n := range []int{2, 8, 32, 64, 128, 256, 1024} {
		b.Run(fmt.Sprint("batch=", n), func(b *testing.B) {
			bt := NewBatch(n)
			for i := 0; i < b.N; i += n {
				bt.Reset()
				for j := 0; j < n; j++ {
					bt.Add(k, msg, sig)
				}
				if !bt.Verify() {
					b.Fatal("refused")
				}
			}
		})
	}
}
