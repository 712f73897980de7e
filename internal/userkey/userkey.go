// Package userkey owns a person's key on a machine: the file user.key in the
// data dir (mode 0600), which holds the person's Ed25519 key and display
// name. A person's key signs the delegation that makes a machine act for them
// in an org (ledger.Delegation); the same key on several machines makes them
// one member. Export and import carry it between machines.
//
// It does not import ledger (ledger imports internal/...: the layers point
// one way); the key signs as ledger.NewSigner(k.Priv).
package userkey

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/internal/atomicfile"
	"github.com/cshare/cshare/internal/text"
)

// File is the key's file name in the data dir.
const File = "user.key"

// maxFile caps what Load reads: a key file is a few hundred bytes.
const maxFile = 64 << 10

// Key is a person's key and name.
type Key struct {
	ID   string // the person's ID: the key's peer ID
	Name string
	Priv crypto.PrivKey
}

// file is user.key's JSON form.
type file struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Key  string `json:"key"` // base64 of libp2p's protobuf private key
}

// ErrNone says the data dir holds no person key.
var ErrNone = errors.New("no person key in this data dir (create one with `cshare user init --name NAME`)")

// Path is user.key's path in dataDir.
func Path(dataDir string) string { return filepath.Join(dataDir, File) }

// New makes a fresh key named name (checked as a name).
func New(name string) (*Key, error) {
	if err := text.CheckName("name", name); err != nil {
		return nil, err
	}
	priv, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		return nil, fmt.Errorf("userkey: generate: %w", err)
	}
	return fromPriv(name, priv)
}

func fromPriv(name string, priv crypto.PrivKey) (*Key, error) {
	if priv.Type() != crypto.Ed25519 {
		return nil, errors.New("key: not an Ed25519 key")
	}
	id, err := peer.IDFromPrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("key: %w", err)
	}
	return &Key{ID: id.String(), Name: name, Priv: priv}, nil
}

// Marshal is the key's user.key form.
func (k *Key) Marshal() ([]byte, error) {
	raw, err := crypto.MarshalPrivateKey(k.Priv)
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(file{ID: k.ID, Name: k.Name, Key: base64.StdEncoding.EncodeToString(raw)}, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Unmarshal parses a user.key form, checking every field: the name, the
// key, and that the ID is the key's.
func Unmarshal(b []byte) (*Key, error) {
	if len(b) > maxFile {
		return nil, fmt.Errorf("key file: %d bytes is too large", len(b))
	}
	var f file
	dec := json.NewDecoder(bytesReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("key file: not a cshare person key: %v", err)
	}
	if err := text.CheckName("name", f.Name); err != nil {
		return nil, fmt.Errorf("key file: %w", err)
	}
	raw, err := base64.StdEncoding.DecodeString(f.Key)
	if err != nil {
		return nil, errors.New("key file: key: not base64")
	}
	priv, err := crypto.UnmarshalPrivateKey(raw)
	if err != nil {
		return nil, fmt.Errorf("key file: key: %v", err)
	}
	k, err := fromPriv(f.Name, priv)
	if err != nil {
		return nil, fmt.Errorf("key file: %w", err)
	}
	if f.ID != k.ID {
		return nil, fmt.Errorf("key file: id %q is not the key's ID %s", f.ID, k.ID)
	}
	return k, nil
}

// Load reads dataDir's key; ErrNone (wrapping fs.ErrNotExist) if none.
func Load(dataDir string) (*Key, error) {
	b, err := os.ReadFile(Path(dataDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %w", ErrNone, fs.ErrNotExist)
	}
	if err != nil {
		return nil, fmt.Errorf("userkey: %w", err)
	}
	k, err := Unmarshal(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Path(dataDir), err)
	}
	return k, nil
}

// Save writes k as dataDir's key, mode 0600, atomically. It refuses to
// replace a different person's key unless force.
func Save(dataDir string, k *Key, force bool) error {
	if old, err := Load(dataDir); err == nil && old.ID != k.ID && !force {
		return fmt.Errorf("this data dir already holds person %s (%s); replacing it changes who this machine acts for: pass --force to replace it", old.ID, old.Name)
	}
	b, err := k.Marshal()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("userkey: data dir: %w", err)
	}
	return writeAtomic(Path(dataDir), b)
}

// LoadOrCreate returns dataDir's key, creating one named name when none
// exists (created is then true).
func LoadOrCreate(dataDir, name string) (k *Key, created bool, err error) {
	k, err = Load(dataDir)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return k, false, err
	}
	if k, err = New(name); err != nil {
		return nil, false, err
	}
	if err := Save(dataDir, k, false); err != nil {
		return nil, false, err
	}
	// Two processes racing on first use: whichever key landed is the one.
	k2, err := Load(dataDir)
	return k2, err == nil && k2.ID == k.ID, err
}

func writeAtomic(path string, b []byte) error {
	if err := atomicfile.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("userkey: %w", err)
	}
	return nil
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
