package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cshare/cshare/internal/atomicfile"
	"github.com/cshare/cshare/internal/text"
)

// TokensFile is where a node keeps its API access tokens, hashed, in its
// data dir.
const TokensFile = "api-tokens.json"

// Bounds of access tokens.
const (
	MaxTokens       = 256
	MaxTokenExpires = 10 * 365 * 24 * time.Hour
	tokenPrefix     = "cst_"
)

// TokenCreate is POST /v1/tokens: a token of Scope (read, submit, admin)
// for Expires (a duration: 90m, 12h, 30d), named Name (optional).
type TokenCreate struct {
	Name    string `json:"name,omitempty"`
	Scope   string `json:"scope"`
	Expires string `json:"expires"`
}

// TokenInfo is an access token as listed: never its secret.
type TokenInfo struct {
	ID      string    `json:"id"`
	Name    string    `json:"name,omitempty"`
	Scope   string    `json:"scope"`
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires"`
	Expired bool      `json:"expired"`
}

// TokenCreated is a new token: the secret is shown this once.
type TokenCreated struct {
	TokenInfo
	Token string `json:"token"`
}

// TokensAPI is the node's API access tokens (*Tokens).
type TokensAPI interface {
	CreateToken(ctx context.Context, req TokenCreate) (TokenCreated, error)
	ListTokens(ctx context.Context) ([]TokenInfo, error)
	RevokeToken(ctx context.Context, id string) (TokenInfo, error)
}

func tokenRoutes(svc TokensAPI) []route {
	return []route{
		{"POST /v1/tokens", decoded(svc.CreateToken)},
		{"GET /v1/tokens", whole(func(t TokenInfo) string { return t.ID }, svc.ListTokens)},
		{"POST /v1/tokens/{id}/revoke", onPath("id", svc.RevokeToken)},
	}
}

// Tokens are a node's API access tokens, kept in TokensFile with each
// secret's SHA-256 only.
type Tokens struct {
	path string
	now  func() time.Time
	mu   sync.Mutex
	recs []tokenRec
}

type tokenRec struct {
	TokenInfo
	Hash string `json:"sha256"`
}

// OpenTokens reads the tokens kept at path (none when it does not exist).
func OpenTokens(path string, now func() time.Time) (*Tokens, error) {
	t := &Tokens{path: path, now: now}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return t, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &t.recs); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// ParseExpires reads a token's lifetime: a Go duration (90m, 12h) or a
// number of days (30d), from a minute to ten years.
func ParseExpires(s string) (time.Duration, error) {
	var d time.Duration
	var err error
	if n, ok := strings.CutSuffix(s, "d"); ok {
		var days int64
		if days, err = strconv.ParseInt(n, 10, 64); err == nil && days <= int64(MaxTokenExpires/(24*time.Hour)) {
			d = time.Duration(days) * 24 * time.Hour
		} else if err == nil {
			err = errors.New("too long")
		}
	} else {
		d, err = time.ParseDuration(s)
	}
	if err != nil || d < time.Minute || d > MaxTokenExpires {
		return 0, FieldErrorf(http.StatusBadRequest, "expires", "expires: %q is not a lifetime from 1m to 3650d; give e.g. 12h or 30d", Ellipsize(s))
	}
	return d, nil
}

// CreateToken makes a token and keeps its hash.
func (t *Tokens) CreateToken(_ context.Context, req TokenCreate) (TokenCreated, error) {
	scope, err := ParseScope(req.Scope)
	if err != nil {
		return TokenCreated{}, FieldErrorf(http.StatusBadRequest, "scope", "%v", err)
	}
	d, err := ParseExpires(req.Expires)
	if err != nil {
		return TokenCreated{}, err
	}
	name := strings.TrimSpace(req.Name)
	if name != "" {
		if err := text.CheckName("name", name); err != nil {
			return TokenCreated{}, BadRequest(err)
		}
	}
	secret := make([]byte, 24)
	id := make([]byte, 4)
	if _, err := rand.Read(secret); err != nil {
		return TokenCreated{}, err
	}
	if _, err := rand.Read(id); err != nil {
		return TokenCreated{}, err
	}
	tok := tokenPrefix + hex.EncodeToString(secret)
	now := t.now().UTC().Truncate(time.Second)
	rec := tokenRec{TokenInfo: TokenInfo{ID: hex.EncodeToString(id), Name: name, Scope: scope.String(), Created: now, Expires: now.Add(d)}, Hash: hashToken(tok)}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.recs) >= MaxTokens {
		return TokenCreated{}, Errorf(http.StatusConflict, "tokens: this node keeps %d already; revoke some first (cshare node token revoke ID)", MaxTokens)
	}
	if err := t.saveLocked(append(t.recs, rec)); err != nil {
		return TokenCreated{}, err
	}
	t.recs = append(t.recs, rec)
	return TokenCreated{TokenInfo: rec.TokenInfo, Token: tok}, nil
}

// ListTokens lists the tokens, oldest first, with whether each expired.
func (t *Tokens) ListTokens(context.Context) ([]TokenInfo, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	out := make([]TokenInfo, len(t.recs))
	for i, r := range t.recs {
		out[i] = r.TokenInfo
		out[i].Expired = !now.Before(r.Expires)
	}
	return out, nil
}

// RevokeToken forgets the token with ID id.
func (t *Tokens) RevokeToken(_ context.Context, id string) (TokenInfo, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, r := range t.recs {
		if r.ID == id {
			rest := append(append([]tokenRec(nil), t.recs[:i]...), t.recs[i+1:]...)
			if err := t.saveLocked(rest); err != nil {
				return TokenInfo{}, err
			}
			t.recs = rest
			return r.TokenInfo, nil
		}
	}
	return TokenInfo{}, FieldErrorf(http.StatusNotFound, "id", "no such token: %s (cshare node token ls lists them)", text.Echo(id))
}

// Lookup is the scope of the token secret, if it is a token of this node
// that has not expired.
func (t *Tokens) Lookup(secret string) (Scope, bool) {
	if !strings.HasPrefix(secret, tokenPrefix) {
		return ScopeNone, false
	}
	h := hashToken(secret)
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	for _, r := range t.recs {
		if subtle.ConstantTimeCompare([]byte(r.Hash), []byte(h)) == 1 && now.Before(r.Expires) {
			s, err := ParseScope(r.Scope)
			return s, err == nil
		}
	}
	return ScopeNone, false
}

func (t *Tokens) saveLocked(recs []tokenRec) error {
	if recs == nil {
		recs = []tokenRec{}
	}
	b, err := json.MarshalIndent(recs, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(t.path, append(b, '\n'), 0o600)
}

func hashToken(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// CreateToken makes an API access token (the secret is in the answer
// only).
func (c *Client) CreateToken(ctx context.Context, req TokenCreate) (TokenCreated, error) {
	var out TokenCreated
	return out, c.do(ctx, http.MethodPost, "/v1/tokens", req, &out)
}

// Tokens lists the node's API access tokens.
func (c *Client) Tokens(ctx context.Context) ([]TokenInfo, error) {
	return get[[]TokenInfo](c, ctx, "/v1/tokens")
}

// RevokeToken revokes the access token with ID id.
func (c *Client) RevokeToken(ctx context.Context, id string) (TokenInfo, error) {
	var out TokenInfo
	return out, c.do(ctx, http.MethodPost, "/v1/tokens/"+esc(id)+"/revoke", nil, &out)
}
