package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cshare/cshare/node/api"
)

// TestSSHArgs: ssh's command line checks the gateway's host key under the
// machine's alias, passes -i and -o, and puts the remote command after the
// destination.
func TestSSHArgs(t *testing.T) {
	tg := api.SSHTarget{User: "c0123", Machine: "12D3m", Host: "10.0.0.5", Port: 2222, HostKey: "ssh-ed25519 AAAA"}
	got := strings.Join(sshArgs(tg, "/k", sshFlags{identity: "/id", opts: []string{"BatchMode=yes"}}, []string{"echo", "hi"}), " ")
	want := "-p 2222 -o HostKeyAlias=cshare-12D3m -o UserKnownHostsFile=/k -o StrictHostKeyChecking=yes -i /id -o BatchMode=yes -- c0123@10.0.0.5 echo hi"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// TestRememberHostKey: one line per machine, the newest key kept, others
// left alone; a key on several lines is refused.
func TestRememberHostKey(t *testing.T) {
	f := filepath.Join(t.TempDir(), "ssh", "known_hosts")
	for _, tg := range []api.SSHTarget{
		{Machine: "m1", HostKey: "ssh-ed25519 AAAA1"},
		{Machine: "m2", HostKey: "ssh-ed25519 AAAA2"},
		{Machine: "m1", HostKey: "ssh-ed25519 AAAA3"},
	} {
		if err := rememberHostKey(f, tg); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(f)
	if string(b) != "cshare-m2 ssh-ed25519 AAAA2\ncshare-m1 ssh-ed25519 AAAA3\n" {
		t.Fatalf("known_hosts %q", b)
	}
	if err := rememberHostKey(f, api.SSHTarget{Machine: "m3", HostKey: "ssh-ed25519 A\n* ssh-ed25519 B"}); err == nil {
		t.Fatal("a host key of two lines was written")
	}
}
