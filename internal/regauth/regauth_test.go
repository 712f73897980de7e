package regauth

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"
)

const secret = "s3cr3t-T0KEN-never-shown"

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func TestParseFile(t *testing.T) {
	for _, tc := range []struct {
		name, file, image string
		want              Creds
	}{
		{"line", "alice:" + secret + "\n", "registry.example.com:5000/team/app:1", Creds{Server: "registry.example.com:5000", Username: "alice", Password: secret}},
		{"line, hub", "alice:" + secret, "alice/app", Creds{Server: "docker.io", Username: "alice", Password: secret}},
		{"config auth", `{"auths":{"127.0.0.1:5000":{"auth":"` + b64("bob:"+secret) + `"}}}`, "127.0.0.1:5000/x", Creds{Server: "127.0.0.1:5000", Username: "bob", Password: secret}},
		{"config hub alias", `{"auths":{"https://index.docker.io/v1/":{"auth":"` + b64("bob:"+secret) + `","email":"x"}},"psFormat":"x"}`, "ubuntu", Creds{Server: "docker.io", Username: "bob", Password: secret}},
		{"config username/password", `{"auths":{"https://ghcr.io":{"username":"u","password":"` + secret + `"}}}`, "ghcr.io/o/i", Creds{Server: "ghcr.io", Username: "u", Password: secret}},
		{"config identity token", `{"auths":{"r.io":{"identitytoken":"` + secret + `"},"other.io":{"auth":"` + b64("a:b") + `"}}}`, "r.io/i", Creds{Server: "r.io", IdentityToken: secret}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseFile("--registry-auth", []byte(tc.file), tc.image)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestParseFileRefuses(t *testing.T) {
	for _, tc := range []struct{ name, file, image, want string }{
		{"empty", "  \n", "x/y", "the file is empty"},
		{"no colon", secret, "x/y", "not user:token"},
		{"empty user", ":" + secret, "x/y", "not user:token"},
		{"empty token", "alice:", "x/y", "not user:token"},
		{"two lines", "alice:" + secret + "\nbob:" + secret, "x/y", "more than one line"},
		{"space in token", "alice:" + secret + " x", "x/y", "the password"},
		{"bad json", `{"auths":` + secret, "x/y", "not valid JSON (syntax error at byte"},
		{"wrong type", `{"auths":{"r.io":{"auth":5}}}`, "r.io/i", "is not a number"},
		{"not base64", `{"auths":{"r.io":{"auth":"` + secret + `!"}}}`, "r.io/i", "auths.r.io.auth is not base64"},
		{"base64 without colon", `{"auths":{"r.io":{"auth":"` + b64(secret) + `"}}}`, "r.io/i", "not base64 of user:password"},
		{"no entry", `{"auths":{"a.io":{"auth":"` + b64("u:"+secret) + `"}}}`, "r.io/i", `no auths entry for the image's registry r.io (the file has: "a.io")`},
		{"creds store", `{"auths":{},"credsStore":"desktop"}`, "r.io/i", "credential helper"},
		{"empty entry", `{"auths":{"r.io":{}}}`, "r.io/i", "no username and password"},
		{"bad image", "u:" + secret, "UPPER/Case", "is not an image reference"},
		{"too large", strings.Repeat("a", MaxFile+1), "x/y", "at most 65536"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseFile("--registry-auth", []byte(tc.file), tc.image)
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "--registry-auth: ") || !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") {
				t.Fatalf("error %q: want one line starting with the field and holding %q", msg, tc.want)
			}
			if strings.Contains(msg, secret) || strings.Contains(msg, "T0KEN") {
				t.Fatalf("error %q quotes the secret", msg)
			}
		})
	}
}

func TestCredsNeverPrint(t *testing.T) {
	c := Creds{Server: "r.io", Username: "u", Password: secret}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("pull", "auth", c)
	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%v %+v %#v %s", c, c, c, c), buf.String()} {
		if strings.Contains(s, secret) || !strings.Contains(s, "r.io") {
			t.Fatalf("printed %q", s)
		}
	}
}

func ids(t *testing.T, n int) ([]*age.X25519Identity, []string) {
	var is []*age.X25519Identity
	var rs []string
	for range n {
		id, err := age.GenerateX25519Identity()
		if err != nil {
			t.Fatal(err)
		}
		is = append(is, id)
		rs = append(rs, id.Recipient().String())
	}
	return is, rs
}

func TestSealOpen(t *testing.T) {
	is, rs := ids(t, 3)
	c := Creds{Server: "127.0.0.1:5000", Username: "alice", Password: secret}
	blob, err := Seal("--registry-auth", "P-alice", c, rs[:2])
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(blob, []byte(secret)) || CheckSealed("registry_auth", blob) != nil {
		t.Fatal("blob holds the secret, or fails its own check")
	}
	for _, id := range is[:2] {
		got, err := Open(blob, id, "P-alice", "127.0.0.1:5000/app:1")
		if err != nil || got != c {
			t.Fatalf("open: %v, %+v", err, got)
		}
	}
	if _, err := Open(blob, is[2], "P-alice", "127.0.0.1:5000/app:1"); !errors.Is(err, ErrNotForThisMachine) {
		t.Fatalf("a machine not sealed to: %v", err)
	}
	if _, err := Open(blob, is[0], "P-mallory", "127.0.0.1:5000/app:1"); !errors.Is(err, ErrMismatch) {
		t.Fatalf("another person: %v", err)
	}
	if _, err := Open(blob, is[0], "P-alice", "other.io/app:1"); !errors.Is(err, ErrMismatch) {
		t.Fatalf("another registry: %v", err)
	}
}

func TestSealBounds(t *testing.T) {
	_, rs := ids(t, MaxRecipients+1)
	c := Creds{Server: "r.io", Username: "u", Password: secret}
	if _, err := Seal("--registry-auth", "P", c, rs); err == nil || !strings.Contains(err.Error(), "at most 128") {
		t.Fatalf("129 recipients: %v", err)
	}
	blob, err := Seal("--registry-auth", "P", c, rs[:MaxRecipients])
	if err != nil {
		t.Fatalf("%d recipients: %v", MaxRecipients, err)
	}
	if len(blob) > MaxSealed {
		t.Fatalf("%d bytes", len(blob))
	}
	if _, err := Seal("--registry-auth", "P", c, nil); err == nil {
		t.Fatal("sealed to nobody")
	}
	if _, err := Seal("--registry-auth", "P", c, []string{"age1nope"}); err == nil {
		t.Fatal("sealed to a bad recipient")
	}
	if err := CheckSealed("registry_auth", make([]byte, MaxSealed+1)); err == nil || !strings.HasPrefix(err.Error(), "registry_auth: 16385 bytes") {
		t.Fatalf("oversize: %v", err)
	}
	if err := CheckSealed("registry_auth", []byte("plain text")); err == nil {
		t.Fatal("took plain text")
	}
}

func TestIdentityFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), IdentityFile)
	a, err := LoadOrCreateIdentity(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v", st.Mode(), err)
	}
	b, err := LoadOrCreateIdentity(path)
	if err != nil || b.String() != a.String() {
		t.Fatalf("reloaded another identity: %v", err)
	}
	if err := CheckRecipient("age_recipient", a.Recipient().String()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateIdentity(path); err == nil {
		t.Fatal("took junk")
	}
	for _, bad := range []string{"", "age1", "ssh-ed25519 AAAA", strings.Repeat("a", 200)} {
		if err := CheckRecipient("age_recipient", bad); err == nil || !strings.HasPrefix(err.Error(), "age_recipient: ") {
			t.Fatalf("%q: %v", bad, err)
		}
	}
}

// FuzzOpen: a blob from the ledger, whatever its bytes, is refused or
// opened without a panic; what opens is checked credentials.
func FuzzOpen(f *testing.F) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		f.Fatal(err)
	}
	good, err := Seal("f", "P", Creds{Server: "r.io", Username: "u", Password: "p"}, []string{id.Recipient().String()})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(sealedHeader))
	f.Add([]byte(sealedHeader + "-> X25519 abc\nxyz\n--- zzz\n"))
	f.Add(good[:len(good)/2])
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Open(b, id, "P", "r.io/i")
		if err == nil && c.check("x") != nil {
			t.Fatalf("opened unchecked credentials")
		}
	})
}

// FuzzParseFile: any file is parsed or refused with one line naming the
// field.
func FuzzParseFile(f *testing.F) {
	f.Add([]byte("u:t"), "r.io/i")
	f.Add([]byte(`{"auths":{"r.io":{"auth":"`+b64("u:p")+`"}}}`), "r.io/i")
	f.Add([]byte(`{"auths":{"r.io":{"username":"u","identitytoken":"t"}},"credsStore":"x"}`), "r.io/i")
	f.Add([]byte(`{"auths":[1]}`), "ubuntu")
	f.Fuzz(func(t *testing.T, b []byte, image string) {
		c, err := ParseFile("--registry-auth", b, image)
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "--registry-auth: ") || strings.Contains(msg, "\n") {
				t.Fatalf("error %q", msg)
			}
			return
		}
		if c.check("x") != nil {
			t.Fatalf("parsed unchecked credentials")
		}
	})
}
