package node

import (
	"net"
	"slices"
	"strconv"
	"testing"
)

func TestSamePlace(t *testing.T) {
	for _, tc := range []struct {
		c, b string
		want bool
	}{
		{"/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/tcp/4312", true},
		{"/ip4/0.0.0.0/udp/0/quic-v1", "/ip4/0.0.0.0/udp/4312/quic-v1", true},
		{"/ip4/0.0.0.0/udp/0/quic-v1", "/ip4/0.0.0.0/tcp/4312", false},
		{"/ip4/0.0.0.0/tcp/0", "/ip4/127.0.0.1/tcp/4312", false},
		{"/ip4/0.0.0.0/tcp/4001", "/ip4/0.0.0.0/tcp/4001", false}, // not port 0
		{"/ip4/0.0.0.0/tcp/0", "/ip4/0.0.0.0/tcp/0", false},
		{"/ip6/::/tcp/0", "/ip6/::/tcp/9", true},
		{"garbage", "/ip4/0.0.0.0/tcp/1", false},
	} {
		if got := samePlace(tc.c, tc.b); got != tc.want {
			t.Errorf("samePlace(%s, %s) = %v, want %v", tc.c, tc.b, got, tc.want)
		}
	}
}

// TestListenMemory: the bound port of a port-0 address is remembered and
// preferred next time, unless something else holds it then; fixed ports and
// damaged files change nothing.
func TestListenMemory(t *testing.T) {
	dir := t.TempDir()
	if loadListen(dir) != nil {
		t.Fatal("memory in an empty dir")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	conf := []string{"/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/4001/quic-v1"}
	bound := []string{"/ip4/127.0.0.1/udp/4001/quic-v1", "/ip4/127.0.0.1/tcp/" + port}
	if err := saveListen(dir, conf, bound); err != nil {
		t.Fatal(err)
	}
	// Held by another socket: the configured address.
	if got := preferListen(conf, loadListen(dir)); !slices.Equal(got, conf) {
		t.Errorf("port in use: listen %v, want %v", got, conf)
	}
	_ = ln.Close()
	want := []string{"/ip4/127.0.0.1/tcp/" + port, "/ip4/127.0.0.1/udp/4001/quic-v1"}
	got := preferListen(conf, loadListen(dir))
	if !slices.Equal(got, want) {
		t.Errorf("port free: listen %v, want %v", got, want)
	}
	if !reusedAll(got, conf, bound) || reusedAll(got, conf, bound[:1]) {
		t.Error("reusedAll")
	}
	// A changed configuration does not take the old memory.
	other := []string{"/ip4/0.0.0.0/tcp/0"}
	if got := preferListen(other, loadListen(dir)); !slices.Equal(got, other) {
		t.Errorf("other config: listen %v", got)
	}
}
