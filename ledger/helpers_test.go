package ledger

import (
	"crypto/ed25519"
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
