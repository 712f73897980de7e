package ledger

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/ipfs/go-cid"
	ma "github.com/multiformats/go-multiaddr"
)

// Capability kinds.
const (
	CapOrgKey = "orgkey" // the org's standing key: admits machines as pending members
	CapInvite = "invite" // an invite: admits the joiner with its role, approved
)

const capDomain = "cshare-cap-v1\x00"

// Capability is an admission right signed by an admin: the heart of an org key
// or an invite code. The fold re-checks it against the State at the position of
// the machine.register entry that carries it.
type Capability struct {
	Org     string `cbor:"org"`
	Kind    string `cbor:"kind"`
	ID      string `cbor:"id"`
	Role    string `cbor:"role"`
	Expires int64  `cbor:"expires,omitempty"` // Unix ms; 0 = never
	Uses    int64  `cbor:"uses,omitempty"`    // 0 = unlimited
	Issuer  []byte `cbor:"issuer"`
	Sig     []byte `cbor:"sig,omitempty"`
}

func (c Capability) signedBytes() []byte {
	c.Sig = nil
	b, _ := encMode.Marshal(c)
	return b
}

// SignCapability fills in the issuer and signature.
func (s *Signer) SignCapability(c Capability) Capability {
	c.Issuer = s.pub
	c.Sig = s.SignBytes(capDomain, c.signedBytes())
	return c
}

// Verify checks the capability's signature.
func (c Capability) Verify() bool {
	return VerifyDetached(c.Issuer, capDomain, c.signedBytes(), c.Sig)
}

// Token is what a user copies: an org key or an invite code.
type Token struct {
	Cap   Capability `cbor:"cap"`
	Addrs []string   `cbor:"addrs"`
}

const tokenPrefix = "cshare1"

// MaxTokenLen caps a token's text length.
const MaxTokenLen = 8 << 10

// ErrBadToken says an org key or invite code cannot be used.
var ErrBadToken = errors.New("ledger: malformed org key")

// Encode renders the token as one copy-pasteable string.
func (t Token) Encode() string {
	b, _ := encMode.Marshal(t)
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// ParseToken decodes and checks an org key or invite code: its shape, its org
// ID, its addresses and its signature. Whether the issuer may issue it is the
// ledger's question, answered when the join is applied.
func ParseToken(s string) (Token, error) {
	s = strings.TrimSpace(s)
	var t Token
	if len(s) > MaxTokenLen {
		return t, fmt.Errorf("%w: %d characters is too long", ErrBadToken, len(s))
	}
	if !strings.HasPrefix(s, tokenPrefix) {
		return t, fmt.Errorf("%w: it should start with %q", ErrBadToken, tokenPrefix)
	}
	b, err := base64.RawURLEncoding.DecodeString(s[len(tokenPrefix):])
	if err != nil {
		return t, fmt.Errorf("%w: not base64url (was it cut when copied?)", ErrBadToken)
	}
	if err := decMode.Unmarshal(b, &t); err != nil {
		return t, fmt.Errorf("%w: %v", ErrBadToken, err)
	}
	c := t.Cap
	if _, err := cid.Decode(c.Org); err != nil {
		return t, fmt.Errorf("%w: org ID %q is not a CID", ErrBadToken, c.Org)
	}
	if c.Kind != CapOrgKey && c.Kind != CapInvite {
		return t, fmt.Errorf("%w: capability kind %q", ErrBadToken, c.Kind)
	}
	if c.Role != RoleMember && c.Role != RoleAdmin {
		return t, fmt.Errorf("%w: role %q (allowed: member, admin)", ErrBadToken, c.Role)
	}
	if c.ID == "" || len(c.ID) > 64 || c.Uses < 0 || c.Expires < 0 {
		return t, fmt.Errorf("%w: bad capability fields", ErrBadToken)
	}
	if len(t.Addrs) == 0 || len(t.Addrs) > 32 {
		return t, fmt.Errorf("%w: it names %d bootstrap addresses (want 1..32)", ErrBadToken, len(t.Addrs))
	}
	for _, a := range t.Addrs {
		if _, err := ma.NewMultiaddr(a); err != nil {
			return t, fmt.Errorf("%w: bootstrap address %q: %v", ErrBadToken, a, err)
		}
	}
	if !c.Verify() {
		return t, fmt.Errorf("%w: signature does not verify", ErrBadToken)
	}
	return t, nil
}
