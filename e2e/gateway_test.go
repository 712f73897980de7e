//go:build e2e

package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSSHIntoRental: two node processes with SSH gateways (node.yaml
// ssh.listen); the second node's person rents a CPU of the first. Through
// the CLI alone: `user ssh-key add` after the rental runs, then `contract
// ssh ID -- CMD` (the system's ssh, to the host's gateway found from its
// heartbeat) runs CMD with its exit code; `contract ssh-url` prints the
// address; `contract cp` copies a directory in and out; the host's person,
// who is not the renter, is refused with a message.
func TestSSHIntoRental(t *testing.T) {
	dockerAvailable(t)
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("no OpenSSH client (apt-get install -y openssh-client)")
	}
	conf := filepath.Join(t.TempDir(), "node.yaml")
	if err := os.WriteFile(conf, []byte("ssh:\n  listen: 127.0.0.1:0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ps := mesh(t, 2, "--config", conf)
	host, renter := ps[0], ps[1]
	id := rent(t, host, renter)
	defer func() {
		renter.must("contract", "rm", id)
		eventually(t, 30*time.Second, "the rental's container removed", func() bool {
			st, _ := containerState(t, id)
			return st == ""
		})
	}()

	keys := t.TempDir()
	keygen := func(name string) string {
		f := filepath.Join(keys, name)
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", f).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v %s", err, out)
		}
		return f
	}
	rk, hk := keygen("renter"), keygen("host")
	fp := lastLine(renter.must("user", "ssh-key", "add", rk+".pub"))
	if !strings.HasPrefix(fp, "SHA256:") {
		t.Fatalf("ssh-key add printed %q", fp)
	}
	host.must("user", "ssh-key", "add", hk+".pub")
	if out := renter.must("user", "ssh-key", "ls"); !strings.Contains(out, fp) || !strings.Contains(out, "renter") {
		t.Fatalf("ssh-key ls:\n%s", out)
	}
	var st struct {
		SSHAddr    string `json:"ssh_addr"`
		SSHHostKey string `json:"ssh_host_key"`
	}
	host.json(&st, "node", "status")
	url := strings.TrimSpace(renter.must("contract", "ssh-url", id))
	if !strings.HasPrefix(url, "ssh://"+id+"@127.0.0.1:") || !strings.HasSuffix(st.SSHAddr, url[strings.LastIndex(url, ":"):]) {
		t.Fatalf("ssh-url %q; host's gateway %q", url, st.SSHAddr)
	}
	ssh := func(p *proc, key string, remote ...string) (string, string, int) {
		return p.cli(append([]string{"contract", "ssh", id, "-i", key, "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "--"}, remote...)...)
	}
	eventually(t, 30*time.Second, "the renter's key enters the rental", func() bool {
		out, _, code := ssh(renter, rk, "echo", "in", "$CSHARE_CONTRACT;", "exit", "9")
		return code == 9 && out == "in "+id+"\n"
	})
	if out, errOut, code := ssh(host, hk, "echo", "in"); code != 255 || out != "" || !strings.Contains(errOut, "no such contract") {
		t.Fatalf("the host person's key: %d %q %q", code, out, errOut)
	}

	src := filepath.Join(t.TempDir(), "data")
	_ = os.MkdirAll(filepath.Join(src, "sub"), 0o755)
	_ = os.WriteFile(filepath.Join(src, "sub", "a.txt"), []byte("hello\n"), 0o644)
	renter.must("contract", "cp", src, id+":/root")
	if out, _, code := ssh(renter, rk, "cat", "/root/data/sub/a.txt"); code != 0 || out != "hello\n" {
		t.Fatalf("copied in: %d %q", code, out)
	}
	back := filepath.Join(t.TempDir(), "back")
	renter.must("contract", "cp", id+":/root/data", back)
	if b, err := os.ReadFile(filepath.Join(back, "sub", "a.txt")); err != nil || !bytes.Equal(b, []byte("hello\n")) {
		t.Fatalf("copied out: %q %v", b, err)
	}
	renter.must("user", "ssh-key", "rm", fp)
	eventually(t, 30*time.Second, "the removed key is refused", func() bool {
		_, errOut, code := ssh(renter, rk, "true")
		return code == 255 && strings.Contains(errOut, "not in the org's ledger")
	})
}
