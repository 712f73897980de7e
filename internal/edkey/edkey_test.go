package edkey

import (
	"bytes"
	"crypto/ed25519"
	"math/rand/v2"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
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
}
