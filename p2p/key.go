package p2p

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/libp2p/go-libp2p/core/crypto"
)

// LoadOrCreateKey returns the Ed25519 libp2p key stored at path, creating it
// (and its directory, mode 0700) on first use. The file holds the key in
// libp2p's protobuf form, mode 0600; a file found with looser permissions is
// tightened to 0600. Creation is atomic: a temp file is linked into place,
// so two processes racing on first start end up with the same key.
func LoadOrCreateKey(path string) (crypto.PrivKey, error) {
	if k, err := loadKey(path); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return k, err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("p2p: key dir: %w", err)
	}
	k, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		return nil, fmt.Errorf("p2p: generate key: %w", err)
	}
	raw, err := crypto.MarshalPrivateKey(k)
	if err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(dir, ".key-*")
	if err != nil {
		return nil, fmt.Errorf("p2p: write key: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return nil, err
	}
	if _, err := tmp.Write(raw); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("p2p: write key: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("p2p: write key: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return loadKey(path) // lost the race: use the winner's key
		}
		return nil, fmt.Errorf("p2p: write key: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return k, nil
}

func loadKey(path string) (crypto.PrivKey, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	k, err := crypto.UnmarshalPrivateKey(raw)
	if err != nil {
		return nil, fmt.Errorf("p2p: key file %s is corrupt: %w", path, err)
	}
	if k.Type() != crypto.Ed25519 {
		return nil, fmt.Errorf("p2p: key file %s: want an Ed25519 key, found %s", path, k.Type())
	}
	if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(path, 0o600); err != nil {
			return nil, fmt.Errorf("p2p: key file %s has mode %v and cannot be made 0600: %w", path, st.Mode().Perm(), err)
		}
	}
	return k, nil
}
