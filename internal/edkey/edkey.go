// Package edkey owns the fast Ed25519 verification shared by the ledger and
// the gossip layer: an author's or machine's public key, decompressed and
// expanded once and cached, checked with curve25519-voi.
//
// Every node must agree on which signatures verify, whatever library it
// uses. Two rules are offered:
//
//   - Verify accepts exactly what crypto/ed25519 accepts (cofactorless,
//     canonical S and R); it is about twice as fast on amd64. Heartbeats,
//     offers and capabilities use it.
//   - VerifyCofactored, and Batch, accept what Verify accepts plus the
//     signatures that only the cofactored equation [8]R = [8]([S]B - [k]A)
//     accepts (RFC 8032 §5.1.7, FIPS 186-5): those whose R or A carry a
//     small-order component, which no honest signer makes. Batch
//     verification can only check the cofactored equation (with the
//     cofactorless one a batch and a single check can disagree on such a
//     signature), so a rule whose signatures arrive in batches (ledger
//     entries) must be this one, single or batched, on every node. A batch
//     of n costs about a third of n single checks at n = 1000.
package edkey

import (
	"crypto/ed25519"
	"fmt"
	"sync"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	voied "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
)

// Key is what is derived from an Ed25519 public key: its libp2p peer ID, the
// ID's string form, and the key expanded for fast verification. Deriving
// these costs a protobuf encoding, a base58 encoding and a point
// decompression, and an org has few keys that sign many messages, so they
// are cached.
type Key struct {
	ID  peer.ID
	S   string
	xpk *voied.ExpandedPublicKey // nil: not a valid curve point, nothing verifies
}

const cacheMax = 4096 // an expanded key is ~1.5 KiB

var cache = struct {
	sync.Mutex
	byPub map[[ed25519.PublicKeySize]byte]*Key
	byID  map[string]*Key
}{byPub: map[[ed25519.PublicKeySize]byte]*Key{}, byID: map[string]*Key{}}

// Of returns the key of a raw 32-byte Ed25519 public key.
func Of(pub []byte) (*Key, error) {
	if len(pub) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("public key is %d bytes", len(pub))
	}
	k := [ed25519.PublicKeySize]byte(pub)
	if key := lookup(cache.byPub, k); key != nil {
		return key, nil
	}
	pk, err := crypto.UnmarshalEd25519PublicKey(pub)
	if err != nil {
		return nil, err
	}
	id, err := peer.IDFromPublicKey(pk)
	if err != nil {
		return nil, err
	}
	key := &Key{ID: id, S: id.String()}
	if xpk, err := voied.NewExpandedPublicKey(voied.PublicKey(pub)); err == nil {
		key.xpk = xpk
	}
	store(cache.byPub, k, key)
	return key, nil
}

// OfID returns the key of a peer ID given in its string form; the ID must
// embed an Ed25519 public key (as every cshare machine's does).
func OfID(s string) (*Key, error) {
	if key := lookup(cache.byID, s); key != nil {
		return key, nil
	}
	id, err := peer.Decode(s)
	if err != nil {
		return nil, err
	}
	pk, err := id.ExtractPublicKey()
	if err != nil {
		return nil, err
	}
	if pk.Type() != crypto.Ed25519 {
		return nil, fmt.Errorf("key type %v is not Ed25519", pk.Type())
	}
	raw, err := pk.Raw()
	if err != nil {
		return nil, err
	}
	key, err := Of(raw)
	if err != nil {
		return nil, err
	}
	store(cache.byID, s, key)
	return key, nil
}

func lookup[K comparable](m map[K]*Key, k K) *Key {
	cache.Lock()
	defer cache.Unlock()
	return m[k]
}

// store caches key under k, emptying the map first when it is full.
func store[K comparable](m map[K]*Key, k K, key *Key) {
	cache.Lock()
	defer cache.Unlock()
	if len(m) >= cacheMax {
		clear(m)
	}
	m[k] = key
}

var (
	stdLib = &voied.Options{Verify: voied.VerifyOptionsStdLib}
	// cofactored is crypto/ed25519's acceptance of encodings (small-order
	// and non-canonical A, small-order R allowed; S and R canonical) with the
	// cofactored equation: a superset of stdLib that batches can check.
	cofactored = &voied.Options{Verify: &voied.VerifyOptions{
		AllowSmallOrderA:   true,
		AllowSmallOrderR:   true,
		AllowNonCanonicalA: true,
	}}
)

// Verify reports whether sig is the key's valid signature of msg, by the
// standard library's rules.
func (k *Key) Verify(msg, sig []byte) bool {
	if k.xpk == nil || len(sig) != ed25519.SignatureSize {
		return false
	}
	return voied.VerifyExpandedWithOptions(k.xpk, msg, sig, stdLib)
}

// VerifyCofactored reports whether sig is the key's valid signature of msg
// by the cofactored rule (see the package doc): what Verify accepts, and the
// signatures with small-order components that only the cofactored equation
// accepts. A Batch accepts the same set.
func (k *Key) VerifyCofactored(msg, sig []byte) bool {
	if k.Verify(msg, sig) { // the cheaper check, and every honest signature passes it
		return true
	}
	return k.xpk != nil && len(sig) == ed25519.SignatureSize && voied.VerifyExpandedWithOptions(k.xpk, msg, sig, cofactored)
}

// Batch checks many signatures together by the cofactored rule, about three
// times faster per signature than VerifyCofactored for a thousand. Its
// answer for a batch is VerifyCofactored's for every signature in it,
// except with probability below 2^-128 (the batch equation is weighted by
// random 128-bit scalars from crypto/rand). The zero value is not usable;
// call NewBatch.
type Batch struct {
	v   *voied.BatchVerifier
	bad bool // a signature that cannot verify was added
	n   int
}

// NewBatch returns an empty batch with room for n signatures.
func NewBatch(n int) *Batch { return &Batch{v: voied.NewBatchVerifierWithCapacity(n)} }

// Add adds sig, the key's signature of msg. msg is read during Add only.
func (b *Batch) Add(k *Key, msg, sig []byte) {
	b.n++
	if k.xpk == nil || len(sig) != ed25519.SignatureSize {
		b.bad = true
		return
	}
	b.v.AddExpandedWithOptions(k.xpk, msg, sig, cofactored)
}

// Len is the number of signatures added since the last Reset.
func (b *Batch) Len() int { return b.n }

// Verify reports whether every signature added verifies. An empty batch
// verifies. When it reports false, which ones do not is unknown: check them
// one by one (VerifyCofactored).
func (b *Batch) Verify() bool {
	if b.n == 0 {
		return true
	}
	return !b.bad && b.v.VerifyBatchOnly(nil)
}

// Reset empties the batch for reuse.
func (b *Batch) Reset() {
	b.v.Reset()
	b.bad, b.n = false, 0
}
