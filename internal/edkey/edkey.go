// Package edkey owns the fast Ed25519 verification shared by the ledger and
// the gossip layer: an author's or machine's public key, decompressed and
// expanded once and cached, checked with curve25519-voi under the standard
// library's acceptance rules.
//
// Every node must agree on which signatures verify, whatever library it
// uses, so verification here accepts exactly what crypto/ed25519 accepts
// (cofactorless, canonical S and R); it is about twice as fast on amd64.
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

var stdLib = &voied.Options{Verify: voied.VerifyOptionsStdLib}

// Verify reports whether sig is the key's valid signature of msg, by the
// standard library's rules.
func (k *Key) Verify(msg, sig []byte) bool {
	if k.xpk == nil || len(sig) != ed25519.SignatureSize {
		return false
	}
	return voied.VerifyExpandedWithOptions(k.xpk, msg, sig, stdLib)
}
