package ledger

import (
	"crypto/rsa"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"golang.org/x/crypto/ssh"

	"github.com/cshare/cshare/internal/text"
)

// SSH public keys in the ledger (issue 31): a person's keys, which every
// node's SSH gateway (package node/gateway) reads at each connection, so a
// key added or removed takes effect at once on every machine; and a
// contract's own key (ContractSpec.SSHKey). The fold is fold_sshkeys.go.

// SSH key entry kinds, by the person whose keys they change.
const (
	KindSSHKeyAdd = "sshkey.add"
	KindSSHKeyRm  = "sshkey.rm"
)

// Bounds of SSH keys.
const (
	// MaxSSHKeys is the most keys one person holds.
	MaxSSHKeys = 32
	// MaxSSHKeySize bounds an authorized_keys line (a 16384-bit RSA key
	// is about 2.8 KB).
	MaxSSHKeySize = 8 << 10
	// MaxSSHKeyComment bounds a key's comment, in bytes.
	MaxSSHKeyComment = 256
	// minRSABits and maxRSABits bound RSA keys.
	minRSABits = 2048
	maxRSABits = 16384
)

// SSHKeyAdd is an sshkey.add payload: one public key in authorized_keys
// form ("ssh-ed25519 AAAA... comment"), without options.
type SSHKeyAdd struct {
	Key string `cbor:"key"`
}

// SSHKeyRef names one of the author's keys by its fingerprint
// (sshkey.rm).
type SSHKeyRef struct {
	Fingerprint string `cbor:"fingerprint"`
}

// SSHKey is a person's key as the State holds it: the key in its
// canonical authorized_keys form (type, base64, comment), its SHA256
// fingerprint as ssh-keygen -l prints it, and when it was added.
type SSHKey struct {
	Key         string `cbor:"key" json:"key"`
	Fingerprint string `cbor:"fingerprint" json:"fingerprint"`
	Added       int64  `cbor:"added" json:"added"`
}

// ParsedSSHKey is a checked public key: its canonical line, fingerprint,
// type and comment, and the key itself.
type ParsedSSHKey struct {
	Line        string // "TYPE BASE64[ COMMENT]"
	Fingerprint string // "SHA256:..."
	Type        string
	Comment     string
	Key         ssh.PublicKey
}

// CheckSSHKey parses and checks one public key in authorized_keys form
// (what a FILE.pub holds; one line, trailing white space ignored): a key
// ssh.ParseAuthorizedKey reads, no options, not a certificate, RSA of
// 2048..16384 bits, a comment of one line of printable text. field names
// it in the error. Errors never echo more than a few characters of the
// input: a mistaken private key must not be printed back.
func CheckSSHKey(field, line string) (ParsedSSHKey, error) {
	line = strings.TrimRight(line, " \t\r\n")
	switch {
	case line == "":
		return ParsedSSHKey{}, fmt.Errorf("%s: empty; allowed: one public key as in a .pub file, such as ssh-ed25519 AAAA... you@host", field)
	case len(line) > MaxSSHKeySize:
		return ParsedSSHKey{}, fmt.Errorf("%s: %d bytes; allowed: one public key of at most %d bytes", field, len(line), MaxSSHKeySize)
	case strings.Contains(line, "PRIVATE KEY"):
		return ParsedSSHKey{}, fmt.Errorf("%s: this is a private key; allowed: the public key (the .pub file beside it)", field)
	case strings.ContainsAny(line, "\n\r"):
		return ParsedSSHKey{}, fmt.Errorf("%s: more than one line; allowed: one public key, one line", field)
	case !utf8.ValidString(line):
		return ParsedSSHKey{}, fmt.Errorf("%s: not UTF-8 text; allowed: one public key as in a .pub file", field)
	}
	pub, comment, options, rest, err := ssh.ParseAuthorizedKey([]byte(line))
	if err != nil {
		return ParsedSSHKey{}, fmt.Errorf("%s: not an SSH public key; allowed: one public key as in a .pub file, such as ssh-ed25519 AAAA... you@host", field)
	}
	if len(options) > 0 {
		return ParsedSSHKey{}, fmt.Errorf("%s: authorized_keys options (%s) are not allowed; allowed: the key alone", field, text.Echo(strings.Join(options, ",")))
	}
	if len(strings.TrimSpace(string(rest))) > 0 {
		return ParsedSSHKey{}, fmt.Errorf("%s: more than one key; allowed: one", field)
	}
	if _, ok := pub.(*ssh.Certificate); ok {
		return ParsedSSHKey{}, fmt.Errorf("%s: a certificate; allowed: a plain public key", field)
	}
	if ck, ok := pub.(ssh.CryptoPublicKey); ok {
		if rk, ok := ck.CryptoPublicKey().(*rsa.PublicKey); ok {
			if b := rk.N.BitLen(); b < minRSABits || b > maxRSABits {
				return ParsedSSHKey{}, fmt.Errorf("%s: an RSA key of %d bits; allowed: %d to %d bits, or an ed25519 key", field, b, minRSABits, maxRSABits)
			}
		}
	}
	comment = strings.TrimSpace(comment)
	if len(comment) > MaxSSHKeyComment {
		return ParsedSSHKey{}, fmt.Errorf("%s: a comment of %d bytes; allowed: at most %d", field, len(comment), MaxSSHKeyComment)
	}
	for _, r := range comment {
		if text.Unsafe(r) {
			return ParsedSSHKey{}, fmt.Errorf("%s: the comment %s holds %U; allowed: one line of printable text", field, text.Quote(text.Clip(comment)), r)
		}
	}
	canon := strings.TrimSuffix(string(ssh.MarshalAuthorizedKey(pub)), "\n")
	if comment != "" {
		canon += " " + comment
	}
	return ParsedSSHKey{Line: canon, Fingerprint: ssh.FingerprintSHA256(pub), Type: pub.Type(), Comment: comment, Key: pub}, nil
}

// CheckSSHFingerprint checks the shape of a key's fingerprint as
// ssh-keygen -l prints it: SHA256: and 43 characters of unpadded base64.
func CheckSSHFingerprint(field, fp string) error {
	b64, ok := strings.CutPrefix(fp, "SHA256:")
	if !ok || len(b64) != 43 || strings.Trim(b64, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/") != "" {
		return fmt.Errorf("%s: %s is not a key fingerprint; allowed: SHA256:... as cshare user ssh-key ls prints it", field, text.Quote(text.Clip(fp)))
	}
	return nil
}

// SSHKeysOf is person's keys, in the order they were added (nil for none).
// The slice is the State's: read it, never change it.
func (s *State) SSHKeysOf(person string) []SSHKey { return s.SSHKeys[person] }

// HasSSHKey says whether fingerprint fp is one of person's keys.
func (s *State) HasSSHKey(person, fp string) bool {
	for _, k := range s.SSHKeys[person] {
		if k.Fingerprint == fp {
			return true
		}
	}
	return false
}

// SSHKeyPersons is the persons who hold keys, sorted.
func (s *State) SSHKeyPersons() []string {
	out := make([]string, 0, len(s.SSHKeys))
	for p := range s.SSHKeys {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// cloneSSHKeys copies the table; a person's slice is shared, since the
// fold never changes one in place (it stores a new slice).
func cloneSSHKeys(m map[string][]SSHKey) map[string][]SSHKey {
	if m == nil {
		return nil
	}
	out := make(map[string][]SSHKey, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
