package userkey

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"golang.org/x/crypto/chacha20poly1305"
	"golang.org/x/crypto/scrypt"

	"github.com/cshare/cshare/internal/text"
)

// The export format: JSON that carries a person to another machine.
//
//	{"format": "cshare-person-v1", "id": ID, "name": NAME, "key": BASE64}
//
// or, encrypted with a passphrase,
//
//	{"format": "cshare-person-v1", "id": ID, "name": NAME, "encrypted": {
//	  "kdf": "scrypt", "n": 32768, "r": 8, "p": 1, "salt": BASE64 (16 bytes),
//	  "cipher": "xchacha20-poly1305", "nonce": BASE64 (24 bytes),
//	  "ciphertext": BASE64}}
//
// key (and the plaintext of ciphertext) is libp2p's protobuf encoding of the
// Ed25519 private key, as in user.key. The ciphertext's additional data
// binds the format, id and name (see additionalData), so they cannot be
// swapped without the passphrase. Import accepts exactly these parameters.
const (
	Format = "cshare-person-v1"

	kdfScrypt = "scrypt"
	scryptN   = 32768
	scryptR   = 8
	scryptP   = 1
	saltLen   = 16
	cipherX   = "xchacha20-poly1305"

	// MaxPassphrase caps a passphrase file.
	MaxPassphrase = 4 << 10
	// maxCiphertext caps the ciphertext: an Ed25519 key is 68 bytes in
	// libp2p's encoding.
	maxCiphertext = 1 << 10
)

// Errors Import returns that a caller may branch on.
var (
	ErrEncrypted       = errors.New("the file is encrypted: pass --passphrase-file F")
	ErrWrongPassphrase = errors.New("wrong passphrase, or the file was changed")
)

// exportFile is the export's JSON form.
type exportFile struct {
	Format    string     `json:"format"`
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	Key       string     `json:"key,omitempty"`
	Encrypted *encrypted `json:"encrypted,omitempty"`
}

type encrypted struct {
	KDF        string `json:"kdf"`
	N          int    `json:"n"`
	R          int    `json:"r"`
	P          int    `json:"p"`
	Salt       string `json:"salt"`
	Cipher     string `json:"cipher"`
	Nonce      string `json:"nonce"`
	Ciphertext string `json:"ciphertext"`
}

// check validates k: an Ed25519 key, a valid name, and the key's own ID.
func (k *Key) check() error {
	if k == nil || k.Priv == nil {
		return errors.New("userkey: no key")
	}
	if err := text.CheckName("name", k.Name); err != nil {
		return err
	}
	k2, err := fromPriv(k.Name, k.Priv)
	if err != nil {
		return err
	}
	if k2.ID != k.ID {
		return fmt.Errorf("userkey: id %q is not the key's ID %s", k.ID, k2.ID)
	}
	return nil
}

// additionalData is what the ciphertext binds besides the key: the format,
// the id and the name, each length-prefixed.
func additionalData(id, name string) []byte {
	var ad []byte
	for _, s := range []string{Format, id, name} {
		ad = binary.AppendUvarint(ad, uint64(len(s)))
		ad = append(ad, s...)
	}
	return ad
}

// deriveKey runs scrypt with the format's parameters.
func deriveKey(passphrase, salt []byte) ([]byte, error) {
	return scrypt.Key(passphrase, salt, scryptN, scryptR, scryptP, chacha20poly1305.KeySize)
}

// Export is k in the export format: plain when passphrase is empty, else
// its key encrypted under the passphrase.
func Export(k *Key, passphrase []byte) ([]byte, error) {
	if err := k.check(); err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	raw, err := crypto.MarshalPrivateKey(k.Priv)
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	f := exportFile{Format: Format, ID: k.ID, Name: k.Name}
	if len(passphrase) == 0 {
		f.Key = base64.StdEncoding.EncodeToString(raw)
	} else {
		salt := make([]byte, saltLen)
		nonce := make([]byte, chacha20poly1305.NonceSizeX)
		if _, err := rand.Read(salt); err != nil {
			return nil, fmt.Errorf("export: %w", err)
		}
		if _, err := rand.Read(nonce); err != nil {
			return nil, fmt.Errorf("export: %w", err)
		}
		dk, err := deriveKey(passphrase, salt)
		if err != nil {
			return nil, fmt.Errorf("export: %w", err)
		}
		aead, err := chacha20poly1305.NewX(dk)
		if err != nil {
			return nil, fmt.Errorf("export: %w", err)
		}
		ct := aead.Seal(nil, nonce, raw, additionalData(k.ID, k.Name))
		enc := base64.StdEncoding.EncodeToString
		f.Encrypted = &encrypted{KDF: kdfScrypt, N: scryptN, R: scryptR, P: scryptP, Salt: enc(salt),
			Cipher: cipherX, Nonce: enc(nonce), Ciphertext: enc(ct)}
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	return append(b, '\n'), nil
}

// Import parses an export, checking every field, and decrypts it with
// passphrase when it is encrypted (ErrEncrypted without one,
// ErrWrongPassphrase when it does not open). A passphrase given for a plain
// export is not needed and is ignored.
func Import(b []byte, passphrase []byte) (*Key, error) {
	k, _, err := importExport(b, passphrase)
	return k, err
}

// importExport is Import, saying also whether the export was encrypted.
func importExport(b []byte, passphrase []byte) (*Key, bool, error) {
	k, err := importBytes(b, passphrase)
	return k, err == nil && isEncrypted(b), err
}

// isEncrypted says whether a valid export holds its key encrypted.
func isEncrypted(b []byte) bool {
	var f exportFile
	return json.Unmarshal(b, &f) == nil && f.Encrypted != nil
}

func importBytes(b []byte, passphrase []byte) (*Key, error) {
	if len(b) > maxFile {
		return nil, fmt.Errorf("%d bytes is too large for a person export (at most %d)", len(b), maxFile)
	}
	var f exportFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("not a cshare person export (make one with cshare user export): %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("not a cshare person export: data after the JSON object")
	}
	if f.Format != Format {
		return nil, fmt.Errorf("format: %q is not a cshare person export; want %q (make one with cshare user export)", f.Format, Format)
	}
	if err := text.CheckName("name", f.Name); err != nil {
		return nil, err
	}
	if _, err := peer.Decode(f.ID); err != nil {
		return nil, fmt.Errorf("id: %q is not a person ID", f.ID)
	}
	var raw []byte
	switch {
	case f.Key != "" && f.Encrypted != nil:
		return nil, errors.New("the file holds both key and encrypted; an export holds one of them")
	case f.Key == "" && f.Encrypted == nil:
		return nil, errors.New("the file holds no key: want key or encrypted")
	case f.Encrypted == nil:
		var err error
		if raw, err = base64.StdEncoding.DecodeString(f.Key); err != nil {
			return nil, errors.New("key: not base64")
		}
	default:
		var err error
		if raw, err = f.Encrypted.open(f.ID, f.Name, passphrase); err != nil {
			return nil, err
		}
	}
	priv, err := crypto.UnmarshalPrivateKey(raw)
	if err != nil {
		return nil, fmt.Errorf("key: %v", err)
	}
	k, err := fromPriv(f.Name, priv)
	if err != nil {
		return nil, err
	}
	if f.ID != k.ID {
		return nil, fmt.Errorf("id: %q is not the key's ID %s", f.ID, k.ID)
	}
	return k, nil
}

// open checks e's parameters and decrypts its ciphertext.
func (e *encrypted) open(id, name string, passphrase []byte) ([]byte, error) {
	switch {
	case e.KDF != kdfScrypt:
		return nil, fmt.Errorf("encrypted.kdf: %q is not supported; want %q", e.KDF, kdfScrypt)
	case e.N != scryptN || e.R != scryptR || e.P != scryptP:
		return nil, fmt.Errorf("encrypted: scrypt n=%d r=%d p=%d is not supported; want n=%d r=%d p=%d", e.N, e.R, e.P, scryptN, scryptR, scryptP)
	case e.Cipher != cipherX:
		return nil, fmt.Errorf("encrypted.cipher: %q is not supported; want %q", e.Cipher, cipherX)
	}
	salt, err := base64.StdEncoding.DecodeString(e.Salt)
	if err != nil || len(salt) != saltLen {
		return nil, fmt.Errorf("encrypted.salt: want %d bytes in base64", saltLen)
	}
	nonce, err := base64.StdEncoding.DecodeString(e.Nonce)
	if err != nil || len(nonce) != chacha20poly1305.NonceSizeX {
		return nil, fmt.Errorf("encrypted.nonce: want %d bytes in base64", chacha20poly1305.NonceSizeX)
	}
	ct, err := base64.StdEncoding.DecodeString(e.Ciphertext)
	if err != nil || len(ct) <= chacha20poly1305.Overhead || len(ct) > maxCiphertext {
		return nil, fmt.Errorf("encrypted.ciphertext: want %d to %d bytes in base64", chacha20poly1305.Overhead+1, maxCiphertext)
	}
	if len(passphrase) == 0 {
		return nil, ErrEncrypted
	}
	dk, err := deriveKey(passphrase, salt)
	if err != nil {
		return nil, fmt.Errorf("encrypted: %w", err)
	}
	aead, err := chacha20poly1305.NewX(dk)
	if err != nil {
		return nil, fmt.Errorf("encrypted: %w", err)
	}
	raw, err := aead.Open(nil, nonce, ct, additionalData(id, name))
	if err != nil {
		return nil, ErrWrongPassphrase
	}
	return raw, nil
}

// ReadPassphrase reads a passphrase file: the whole file, less one trailing
// newline (\n or \r\n); it must be non-empty and at most MaxPassphrase
// bytes.
func ReadPassphrase(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxPassphrase+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxPassphrase {
		return nil, fmt.Errorf("%s is larger than 4 KiB; a passphrase file holds the passphrase alone", path)
	}
	if bytes.HasSuffix(b, []byte("\r\n")) {
		b = b[:len(b)-2]
	} else if bytes.HasSuffix(b, []byte("\n")) {
		b = b[:len(b)-1]
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("%s is empty; write the passphrase into it", path)
	}
	return b, nil
}

// ReadExport reads an export file (at most 64 KiB).
func ReadExport(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := readExport(f)
	var pe *fs.PathError
	if err != nil && !errors.As(err, &pe) {
		err = fmt.Errorf("%s %w", path, err)
	}
	return b, err
}

// readExport reads an open export file, at most 64 KiB; an error that is
// not an *fs.PathError does not name the file.
func readExport(f *os.File) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxFile {
		return nil, fmt.Errorf("is larger than %d KiB; it is not a person export", maxFile>>10)
	}
	return b, nil
}

// ErrTooOpen says an export that holds its key in plain text can be read
// (or written) by others than its owner: OpenSSH refuses such a key too.
var ErrTooOpen = errors.New("permissions too open")

// ImportFile reads the export at path (at most 64 KiB) and imports it as
// Import does. An export whose key is not encrypted is refused (an error
// wrapping ErrTooOpen, saying to chmod 600 it) when its file is readable
// or writable by its group or others: anyone there could act as the
// person. The mode is that of the file read, not of the path looked up
// again.
func ImportFile(path string, passphrase []byte) (*Key, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	b, err := readExport(f)
	if err != nil {
		return nil, err
	}
	k, encrypted, err := importExport(b, passphrase)
	if err != nil {
		return nil, err
	}
	if perm := fi.Mode().Perm(); !encrypted && perm&0o077 != 0 && runtime.GOOS != "windows" {
		return nil, fmt.Errorf("%w: mode %04o lets others than you read or change this unencrypted key; run chmod 600 %s (or export it again with --passphrase-file)",
			ErrTooOpen, perm, path)
	}
	return k, nil
}

// ErrExists says an export's destination exists and force was not given.
var ErrExists = errors.New("the file exists")

// WriteExport writes b to path with mode 0600. Without force it refuses an
// existing path (an error wrapping ErrExists); with force
// it replaces it atomically.
func WriteExport(path string, b []byte, force bool) error {
	if !force {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s: %w: pass --force to overwrite it", path, ErrExists)
		}
		if err != nil {
			return err
		}
		err = writeClose(f, b)
		if err != nil {
			os.Remove(path)
		}
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".cshare-export-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := writeClose(tmp, b); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// writeClose sets f's mode to 0600, writes b, syncs and closes f.
func writeClose(f *os.File, b []byte) error {
	err := f.Chmod(0o600)
	if err == nil {
		_, err = f.Write(b)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
