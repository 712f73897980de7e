package cli

import (
	"net/http"
	"strings"
	"testing"
)

// TestAPIFieldsNamedAsFlags: an API error about one field is printed
// naming the flag the user typed, not the JSON key: offer create --memory
// 10t is "--memory: 10 TiB ...", not "memory_mb: 10485760 ...".
func TestAPIFieldsNamedAsFlags(t *testing.T) {
	n := startRealNode(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"offer", "create", "--price", "1", "--memory", "10t"}, "cshare: --memory: 10 TiB; this machine has "},
		{[]string{"offer", "create", "--price", "1", "--disk", "16t"}, "cshare: --disk: 16 TiB; this machine has "},
		{[]string{"offer", "create", "--price", "1", "--for", "1h", "--min-duration", "2h"}, "cshare: --min-duration: 2h; allowed: 0 to 1h"},
	} {
		r := n.run(c.args...)
		if r.code != 1 || !strings.HasPrefix(r.stderr, c.want) || strings.Count(r.stderr, "\n") != 1 || strings.Contains(r.stderr, "_mb") {
			t.Errorf("%q: exit %d, stderr %q; want one line starting %q", c.args, r.code, r.stderr, c.want)
		}
	}
}

// TestContractSpecRefusedAtTheDoor: contract create checks the image, env
// and command as job submit does, in the CLI (naming the flag, before any
// node is asked) and in the API (naming the field), for an offer that
// exists.
func TestContractSpecRefusedAtTheDoor(t *testing.T) {
	n := startRealNode(t)
	r := n.run("offer", "create", "--price", "1", "--cpus", "1", "--memory", "64m", "--disk", "0")
	if r.code != 0 {
		t.Fatalf("offer create: %d %s", r.code, r.stderr)
	}
	offer := r.lastLine()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--image", "../x"}, `cshare: --image: "../x" is not an image reference`},
		{[]string{"--image", "BusyBox:Latest"}, `cshare: --image: "BusyBox:Latest" has upper-case letters`},
		{[]string{"--image", strings.Repeat("b", 10240)}, `cshare: --image: "` + strings.Repeat("b", 64) + `…" (10240 bytes) is too long`},
		{[]string{"--image", "busybox", "--env", "A=\xff"}, `cshare: --env: "\xff" (A's value) is not valid UTF-8`},
		{[]string{"--image", "busybox", "--onstart", "echo \xff"}, `cshare: --onstart: "echo \xff" is not valid UTF-8 at byte 5`},
		{[]string{"--image", "busybox", "--", "echo", "\xfe"}, `cshare: cmd: "\xfe" (word 2 of the command) is not valid UTF-8`},
	} {
		r := n.run(append([]string{"contract", "create", offer}, c.args...)...)
		if r.code != 2 || !strings.HasPrefix(r.stderr, c.want) || strings.Count(r.stderr, "\n") != 1 || len(r.stderr) > 400 {
			t.Errorf("%.60q: exit %d, stderr %.300q; want one line starting %q", c.args, r.code, r.stderr, c.want)
		}
	}
	for _, c := range []struct{ body, field, want string }{
		{`{"offer":"` + offer + `","image":"../x"}`, "image", `image: "../x" is not an image reference`},
		{`{"offer":"` + offer + `","image":"BusyBox:Latest"}`, "image", `image: "BusyBox:Latest" has upper-case letters`},
		{`{"offer":"` + offer + `","image":"busybox","env":{"A":"\u0000"}}`, "env", `env: "\x00" (A's value) holds a NUL byte`},
		{`{"offer":"` + offer + `","image":"busybox","cmd":["echo","\u0000"]}`, "cmd", `cmd: "\x00" (word 2 of the command) holds a NUL byte`},
		{`{"offer":"` + offer + `","image":"busybox","onstart":"\u0000"}`, "onstart", `onstart: "\x00" holds a NUL byte`},
	} {
		code, e := n.post(t, "/v1/contracts", c.body)
		if code != http.StatusBadRequest || e.Field != c.field || !strings.HasPrefix(e.Error, c.want) {
			t.Errorf("POST %s: %d %+v; want a 400 about %s: %q", c.body, code, e, c.field, c.want)
		}
	}
	if r := n.run("contract", "ls", "--json"); r.code != 0 || strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("refused requests left contracts: %d %s %s", r.code, r.stdout, r.stderr)
	}
}
