package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/internal/userkey"
	"github.com/cshare/cshare/node/api"
)

// inDir runs the CLI with --data-dir dir.
func inDir(dir string, args ...string) result {
	return runCLI(append([]string{"--data-dir", dir}, args...)...)
}

// mustOK fails t unless r exited 0 without stderr.
func mustOK(t *testing.T, r result) {
	t.Helper()
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q, stdout %q", r.code, r.stderr, r.stdout)
	}
}

// person is the data dir's person ID, failing t if there is none.
func person(t *testing.T, dir string) *userkey.Key {
	t.Helper()
	k, err := userkey.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func fileMode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestUserInit(t *testing.T) {
	dir := t.TempDir()
	r := inDir(dir, "user", "init", "--name", "alice")
	mustOK(t, r)
	k := person(t, dir)
	if r.lastLine() != k.ID || k.Name != "alice" {
		t.Fatalf("last line %q, want the ID %s; key named %q", r.lastLine(), k.ID, k.Name)
	}
	if _, err := peer.Decode(r.lastLine()); err != nil {
		t.Fatalf("last line is not a person ID: %v", err)
	}
	if m := fileMode(t, filepath.Join(dir, "user.key")); m != 0o600 {
		t.Errorf("user.key mode %o, want 600", m)
	}

	// A second init refuses, names the person there, and changes nothing.
	r = inDir(dir, "user", "init", "--name", "bob")
	oneErrorLine(t, r, 1, "alice", k.ID, "--force", "acts for")
	if r.stdout != "" {
		t.Errorf("refused init printed %q", r.stdout)
	}
	if got := person(t, dir); got.ID != k.ID {
		t.Fatalf("refused init replaced the key")
	}

	// --force replaces it, and says whom it replaced.
	r = inDir(dir, "user", "init", "--name", "bob", "--force")
	mustOK(t, r)
	bob := person(t, dir)
	if bob.ID == k.ID || bob.Name != "bob" || r.lastLine() != bob.ID {
		t.Fatalf("forced init: key %s %q, last line %q", bob.ID, bob.Name, r.lastLine())
	}
	if !strings.Contains(r.stdout, "replaced person alice ("+k.ID+")") {
		t.Errorf("forced init does not say whom it replaced:\n%s", r.stdout)
	}

	// --json is one value with the ID and name.
	r = inDir(t.TempDir(), "user", "init", "--name", "carol", "--json")
	mustOK(t, r)
	var u userInfo
	if err := json.Unmarshal([]byte(r.stdout), &u); err != nil || u.Name != "carol" || u.ID == "" {
		t.Fatalf("init --json: %v, %+v", err, u)
	}
}

func TestUserInitValidation(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"user", "init"}, "--name is required"},
		{[]string{"user", "init", "--name", "  "}, "--name is required"},
		{[]string{"user", "init", "--name", "a\x1b[31mb"}, "--name:"},
		{[]string{"user", "init", "--name", strings.Repeat("x", 65)}, "--name: 65 characters"},
		{[]string{"user", "init", "--name", "a", "extra"}, "unexpected argument"},
		{[]string{"user", "import"}, "missing FILE"},
		{[]string{"user", "export"}, "--out is required"},
		{[]string{"user", "frobnicate"}, "unknown command"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			dir := t.TempDir()
			oneErrorLine(t, inDir(dir, c.args...), 2, c.want)
			if _, err := os.Stat(filepath.Join(dir, "user.key")); err == nil {
				t.Error("a refused command wrote user.key")
			}
		})
	}
}

func TestUserShow(t *testing.T) {
	dir := t.TempDir()
	oneErrorLine(t, inDir(dir, "user", "show"), 1, "no person key", "cshare user init --name NAME")
	oneErrorLine(t, inDir(dir, "user", "show", "--json"), 1, "cshare user init --name NAME")

	mustOK(t, inDir(dir, "user", "init", "--name", "Zoë"))
	k := person(t, dir)
	r := inDir(dir, "user", "show", "--json")
	mustOK(t, r)
	var m map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(m))
	for key := range m {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"id", "name"}) || m["id"] != k.ID || m["name"] != "Zoë" {
		t.Fatalf("show --json = %s; want exactly id and name", r.stdout)
	}

	r = inDir(dir, "user", "show")
	mustOK(t, r)
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "id:") || !strings.HasPrefix(lines[1], "name:") {
		t.Fatalf("show: want an id line and a name line:\n%s", r.stdout)
	}
	if colOf(lines[0], k.ID) != colOf(lines[1], "Zoë") {
		t.Errorf("show: values not aligned:\n%s", r.stdout)
	}
}

// TestUserExportImport: a plain export carries the person to another data
// dir; importing it again is fine; the export is not overwritten by mistake.
func TestUserExportImport(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	out := filepath.Join(t.TempDir(), "alice.person")
	oneErrorLine(t, inDir(a, "user", "export", "--out", out), 1, "cshare user init")

	mustOK(t, inDir(a, "user", "init", "--name", "alice"))
	alice := person(t, a)
	r := inDir(a, "user", "export", "--out", out)
	mustOK(t, r)
	for _, w := range []string{out, alice.ID, "not encrypted"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("export output lacks %q:\n%s", w, r.stdout)
		}
	}
	if m := fileMode(t, out); m != 0o600 {
		t.Errorf("export mode %o, want 600", m)
	}

	r = inDir(b, "user", "import", out)
	mustOK(t, r)
	if r.lastLine() != alice.ID {
		t.Fatalf("import: last line %q, want %s", r.lastLine(), alice.ID)
	}
	if got := person(t, b); got.ID != alice.ID || got.Name != "alice" || !got.Priv.Equals(alice.Priv) {
		t.Fatalf("imported %s %q, want %s alice", got.ID, got.Name, alice.ID)
	}
	if m := fileMode(t, filepath.Join(b, "user.key")); m != 0o600 {
		t.Errorf("imported user.key mode %o, want 600", m)
	}
	sa, sb := inDir(a, "user", "show", "--json"), inDir(b, "user", "show", "--json")
	if sa.stdout != sb.stdout {
		t.Errorf("show differs after import:\n%s\n%s", sa.stdout, sb.stdout)
	}

	// Again: the same person, no --force needed, and it says so.
	r = inDir(b, "user", "import", out)
	mustOK(t, r)
	if r.lastLine() != alice.ID || !strings.Contains(r.stdout, "already has person alice") {
		t.Errorf("re-import:\n%s", r.stdout)
	}

	// The export is not overwritten without --force.
	before, _ := os.ReadFile(out)
	oneErrorLine(t, inDir(a, "user", "export", "--out", out), 1, out, "--force")
	if after, _ := os.ReadFile(out); string(after) != string(before) {
		t.Error("a refused export changed the file")
	}
	mustOK(t, inDir(a, "user", "export", "--out", out, "--force"))
	// Not over the data dir's own key.
	oneErrorLine(t, inDir(a, "user", "export", "--out", filepath.Join(a, "user.key"), "--force"), 2, "user.key")
}

// TestUserExportEncrypted: with a passphrase file the export opens only
// with the same passphrase.
func TestUserExportEncrypted(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	tmp := t.TempDir()
	out := filepath.Join(tmp, "alice.person")
	pass := filepath.Join(tmp, "pass")
	wrong := filepath.Join(tmp, "wrong")
	writeFile(t, pass, "s3cret words\n")
	writeFile(t, wrong, "s3cret word\n")
	mustOK(t, inDir(a, "user", "init", "--name", "alice"))
	alice := person(t, a)

	r := inDir(a, "user", "export", "--out", out, "--passphrase-file", pass)
	mustOK(t, r)
	if !strings.Contains(r.stdout, "encrypted with the passphrase in "+pass) {
		t.Errorf("export does not say it is encrypted:\n%s", r.stdout)
	}
	if m := fileMode(t, out); m != 0o600 {
		t.Errorf("export mode %o, want 600", m)
	}

	oneErrorLine(t, inDir(b, "user", "import", out), 1, "the file is encrypted: pass --passphrase-file F")
	oneErrorLine(t, inDir(b, "user", "import", out, "--passphrase-file", wrong), 1, "wrong passphrase, or the file was changed")
	if _, err := userkey.Load(b); err == nil {
		t.Fatal("a refused import wrote user.key")
	}
	r = inDir(b, "user", "import", out, "--passphrase-file", pass)
	mustOK(t, r)
	if r.lastLine() != alice.ID || person(t, b).ID != alice.ID {
		t.Fatalf("import: last line %q, want %s", r.lastLine(), alice.ID)
	}
}

func TestUserImportRefusesAnotherPerson(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	out := filepath.Join(t.TempDir(), "alice.person")
	mustOK(t, inDir(a, "user", "init", "--name", "alice"))
	mustOK(t, inDir(a, "user", "export", "--out", out))
	mustOK(t, inDir(b, "user", "init", "--name", "bob"))
	alice, bob := person(t, a), person(t, b)

	oneErrorLine(t, inDir(b, "user", "import", out), 1, "bob ("+bob.ID+")", "alice", "--force", "acts for")
	if person(t, b).ID != bob.ID {
		t.Fatal("a refused import replaced the key")
	}
	r := inDir(b, "user", "import", out, "--force")
	mustOK(t, r)
	if r.lastLine() != alice.ID || person(t, b).ID != alice.ID || !strings.Contains(r.stdout, "replaced person bob") {
		t.Fatalf("forced import:\n%s", r.stdout)
	}

	// Files that are not exports are refused with one line.
	junk := filepath.Join(t.TempDir(), "junk")
	writeFile(t, junk, `{"hello":1}`)
	oneErrorLine(t, inDir(b, "user", "import", junk), 1, junk, "not a cshare person export")
	oneErrorLine(t, inDir(b, "user", "import", filepath.Join(a, "user.key")), 1, "format")
	oneErrorLine(t, inDir(b, "user", "import", filepath.Join(a, "missing")), 1, "missing")
}

// TestUserPassphraseFile: an unusable --passphrase-file is a usage error
// naming the flag, before anything is read or written.
func TestUserPassphraseFile(t *testing.T) {
	dir := t.TempDir()
	mustOK(t, inDir(dir, "user", "init", "--name", "alice"))
	tmp := t.TempDir()
	empty, newline, big := filepath.Join(tmp, "empty"), filepath.Join(tmp, "newline"), filepath.Join(tmp, "big")
	writeFile(t, empty, "")
	writeFile(t, newline, "\r\n")
	writeFile(t, big, strings.Repeat("x", 4097))
	out := filepath.Join(tmp, "out")
	for _, c := range []struct{ file, want string }{
		{empty, "is empty"}, {newline, "is empty"}, {big, "larger than 4 KiB"}, {filepath.Join(tmp, "missing"), "no such file"}, {"", "give the path"},
	} {
		oneErrorLine(t, inDir(dir, "user", "export", "--out", out, "--passphrase-file", c.file), 2, "--passphrase-file", c.want)
		oneErrorLine(t, inDir(dir, "user", "import", out, "--passphrase-file", c.file), 2, "--passphrase-file", c.want)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a refused export wrote the file")
	}
}

// TestUserNameFlag: org create, node join and member join send
// --user-name, else $USER when it is a valid name, else nothing.
func TestUserNameFlag(t *testing.T) {
	n := startNode(t)
	sent := func(args ...string) string {
		t.Helper()
		n.mu.Lock()
		n.create, n.join = nil, nil
		n.mu.Unlock()
		mustOK(t, n.run(args...))
		n.mu.Lock()
		defer n.mu.Unlock()
		if args[0] == "org" {
			return n.create.UserName
		}
		return n.join.UserName
	}
	cmds := [][]string{
		{"org", "create", "--name", "acme"},
		{"node", "join", "--org-key", orgKey},
		{"member", "join", "--invite", invite},
	}
	for _, c := range cmds {
		t.Setenv("USER", "carol")
		if got := sent(append(c, "--user-name", " Ann Lee ")...); got != "Ann Lee" {
			t.Errorf("%v --user-name: sent %q", c, got)
		}
		if got := sent(c...); got != "carol" {
			t.Errorf("%v with USER=carol: sent %q", c, got)
		}
		t.Setenv("USER", "bad\x1bname")
		if got := sent(c...); got != "" {
			t.Errorf("%v with an invalid $USER: sent %q", c, got)
		}
		t.Setenv("USER", "")
		if got := sent(c...); got != "" {
			t.Errorf("%v without $USER: sent %q", c, got)
		}
		before := len(n.called())
		oneErrorLine(t, n.run(append(c, "--user-name", "a\nb")...), 2, "--user-name:")
		oneErrorLine(t, n.run(append(c, "--user-name", "")...), 2, "--user-name: empty")
		if len(n.called()) != before {
			t.Errorf("%v: a bad --user-name reached the node", c)
		}
	}
	// The JSON field is user_name, left out when empty.
	for _, v := range []any{api.OrgCreate{Name: "o", UserName: "Ann"}, api.JoinRequest{OrgKey: "k", UserName: "Ann"}} {
		if b, _ := json.Marshal(v); !strings.Contains(string(b), `"user_name":"Ann"`) {
			t.Errorf("%T JSON: %s", v, b)
		}
	}
	for _, v := range []any{api.OrgCreate{Name: "o"}, api.JoinRequest{OrgKey: "k"}} {
		if b, _ := json.Marshal(v); strings.Contains(string(b), "user_name") {
			t.Errorf("%T JSON without a user name: %s", v, b)
		}
	}
}

// TestUserNameFromLogin: without $USER, the login name names the person.
func TestUserNameFromLogin(t *testing.T) {
	t.Setenv("USER", "")
	if got := defaultUserName(func() string { return "dave" }); got != "dave" {
		t.Errorf("login dave: %q", got)
	}
	if got := defaultUserName(func() string { return "bad\x1bname" }); got != "" {
		t.Errorf("an invalid login name: %q", got)
	}
	t.Setenv("USER", "carol")
	if got := defaultUserName(func() string { return "dave" }); got != "carol" {
		t.Errorf("$USER first: %q", got)
	}
}

// TestUserImportRefusesOpenPlainKey: a plaintext export that its group or
// others may read (mode 0666, 0640) is refused with one line saying to
// chmod 600 it, as OpenSSH refuses such a key, and nothing is imported; at
// 0600 it imports; an encrypted export may be readable by others.
func TestUserImportRefusesOpenPlainKey(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	out := filepath.Join(t.TempDir(), "alice.person")
	mustOK(t, inDir(a, "user", "init", "--name", "alice"))
	mustOK(t, inDir(a, "user", "export", "--out", out))
	for _, m := range []os.FileMode{0o666, 0o640, 0o604} {
		if err := os.Chmod(out, m); err != nil {
			t.Fatal(err)
		}
		oneErrorLine(t, inDir(b, "user", "import", out), 1, "chmod 600 "+out, fmt.Sprintf("mode %04o", m))
		if _, err := os.Stat(filepath.Join(b, "user.key")); !os.IsNotExist(err) {
			t.Fatalf("mode %o: the refused import wrote user.key (%v)", m, err)
		}
	}
	if err := os.Chmod(out, 0o600); err != nil {
		t.Fatal(err)
	}
	mustOK(t, inDir(b, "user", "import", out))

	enc := filepath.Join(t.TempDir(), "alice.enc")
	pass := filepath.Join(t.TempDir(), "pass")
	if err := os.WriteFile(pass, []byte("correct horse\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustOK(t, inDir(a, "user", "export", "--out", enc, "--passphrase-file", pass))
	if err := os.Chmod(enc, 0o644); err != nil {
		t.Fatal(err)
	}
	mustOK(t, inDir(t.TempDir(), "user", "import", enc, "--passphrase-file", pass))
}
