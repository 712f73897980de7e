// Package regauth owns a renter's registry credentials for a private
// image (issue 31 item 6): it reads them from the file a person gives
// (a Docker config JSON, or one line user:token), seals them with age to
// the X25519 recipients that host machines publish in their offers and
// heartbeats, and opens them on the host, for the one person and image
// they were sealed for. It also keeps a node's age identity in its data
// dir (identity.go).
//
// Credentials never leave this package in a form that prints them: Creds
// formats and logs as its server alone, and no error quotes a byte of a
// credential.
package regauth

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"unicode"

	"filippo.io/age"
	"github.com/distribution/reference"
)

// Size bounds.
const (
	// MaxSealed caps a sealed blob, as the ledger takes it.
	MaxSealed = 16 << 10
	// MaxFile caps the file a person gives.
	MaxFile = 64 << 10
	// MaxRecipients caps the machines one blob is sealed to.
	MaxRecipients = 128
	maxServer     = 255
	maxUsername   = 1024
	maxSecret     = 8192
	sealedHeader  = "age-encryption.org/v1\n"
	sealedVersion = 1
)

// Errors callers branch on.
var (
	// ErrNotForThisMachine: the blob was not sealed to this machine's
	// identity (for a job: the machine joined after the submission).
	ErrNotForThisMachine = errors.New("registry_auth: sealed to other machines, not this one")
	// ErrMismatch: the blob was sealed for another person or registry
	// than the contract's or job's (copied from another's spec).
	ErrMismatch = errors.New("registry_auth: sealed for another person or registry")
)

// Creds are the credentials for one registry. Username with Password, or
// IdentityToken (an OAuth refresh token, as docker login keeps it).
type Creds struct {
	Server        string `json:"server"`
	Username      string `json:"username,omitempty"`
	Password      string `json:"password,omitempty"`
	IdentityToken string `json:"identitytoken,omitempty"`
}

// String names the server only: credentials never print.
func (c Creds) String() string { return "credentials for " + c.Server + " (not shown)" }

// GoString is String, so %#v does not print them either.
func (c Creds) GoString() string { return c.String() }

// LogValue is the server only.
func (c Creds) LogValue() slog.Value { return slog.StringValue(c.String()) }

// check bounds c's fields; errors name the field, never its value.
func (c Creds) check(field string) error {
	switch {
	case c.Server == "" || len(c.Server) > maxServer || strings.ContainsFunc(c.Server, badRune):
		return fmt.Errorf("%s: registry %q; allowed: a host[:port] of 1..%d printable characters", field, clip(c.Server), maxServer)
	case len(c.Username) > maxUsername || strings.ContainsFunc(c.Username, badRune):
		return fmt.Errorf("%s: the username is %d bytes or holds a space or control character; allowed: 1..%d printable characters", field, len(c.Username), maxUsername)
	case len(c.Password) > maxSecret || strings.ContainsFunc(c.Password, badRune):
		return fmt.Errorf("%s: the password is %d bytes or holds a space or control character; allowed: 1..%d printable characters", field, len(c.Password), maxSecret)
	case len(c.IdentityToken) > maxSecret || strings.ContainsFunc(c.IdentityToken, badRune):
		return fmt.Errorf("%s: the identity token is %d bytes or holds a space or control character; allowed: 1..%d printable characters", field, len(c.IdentityToken), maxSecret)
	case c.IdentityToken == "" && (c.Username == "" || c.Password == ""):
		return fmt.Errorf("%s: no username and password (or identity token) for %s; allowed: a Docker config with auths.%s.auth (base64 of user:password), or a line user:token", field, c.Server, c.Server)
	}
	return nil
}

func badRune(r rune) bool {
	return unicode.IsSpace(r) || unicode.IsControl(r) || r == unicode.ReplacementChar
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// RegistryHost is the registry an image reference pulls from, as Docker
// names it ("docker.io" for Docker Hub, "127.0.0.1:5000", ...).
func RegistryHost(image string) (string, error) {
	n, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return "", fmt.Errorf("image: %q is not an image reference", clip(image))
	}
	return reference.Domain(n), nil
}

// normHost is a Docker config's auths key as a registry host: no scheme,
// no path, Docker Hub's aliases as docker.io.
func normHost(k string) string {
	k = strings.TrimPrefix(strings.TrimPrefix(k, "https://"), "http://")
	if i := strings.IndexByte(k, '/'); i >= 0 {
		k = k[:i]
	}
	k = strings.ToLower(k)
	switch k {
	case "index.docker.io", "registry-1.docker.io", "registry.hub.docker.com":
		return "docker.io"
	}
	return k
}

// dockerConfig is what this package reads of a Docker config.
type dockerConfig struct {
	Auths map[string]struct {
		Auth          string `json:"auth"`
		Username      string `json:"username"`
		Password      string `json:"password"`
		IdentityToken string `json:"identitytoken"`
	} `json:"auths"`
	CredsStore  string            `json:"credsStore"`
	CredHelpers map[string]string `json:"credHelpers"`
}

// ParseFile reads the credentials for image's registry from a file's
// bytes: a Docker config JSON ({"auths":{"REGISTRY":{"auth":"BASE64"}}},
// or username and password, or identitytoken, in place of auth), or one
// line user:token, taken for the image's registry. Errors are one line,
// start with field, and quote no credential.
func ParseFile(field string, data []byte, image string) (Creds, error) {
	if len(data) > MaxFile {
		return Creds{}, fmt.Errorf("%s: the file is %d bytes; at most %d", field, len(data), MaxFile)
	}
	host, err := RegistryHost(image)
	if err != nil {
		return Creds{}, fmt.Errorf("%s: %v", field, err)
	}
	t := bytes.TrimSpace(data)
	if len(t) == 0 {
		return Creds{}, fmt.Errorf("%s: the file is empty; allowed: a Docker config JSON, or one line user:token", field)
	}
	if t[0] == '{' {
		return parseConfig(field, t, host)
	}
	if bytes.ContainsAny(t, "\r\n") {
		return Creds{}, fmt.Errorf("%s: more than one line, and not JSON; allowed: a Docker config JSON, or one line user:token", field)
	}
	user, token, ok := strings.Cut(string(t), ":")
	if !ok || user == "" || token == "" {
		return Creds{}, fmt.Errorf("%s: not user:token (no colon, or an empty side); allowed: a Docker config JSON, or one line user:token", field)
	}
	c := Creds{Server: host, Username: user, Password: token}
	return c, c.check(field)
}

func parseConfig(field string, data []byte, host string) (Creds, error) {
	var cfg dockerConfig
	if err := json.Unmarshal(data, &cfg); err != nil {
		// json's messages can quote a character of the input: say where.
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return Creds{}, fmt.Errorf("%s: not valid JSON (syntax error at byte %d); allowed: a Docker config JSON, or one line user:token", field, se.Offset)
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return Creds{}, fmt.Errorf("%s: %s is not a %s; allowed: a Docker config {\"auths\":{\"REGISTRY\":{\"auth\":\"BASE64\"}}}", field, te.Field, te.Value)
		}
		return Creds{}, fmt.Errorf("%s: not a Docker config JSON", field)
	}
	keys := make([]string, 0, len(cfg.Auths))
	for k := range cfg.Auths {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if normHost(k) != host {
			continue
		}
		a := cfg.Auths[k]
		c := Creds{Server: host, Username: a.Username, Password: a.Password, IdentityToken: a.IdentityToken}
		if a.Auth != "" {
			raw, err := base64.StdEncoding.DecodeString(a.Auth)
			if err != nil {
				return Creds{}, fmt.Errorf("%s: auths.%s.auth is not base64; allowed: base64 of user:password", field, clip(k))
			}
			u, p, ok := strings.Cut(string(raw), ":")
			if !ok || u == "" || p == "" {
				return Creds{}, fmt.Errorf("%s: auths.%s.auth is not base64 of user:password (no colon, or an empty side)", field, clip(k))
			}
			c.Username, c.Password = u, p
		}
		return c, c.check(field)
	}
	if cfg.CredsStore != "" || len(cfg.CredHelpers) > 0 {
		return Creds{}, fmt.Errorf("%s: no auths entry for %s: this config keeps its credentials in a credential helper (credsStore, credHelpers), which cshare does not run; allowed: a config with auths.%s.auth, or a line user:token", field, host, host)
	}
	have := make([]string, 0, len(keys))
	for _, k := range keys {
		have = append(have, fmt.Sprintf("%q", clip(k)))
	}
	if len(have) == 0 {
		have = append(have, "none")
	}
	return Creds{}, fmt.Errorf("%s: no auths entry for the image's registry %s (the file has: %s)", field, host, strings.Join(have, ", "))
}

// sealed is the plaintext inside a blob: the credentials and the person
// they were sealed for.
type sealed struct {
	V      int    `json:"v"`
	Person string `json:"person"`
	Creds
}

// Seal encrypts c for person to the age recipients given (a host's, or
// every approved machine's for a job). The blob is at most MaxSealed.
func Seal(field, person string, c Creds, recipients []string) ([]byte, error) {
	if err := c.check(field); err != nil {
		return nil, err
	}
	if person == "" {
		return nil, fmt.Errorf("%s: no person to seal the credentials for (this node is in no org?)", field)
	}
	if len(recipients) == 0 {
		return nil, fmt.Errorf("%s: no machine to seal the credentials to: none publishes an age recipient yet", field)
	}
	if len(recipients) > MaxRecipients {
		return nil, fmt.Errorf("%s: %d machines to seal to; at most %d", field, len(recipients), MaxRecipients)
	}
	rs := make([]age.Recipient, 0, len(recipients))
	for _, r := range recipients {
		x, err := age.ParseX25519Recipient(r)
		if err != nil {
			return nil, fmt.Errorf("%s: recipient %q is not an age X25519 recipient", field, clip(r))
		}
		rs = append(rs, x)
	}
	plain, err := json.Marshal(sealed{V: sealedVersion, Person: person, Creds: c})
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	w, err := age.Encrypt(&out, rs...)
	if err != nil {
		return nil, fmt.Errorf("%s: encrypt: %v", field, err)
	}
	if _, err := w.Write(plain); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	if out.Len() > MaxSealed {
		return nil, fmt.Errorf("%s: sealed to %d machines the credentials take %d bytes; at most %d", field, len(rs), out.Len(), MaxSealed)
	}
	return out.Bytes(), nil
}

// CheckSealed is what the ledger checks of a blob without opening it: its
// size and age's header line.
func CheckSealed(field string, b []byte) error {
	if len(b) > MaxSealed {
		return fmt.Errorf("%s: %d bytes; at most %d", field, len(b), MaxSealed)
	}
	if !bytes.HasPrefix(b, []byte(sealedHeader)) {
		return fmt.Errorf("%s: not an age-encrypted blob (age-encryption.org/v1)", field)
	}
	return nil
}

// Open decrypts a blob with this machine's identity and returns the
// credentials if they were sealed for person and image's registry.
func Open(b []byte, id age.Identity, person, image string) (Creds, error) {
	if err := CheckSealed("registry_auth", b); err != nil {
		return Creds{}, err
	}
	r, err := age.Decrypt(bytes.NewReader(b), id)
	if err != nil {
		var nm *age.NoIdentityMatchError
		if errors.As(err, &nm) {
			return Creds{}, ErrNotForThisMachine
		}
		return Creds{}, fmt.Errorf("registry_auth: cannot decrypt: %v", err)
	}
	plain, err := io.ReadAll(io.LimitReader(r, MaxSealed+1))
	if err != nil {
		return Creds{}, fmt.Errorf("registry_auth: cannot decrypt: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(plain))
	dec.DisallowUnknownFields()
	var s sealed
	if err := dec.Decode(&s); err != nil || dec.More() || s.V != sealedVersion {
		return Creds{}, errors.New("registry_auth: the decrypted credentials are not cshare's form (v1 JSON)")
	}
	if err := s.check("registry_auth"); err != nil {
		return Creds{}, err
	}
	host, err := RegistryHost(image)
	if err != nil {
		return Creds{}, fmt.Errorf("registry_auth: %v", err)
	}
	if s.Person != person || s.Server != host {
		return Creds{}, ErrMismatch
	}
	return s.Creds, nil
}
