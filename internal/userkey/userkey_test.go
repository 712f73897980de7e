package userkey

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// sameKey fails t unless a and b are the same person with the same name.
func sameKey(t *testing.T, a, b *Key) {
	t.Helper()
	if a.ID != b.ID || a.Name != b.Name || !a.Priv.Equals(b.Priv) {
		t.Fatalf("keys differ: %s %q vs %s %q", a.ID, a.Name, b.ID, b.Name)
	}
}

func newKey(t *testing.T, name string) *Key {
	t.Helper()
	k, err := New(name)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// An encrypted export costs a scrypt run (a second or two under -race), so
// the tests share one.
var (
	encOnce sync.Once
	encKey  *Key
	encFile []byte
)

const testPass = "correct horse battery staple"

func encrypted1(t testing.TB) (*Key, []byte) {
	t.Helper()
	encOnce.Do(func() {
		k, err := New("alice")
		if err != nil {
			panic(err)
		}
		b, err := Export(k, []byte(testPass))
		if err != nil {
			panic(err)
		}
		encKey, encFile = k, b
	})
	return encKey, encFile
}

// edit decodes an export as a generic JSON object, lets change edit it, and
// encodes it again.
func edit(t *testing.T, b []byte, change func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	change(m)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestExportPlainRoundTrip(t *testing.T) {
	k := newKey(t, "Zoë Ø")
	b, err := Export(k, nil)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["format"] != Format || m["id"] != k.ID || m["name"] != k.Name || m["key"] == nil || m["encrypted"] != nil {
		t.Fatalf("plain export has the wrong fields: %s", b)
	}
	got, err := Import(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	sameKey(t, got, k)
	// A passphrase given for a plain export is not needed.
	if got, err = Import(b, []byte("unneeded")); err != nil {
		t.Fatal(err)
	}
	sameKey(t, got, k)
}

func TestExportEncrypted(t *testing.T) {
	k, b := encrypted1(t)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["format"] != Format || m["id"] != k.ID || m["name"] != k.Name || m["key"] != nil {
		t.Fatalf("encrypted export has the wrong fields: %s", b)
	}
	e, _ := m["encrypted"].(map[string]any)
	if e["kdf"] != "scrypt" || e["n"] != 32768.0 || e["r"] != 8.0 || e["p"] != 1.0 || e["cipher"] != "xchacha20-poly1305" {
		t.Fatalf("encrypted parameters: %v", e)
	}
	salt, _ := base64.StdEncoding.DecodeString(e["salt"].(string))
	nonce, _ := base64.StdEncoding.DecodeString(e["nonce"].(string))
	if len(salt) != 16 || len(nonce) != 24 {
		t.Fatalf("salt %d bytes, nonce %d bytes; want 16 and 24", len(salt), len(nonce))
	}
	plain, _ := Export(k, nil)
	var pm map[string]any
	_ = json.Unmarshal(plain, &pm)
	if strings.Contains(string(b), pm["key"].(string)) {
		t.Fatal("the encrypted export holds the plain key")
	}

	got, err := Import(b, []byte(testPass))
	if err != nil {
		t.Fatal(err)
	}
	sameKey(t, got, k)

	_, err = Import(b, nil)
	if !errors.Is(err, ErrEncrypted) || err.Error() != "the file is encrypted: pass --passphrase-file F" {
		t.Fatalf("import without a passphrase: %v", err)
	}
	_, err = Import(b, []byte(testPass+"!"))
	if !errors.Is(err, ErrWrongPassphrase) || err.Error() != "wrong passphrase, or the file was changed" {
		t.Fatalf("import with a wrong passphrase: %v", err)
	}
}

// TestImportTampered: a changed ciphertext, name or id does not open with
// the right passphrase. (A changed salt or nonce is the same case to the
// AEAD, and each case costs a scrypt run.)
func TestImportTampered(t *testing.T) {
	_, b := encrypted1(t)
	other := newKey(t, "mallory")
	flip := func(field string) func(m map[string]any) {
		return func(m map[string]any) {
			e := m["encrypted"].(map[string]any)
			raw, _ := base64.StdEncoding.DecodeString(e[field].(string))
			raw[len(raw)/2] ^= 1
			e[field] = base64.StdEncoding.EncodeToString(raw)
		}
	}
	cases := map[string]func(m map[string]any){
		"ciphertext":   flip("ciphertext"),
		"swapped name": func(m map[string]any) { m["name"] = "mallory" },
		"swapped id":   func(m map[string]any) { m["id"] = other.ID },
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := Import(edit(t, b, change), []byte(testPass))
			if !errors.Is(err, ErrWrongPassphrase) {
				t.Fatalf("tampered %s: got %v, want %v", name, err, ErrWrongPassphrase)
			}
		})
	}
}

// TestImportRefuses: every field is checked before anything is installed;
// each refusal names what is wrong. None of these runs scrypt.
func TestImportRefuses(t *testing.T) {
	k := newKey(t, "alice")
	other := newKey(t, "bob")
	plain, _ := Export(k, nil)
	otherPlain, _ := Export(other, nil)
	var om map[string]any
	_ = json.Unmarshal(otherPlain, &om)
	_, enc := encrypted1(t)
	cases := []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "not a cshare person export"},
		{"not json", []byte("hello"), "not a cshare person export"},
		{"array", []byte("[]"), "not a cshare person export"},
		{"user.key form", mustMarshal(t, k), "format"},
		{"wrong format", edit(t, plain, func(m map[string]any) { m["format"] = "cshare-person-v2" }), `format: "cshare-person-v2"`},
		{"unknown field", edit(t, plain, func(m map[string]any) { m["extra"] = 1 }), "extra"},
		{"trailing data", append(append([]byte{}, plain...), []byte(`{}`)...), "data after the JSON object"},
		{"name with escape", edit(t, plain, func(m map[string]any) { m["name"] = "a\x1b[31mb" }), "name:"},
		{"empty name", edit(t, plain, func(m map[string]any) { m["name"] = "" }), "name: empty"},
		{"bad id", edit(t, plain, func(m map[string]any) { m["id"] = "not-an-id" }), "id:"},
		{"someone else's id", edit(t, plain, func(m map[string]any) { m["id"] = other.ID }), "is not the key's ID"},
		{"someone else's key", edit(t, plain, func(m map[string]any) { m["key"] = om["key"] }), "is not the key's ID"},
		{"key not base64", edit(t, plain, func(m map[string]any) { m["key"] = "%%%" }), "key: not base64"},
		{"key garbage", edit(t, plain, func(m map[string]any) { m["key"] = "AAAA" }), "key:"},
		{"no key", edit(t, plain, func(m map[string]any) { delete(m, "key") }), "holds no key"},
		{"both", edit(t, enc, func(m map[string]any) { m["key"] = "AAAA" }), "both"},
		{"kdf", edit(t, enc, func(m map[string]any) { m["encrypted"].(map[string]any)["kdf"] = "argon2id" }), "encrypted.kdf"},
		{"n", edit(t, enc, func(m map[string]any) { m["encrypted"].(map[string]any)["n"] = 1 << 30 }), "scrypt n=1073741824"},
		{"cipher", edit(t, enc, func(m map[string]any) { m["encrypted"].(map[string]any)["cipher"] = "aes" }), "encrypted.cipher"},
		{"short salt", edit(t, enc, func(m map[string]any) { m["encrypted"].(map[string]any)["salt"] = "AAAA" }), "encrypted.salt"},
		{"short nonce", edit(t, enc, func(m map[string]any) { m["encrypted"].(map[string]any)["nonce"] = "AAAA" }), "encrypted.nonce"},
		{"empty ciphertext", edit(t, enc, func(m map[string]any) { m["encrypted"].(map[string]any)["ciphertext"] = "" }), "encrypted.ciphertext"},
		{"too large", []byte(strings.Repeat(" ", maxFile+1)), "too large"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Import(c.b, []byte(testPass))
			if err == nil {
				t.Fatalf("accepted %s as %s", c.b, got.ID)
			}
			if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q, want one line containing %q", err, c.want)
			}
		})
	}
}

func mustMarshal(t *testing.T, k *Key) []byte {
	t.Helper()
	b, err := k.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestExportRefusesBadKey(t *testing.T) {
	k := newKey(t, "alice")
	other := newKey(t, "bob")
	for name, bad := range map[string]*Key{
		"nil":       nil,
		"bad name":  {ID: k.ID, Name: "a\nb", Priv: k.Priv},
		"wrong id":  {ID: other.ID, Name: "alice", Priv: k.Priv},
		"no secret": {ID: k.ID, Name: "alice"},
	} {
		if _, err := Export(bad, nil); err == nil {
			t.Errorf("%s: exported", name)
		}
	}
}

func TestReadPassphrase(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		content string
		want    string // "" = an error
		errWant string
	}{
		{"secret", "secret", ""},
		{"secret\n", "secret", ""},
		{"secret\r\n", "secret", ""},
		{"secret\n\n", "secret\n", ""},
		{" spaces kept ", " spaces kept ", ""},
		{"", "", "is empty"},
		{"\n", "", "is empty"},
		{"\r\n", "", "is empty"},
		{strings.Repeat("x", MaxPassphrase), strings.Repeat("x", MaxPassphrase), ""},
		{strings.Repeat("x", MaxPassphrase+1), "", "larger than 4 KiB"},
	}
	for i, c := range cases {
		p := filepath.Join(dir, "pass"+string(rune('a'+i)))
		if err := os.WriteFile(p, []byte(c.content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := ReadPassphrase(p)
		switch {
		case c.errWant != "" && (err == nil || !strings.Contains(err.Error(), c.errWant)):
			t.Errorf("%q: err %v, want %q", c.content, err, c.errWant)
		case c.errWant == "" && (err != nil || string(got) != c.want):
			t.Errorf("%q: got %q, %v; want %q", c.content, got, err, c.want)
		}
	}
	if _, err := ReadPassphrase(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func mode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestFileModes(t *testing.T) {
	dir := t.TempDir()
	k := newKey(t, "alice")
	if err := Save(dir, k, false); err != nil {
		t.Fatal(err)
	}
	if m := mode(t, Path(dir)); m != 0o600 {
		t.Errorf("user.key mode %o, want 600", m)
	}
	b, _ := Export(k, nil)
	out := filepath.Join(dir, "alice.export")
	if err := WriteExport(out, b, false); err != nil {
		t.Fatal(err)
	}
	if m := mode(t, out); m != 0o600 {
		t.Errorf("export mode %o, want 600", m)
	}
	// No overwrite without force; the file is kept as it was.
	if err := os.WriteFile(out, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(out, 0o644); err != nil {
		t.Fatal(err)
	}
	err := WriteExport(out, b, false)
	if !errors.Is(err, ErrExists) || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("overwrite without force: %v", err)
	}
	if got, _ := os.ReadFile(out); string(got) != "keep" {
		t.Fatalf("the refused write changed the file: %q", got)
	}
	if err := WriteExport(out, b, true); err != nil {
		t.Fatal(err)
	}
	if m := mode(t, out); m != 0o600 {
		t.Errorf("forced export mode %o, want 600", m)
	}
	if got, _ := ReadExport(out); string(got) != string(b) {
		t.Errorf("forced export holds %q", got)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("temporary files left behind: %v", entries)
	}
}

func TestSaveRefusesAnotherPerson(t *testing.T) {
	dir := t.TempDir()
	alice, bob := newKey(t, "alice"), newKey(t, "bob")
	if err := Save(dir, alice, false); err != nil {
		t.Fatal(err)
	}
	err := Save(dir, bob, false)
	if err == nil || !strings.Contains(err.Error(), alice.ID) || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("Save of another person without force: %v", err)
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	sameKey(t, got, alice)
	// The same person again is fine (a new name is kept).
	renamed := *alice
	renamed.Name = "Alice A."
	if err := Save(dir, &renamed, false); err != nil {
		t.Fatal(err)
	}
	if got, _ := Load(dir); got.Name != "Alice A." {
		t.Fatalf("name after re-save %q", got.Name)
	}
	if err := Save(dir, bob, true); err != nil {
		t.Fatal(err)
	}
	got, _ = Load(dir)
	sameKey(t, got, bob)
}

func TestLoadNone(t *testing.T) {
	_, err := Load(t.TempDir())
	if !errors.Is(err, ErrNone) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load of an empty dir: %v", err)
	}
}

func TestLoadOrCreate(t *testing.T) {
	dir := t.TempDir()
	k, created, err := LoadOrCreate(dir, "alice")
	if err != nil || !created {
		t.Fatalf("first LoadOrCreate: created %v, %v", created, err)
	}
	k2, created, err := LoadOrCreate(dir, "other")
	if err != nil || created {
		t.Fatalf("second LoadOrCreate: created %v, %v", created, err)
	}
	sameKey(t, k2, k)
}

// TestImportFileRefusesOpenPlainKey: ImportFile refuses a plaintext export
// readable or writable by group or others (ErrTooOpen, saying chmod 600
// and the path), takes it at 0600 or 0400, and takes an encrypted export
// whatever its mode.
func TestImportFileRefusesOpenPlainKey(t *testing.T) {
	k, err := New("alice")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	b, _ := Export(k, nil)
	if err := WriteExport(plain, b, false); err != nil {
		t.Fatal(err)
	}
	for _, m := range []os.FileMode{0o666, 0o644, 0o640, 0o620, 0o602} {
		if err := os.Chmod(plain, m); err != nil {
			t.Fatal(err)
		}
		_, err := ImportFile(plain, nil)
		if !errors.Is(err, ErrTooOpen) || !strings.Contains(err.Error(), "chmod 600 "+plain) || strings.Contains(err.Error(), "\n") {
			t.Errorf("mode %o: %v", m, err)
		}
	}
	for _, m := range []os.FileMode{0o600, 0o400} {
		if err := os.Chmod(plain, m); err != nil {
			t.Fatal(err)
		}
		if got, err := ImportFile(plain, nil); err != nil || got.ID != k.ID {
			t.Errorf("mode %o: %v", m, err)
		}
	}
	enc := filepath.Join(dir, "enc")
	b, _ = Export(k, []byte("pw"))
	if err := os.WriteFile(enc, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(enc, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := ImportFile(enc, []byte("pw")); err != nil || got.ID != k.ID {
		t.Errorf("encrypted at 0644: %v", err)
	}
	if _, err := ImportFile(enc, nil); !errors.Is(err, ErrEncrypted) {
		t.Errorf("encrypted without a passphrase: %v", err)
	}
}
