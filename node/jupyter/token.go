package jupyter

import (
	"crypto/ecdh"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"math/big"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Token is a contract's Jupyter token, which the host machine and the
// renter derive alone and alike, with nothing stored or sent: HMAC-SHA256,
// keyed by the X25519 agreement of the host machine's key and the renter
// person's key (both Ed25519, mapped to X25519 as libsodium and age do),
// of the contract's ID; base64url, 43 characters. own is one side's
// private key, other the other side's ID (a peer ID: the host machine's,
// or the renter's person ID).
func Token(own crypto.PrivKey, other, contract string) (string, error) {
	id, err := peer.Decode(other)
	if err != nil {
		return "", fmt.Errorf("jupyter: token: %q is not a peer ID: %w", other, err)
	}
	pub, err := id.ExtractPublicKey()
	if err != nil {
		return "", fmt.Errorf("jupyter: token: %w", err)
	}
	shared, err := agree(own, pub)
	if err != nil {
		return "", err
	}
	m := hmac.New(sha256.New, shared)
	m.Write([]byte("cshare jupyter token\x00" + contract))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)), nil
}

// agree is the X25519 agreement of Ed25519 keys own and other.
func agree(own crypto.PrivKey, other crypto.PubKey) ([]byte, error) {
	if own.Type() != crypto.Ed25519 || other.Type() != crypto.Ed25519 {
		return nil, errors.New("jupyter: token: both keys must be Ed25519")
	}
	raw, err := own.Raw() // seed || public key
	if err != nil {
		return nil, err
	}
	h := sha512.Sum512(raw[:32])
	priv, err := ecdh.X25519().NewPrivateKey(h[:32]) // clamped by X25519
	if err != nil {
		return nil, err
	}
	praw, err := other.Raw()
	if err != nil {
		return nil, err
	}
	u, err := montgomery(praw)
	if err != nil {
		return nil, err
	}
	pub, err := ecdh.X25519().NewPublicKey(u)
	if err != nil {
		return nil, err
	}
	return priv.ECDH(pub) // an error for a low-order point
}

var p25519 = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(19))

// montgomery maps an Ed25519 public key (y, little-endian, the sign of x
// in the top bit) to the X25519 u-coordinate (1+y)/(1-y) mod p.
func montgomery(edPub []byte) ([]byte, error) {
	if len(edPub) != 32 {
		return nil, errors.New("jupyter: token: an Ed25519 public key is 32 bytes")
	}
	be := make([]byte, 32)
	for i := range 32 {
		be[i] = edPub[31-i]
	}
	be[0] &= 0x7f
	y := new(big.Int).SetBytes(be)
	if y.Cmp(p25519) >= 0 {
		return nil, errors.New("jupyter: token: a public key out of range")
	}
	den := new(big.Int).Sub(big.NewInt(1), y)
	den.Mod(den, p25519)
	if den.Sign() == 0 {
		return nil, errors.New("jupyter: token: the identity as a public key")
	}
	u := new(big.Int).Add(big.NewInt(1), y)
	u.Mul(u, den.ModInverse(den, p25519))
	u.Mod(u, p25519)
	out := make([]byte, 32)
	ub := u.Bytes()
	for i := range ub {
		out[i] = ub[len(ub)-1-i]
	}
	return out, nil
}
