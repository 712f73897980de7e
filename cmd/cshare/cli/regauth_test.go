package cli

import (
	"encoding/base64"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/cshare/cshare/internal/regauth"
	"github.com/cshare/cshare/node/api"
)

// TestRegistryAuthCLI: contract create --registry-auth seals the file's
// credentials to the offer's host (resolved from a prefix) for the CLI's
// person, job submit to every machine that publishes a recipient; the
// node gets only the sealed blob, and nothing the CLI prints quotes the
// secret. Bad files are refused with one line naming the flag.
func TestRegistryAuthCLI(t *testing.T) {
	const secret = "pr1vate-T0ken"
	n := startNode(t)
	host, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	other, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	n.mu.Lock()
	n.offers = []api.OfferInfo{{ID: "0123abcd", Machine: m1ID, AgeRecipient: host.Recipient().String()},
		{ID: "99ffeedd", Machine: m2ID}}
	n.machines[0].AgeRecipient = host.Recipient().String()
	n.machines[1].AgeRecipient = other.Recipient().String()
	n.mu.Unlock()
	dir := t.TempDir()
	line := filepath.Join(dir, "token")
	writeFile(t, line, "alice:"+secret+"\n")
	config := filepath.Join(dir, "config.json")
	writeFile(t, config, `{"auths":{"https://ghcr.io":{"auth":"`+base64.StdEncoding.EncodeToString([]byte("bob:"+secret))+`"}}}`)

	r := n.run("contract", "create", "0123", "--image", "r.example.com/team/app:1", "--cpus", "1", "--registry-auth", line)
	if r.code != 0 || strings.Contains(r.stdout+r.stderr, secret) {
		t.Fatalf("contract create: %+v", r)
	}
	n.mu.Lock()
	req := *n.contract
	n.mu.Unlock()
	if req.Offer != "0123abcd" || strings.Contains(string(req.RegistryAuth), secret) {
		t.Fatalf("sent offer %q, blob %q", req.Offer, req.RegistryAuth)
	}
	c, err := regauth.Open(req.RegistryAuth, host, ownerID, "r.example.com/team/app:1")
	if err != nil || c.Username != "alice" || c.Password != secret || c.Server != "r.example.com" {
		t.Fatalf("the host opens: %v, %v", c, err)
	}

	r = n.run("job", "submit", "--image", "ghcr.io/o/app", "--registry-auth", config, "--", "true")
	if r.code != 0 || strings.Contains(r.stdout+r.stderr, secret) {
		t.Fatalf("job submit: %+v", r)
	}
	n.mu.Lock()
	blob := n.submit.RegistryAuth
	n.mu.Unlock()
	for _, id := range []*age.X25519Identity{host, other} {
		if c, err := regauth.Open(blob, id, ownerID, "ghcr.io/o/app"); err != nil || c.Username != "bob" || c.Password != secret {
			t.Fatalf("a machine opens the job's: %v, %v", c, err)
		}
	}

	bad := filepath.Join(dir, "bad")
	writeFile(t, bad, "alice "+secret+"\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"contract", "create", "0123", "--image", "r.io/x", "--registry-auth", bad}, "--registry-auth: not user:token"},
		{[]string{"contract", "create", "0123", "--image", "r.io/x", "--registry-auth", filepath.Join(dir, "none")}, "--registry-auth: stat"},
		{[]string{"contract", "create", "0123", "--image", "ghcr.io/x", "--registry-auth", config, "--cpus", "1"}, ""},
		{[]string{"contract", "create", "0123", "--image", "r.io/x", "--registry-auth", config}, "--registry-auth: no auths entry for the image's registry r.io"},
		{[]string{"contract", "create", "99ff", "--image", "r.io/x", "--registry-auth", line}, "--registry-auth: the host of offer 99ffeedd publishes no age recipient"},
		{[]string{"job", "submit", "--registry-auth", line, "--", "true"}, "--registry-auth needs --image"},
		{[]string{"job", "submit", "--driver", "exec", "--registry-auth", line, "--", "true"}, "--registry-auth: only with --driver docker"},
	} {
		r := n.run(tc.args...)
		if tc.want == "" {
			if r.code != 0 {
				t.Errorf("%v: %+v", tc.args, r)
			}
			continue
		}
		if r.code == 0 || !strings.Contains(r.stderr, tc.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") > 1 || strings.Contains(r.stderr, secret) {
			t.Errorf("%v: code %d, stderr %q; want one line with %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
}
