package config

import (
	"strings"
	"testing"
)

// TestSSH: ssh.listen is off unless set, and an address that is not
// HOST:PORT is refused in one line naming the key.
func TestSSH(t *testing.T) {
	for _, tc := range []struct{ src, want, err string }{
		{"", "", ""},
		{"ssh:\n", "", ""},
		{"ssh: {listen: \":2222\"}\n", ":2222", ""},
		{"ssh:\n  listen: 127.0.0.1:0\n", "127.0.0.1:0", ""},
		{"ssh:\n  listen: \"[::1]:22\"\n", "[::1]:22", ""},
		{"ssh:\n  listen: 2222\n", "", `ssh.listen: is 2222; expected an address such as ":2222" (line 2)`},
		{"ssh:\n  listen: \"2222\"\n", "", `ssh.listen: "2222" is not HOST:PORT; allowed: HOST:PORT or :PORT, such as ":2222" (line 2)`},
		{"ssh:\n  listen: \":70000\"\n", "", `ssh.listen: ":70000" is not a port from 0 to 65535`},
		{"ssh:\n  listen: \":+22\"\n", "", `is not a port`},
		{"ssh:\n  port: 22\n", "", `unknown key "ssh.port"; allowed under ssh: listen (line 2)`},
		{"ssh: [1]\n", "", `ssh: is a list; expected a mapping with keys listen`},
	} {
		f, err := Parse([]byte(tc.src))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: got %v, want an error with %q", tc.src, err, tc.err)
			}
			continue
		}
		if err != nil || f.SSH.Listen != tc.want {
			t.Errorf("%q: listen %q, %v; want %q", tc.src, f.SSH.Listen, err, tc.want)
		}
	}
}

// TestJupyter: jupyter.listen is off unless set, checked as ssh.listen.
func TestJupyter(t *testing.T) {
	f, err := Parse([]byte("jupyter: {listen: \":8443\"}\n"))
	if err != nil || f.Jupyter.Listen != ":8443" || f.SSH.Listen != "" {
		t.Fatalf("listen %q, ssh %q, %v; want :8443 and no ssh", f.Jupyter.Listen, f.SSH.Listen, err)
	}
	for src, want := range map[string]string{
		"jupyter:\n  listen: 8443\n":  `jupyter.listen: is 8443; expected an address such as ":8443" (line 2)`,
		"jupyter:\n  port: 8443\n":    `unknown key "jupyter.port"; allowed under jupyter: listen (line 2)`,
		"jupyter:\n  listen: \"x\"\n": `jupyter.listen: "x" is not HOST:PORT`,
	} {
		if _, err := Parse([]byte(src)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want an error with %q", src, err, want)
		}
	}
}
