package gateway

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/crypto/ssh"

	"github.com/cshare/cshare/internal/atomicfile"
)

// loadOrCreateHostKey reads the gateway's ed25519 host key from path, or
// makes one and writes it there (mode 0600, OpenSSH PEM, as ssh-keygen
// writes it). A file that does not hold such a key is an error: it is not
// replaced, so clients' known hosts stay true.
func loadOrCreateHostKey(path string) (ssh.Signer, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		s, err := ssh.ParsePrivateKey(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w (remove it to make a new host key)", path, err)
		}
		return s, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, "cshare gateway")
	if err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		return nil, err
	}
	return ssh.NewSignerFromKey(priv)
}
