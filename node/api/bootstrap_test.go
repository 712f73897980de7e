package api

import (
	"strings"
	"testing"
)

const bootID = "12D3KooWGRUVh7fV7F5UqiEZZDYpkPTXQmjWfEmSxUGLhLhqQ7Jx"

func TestCheckBootstrap(t *testing.T) {
	for _, c := range []struct {
		addr, want string // want: "" for accepted, else part of the error
	}{
		{"/ip4/203.0.114.7/tcp/4001/p2p/" + bootID, ""},
		{"/ip6/2001:470::1/udp/4001/quic-v1/p2p/" + bootID, ""},
		{"/dns4/relay.example.com/tcp/4001/p2p/" + bootID, ""},
		{"/dns6/relay.example.com/tcp/4001/p2p/" + bootID, ""},
		{"/dns/relay.example.com/tcp/4001/p2p/" + bootID, ""},
		{"/dns4/relay.example.com/tcp/4001", "does not end in /p2p/<machine ID>"},
		{"/p2p/" + bootID, "starts with /p2p"},
		{"relay.example.com:4001", "is not a multiaddr"},
		{"", "is not a multiaddr"},
		{"/ip4/1.2.3.4/tcp/4001/p2p/notanid", "is not a multiaddr"},
	} {
		err := CheckBootstrap("--bootstrap", []string{c.addr})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v", c.addr, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "--bootstrap: ")):
			t.Errorf("%q: error %v, want one naming --bootstrap with %q", c.addr, err, c.want)
		}
	}
	many := make([]string, MaxBootstrap+1)
	for i := range many {
		many[i] = "/dns4/relay.example.com/tcp/4001/p2p/" + bootID
	}
	if err := CheckBootstrap("bootstrap", many); err == nil {
		t.Error("too many addresses accepted")
	}
}

// FuzzCheckBootstrap: any string is accepted or refused with one line that
// names the field, never a panic.
func FuzzCheckBootstrap(f *testing.F) {
	f.Add("/dns4/relay.example.com/tcp/4001/p2p/" + bootID)
	f.Add("/ip4/1.2.3.4/tcp/4001")
	f.Add("/p2p-circuit")
	f.Fuzz(func(t *testing.T, s string) {
		err := CheckBootstrap("bootstrap", []string{s})
		if err != nil && (strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), "bootstrap: ")) {
			t.Fatalf("%q: %q", s, err)
		}
	})
}
