package regauth

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"filippo.io/age"

	"github.com/cshare/cshare/internal/atomicfile"
)

// IdentityFile is the name of a node's age identity in its data dir.
const IdentityFile = "age.key"

// MaxRecipientLen bounds a published recipient ("age1" and 58 more
// characters for X25519).
const MaxRecipientLen = 128

// LoadOrCreateIdentity reads the node's age X25519 identity from path, or
// makes one and writes it there (mode 0600, the one line age-keygen
// writes). A file that does not hold such an identity is an error: it is
// not replaced, so what was sealed to it stays readable once it is fixed.
func LoadOrCreateIdentity(path string) (*age.X25519Identity, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		id, err := age.ParseX25519Identity(strings.TrimSpace(lastLine(string(b))))
		if err != nil {
			return nil, fmt.Errorf("%s: not an age X25519 identity (remove it to make a new one): %v", path, err)
		}
		return id, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	id, err := age.GenerateX25519Identity()
	if err != nil {
		return nil, err
	}
	body := "# cshare node's key for registry credentials (age X25519)\n# public key: " + id.Recipient().String() + "\n" + id.String() + "\n"
	if err := atomicfile.WriteFile(path, []byte(body), 0o600); err != nil {
		return nil, err
	}
	return id, nil
}

// lastLine is the last line of s that is not blank or a comment.
func lastLine(s string) string {
	out := ""
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = l
		}
	}
	return out
}

// CheckRecipient checks a published recipient (an offer's, a heartbeat's):
// an age X25519 public key, "age1...". The error names field.
func CheckRecipient(field, s string) error {
	if len(s) > MaxRecipientLen {
		return fmt.Errorf("%s: %d bytes; allowed: an age X25519 recipient (age1..., 62 characters)", field, len(s))
	}
	if _, err := age.ParseX25519Recipient(s); err != nil {
		return fmt.Errorf("%s: %q is not an age X25519 recipient (age1..., 62 characters)", field, s)
	}
	return nil
}
