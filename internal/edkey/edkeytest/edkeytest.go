// Package edkeytest builds, for tests, Ed25519 signatures that implementations
// are known to disagree on: valid by the cofactored equation only.
package edkeytest

import (
	"crypto/ed25519"
	"crypto/sha512"

	"github.com/oasisprotocol/curve25519-voi/curve"
	"github.com/oasisprotocol/curve25519-voi/curve/scalar"
)

// TorsionSign signs msg with priv as Ed25519 does, except that R carries
// the small-order point curve.EIGHT_TORSION[tor] (tor in 0..7): the
// cofactored equation holds, the cofactorless one (crypto/ed25519's) does
// not unless tor is 0. Only the holder of priv can make one.
func TorsionSign(priv ed25519.PrivateKey, msg []byte, tor int) []byte {
	h := sha512.Sum512(priv.Seed())
	h[0] &= 248
	h[31] &= 127
	h[31] |= 64
	var a, r, k, s scalar.Scalar
	if _, err := a.SetBytesModOrder(h[:32]); err != nil {
		panic(err)
	}
	nonce := sha512.Sum512(append(append(h[32:], byte(tor)), msg...))
	if _, err := r.SetBytesModOrderWide(nonce[:]); err != nil {
		panic(err)
	}
	var R curve.EdwardsPoint
	R.MulBasepoint(curve.ED25519_BASEPOINT_TABLE, &r)
	R.Add(&R, curve.EIGHT_TORSION[tor&7])
	var rc curve.CompressedEdwardsY
	rc.SetEdwardsPoint(&R)
	d := sha512.New()
	d.Write(rc[:])
	d.Write(priv.Public().(ed25519.PublicKey))
	d.Write(msg)
	if _, err := k.SetBytesModOrderWide(d.Sum(nil)); err != nil {
		panic(err)
	}
	s.Mul(&k, &a)
	s.Add(&s, &r)
	sig := make([]byte, ed25519.SignatureSize)
	copy(sig, rc[:])
	if err := s.ToBytes(sig[32:]); err != nil {
		panic(err)
	}
	return sig
}
