//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Three machines on 127.0.0.1 port 0 are all killed with SIGKILL and started
// again: with no command typed they find each other (each comes back on the
// port it had, which the others remember), agree on one state, and a job
// submitted on one then runs on all three (issue 15). mDNS is off, so the
// address book alone heals the org.
func TestKillAllThreeHeals(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "node.yaml")
	yaml := "runtime: {exec: true, docker: false}\nresources: {max_concurrent_jobs: 1}\ndiscovery: {mdns: false}\n"
	if err := os.WriteFile(conf, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	ps := meshOn(t, 3, "/ip4/127.0.0.1/tcp/0", "--heartbeat-interval", "1s", "--config", conf)
	t0 := time.Now()
	started := kill9All(ps)
	hash := waitHealed(t, ps, 10*time.Second)
	t.Logf("healed %.1fs after the restart began (the three starts took %.1fs): state %.12s", time.Since(t0).Seconds(), started.Seconds(), hash)
	if out := ps[0].must("node", "status"); strings.Contains(out, "reconnecting") {
		t.Fatalf("node status after healing says reconnecting:\n%s", out)
	}

	id := lastLine(ps[1].must("job", "submit", "--driver", "exec", "--cpus", "3", "--range", "1-30", "--", "sh", "-c", "sleep 0.3; echo $CSHARE_ITEM"))
	items := waitAllDone(t, ps[1], ps[2], id, 90*time.Second)
	machines := map[string]bool{}
	for _, it := range items {
		machines[it.Machine] = true
	}
	for _, p := range ps {
		var st status
		p.json(&st, "node", "status")
		if !machines[st.ID] {
			t.Errorf("machine %s ran no item", st.ID)
		}
	}
	t.Logf("items by machine: %+v", items)
}

// A lone machine whose org's other machines are gone says so in node
// status, and keeps trying: when they come back it reconnects.
func TestStatusReconnecting(t *testing.T) {
	ps := meshOn(t, 2, "/ip4/127.0.0.1/tcp/0", "--heartbeat-interval", "1s")
	ps[1].kill9()
	eventually(t, 10*time.Second, "node status says reconnecting", func() bool {
		var st struct {
			Peers        int  `json:"peers"`
			Reconnecting bool `json:"reconnecting"`
		}
		ps[0].json(&st, "node", "status")
		return st.Peers == 0 && st.Reconnecting && strings.Contains(ps[0].must("node", "status"), "0, reconnecting")
	})
	ps[1].start()
	eventually(t, 10*time.Second, "reconnected", func() bool {
		var st status
		ps[0].json(&st, "node", "status")
		return st.Peers == 1
	})
}

// A machine paused (SIGSTOP) for longer than its connections survive comes
// back (SIGCONT) and is connected to both others again within 10s, with no
// command typed; the org agrees on one state (issue 15: a laptop that slept).
func TestPausedMachineReconnects(t *testing.T) {
	if testing.Short() {
		t.Skip("pauses a node for a minute")
	}
	ps := meshOn(t, 3, "/ip4/127.0.0.1/tcp/0", "--heartbeat-interval", "1s")
	victim := ps[2]
	if err := victim.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// yamux's keepalive (30s, then a 10s write timeout) ends the others'
	// connections to the paused process.
	eventually(t, 90*time.Second, "the others drop the paused machine", func() bool {
		for _, p := range ps[:2] {
			var st status
			p.json(&st, "node", "status")
			if st.Peers != 1 {
				return false
			}
		}
		return true
	})
	if err := victim.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	waitHealed(t, ps, 10*time.Second)
	t.Logf("reconnected %.1fs after SIGCONT", time.Since(t0).Seconds())
}

// waitHealed waits until every node of ps is connected to all the others
// and they show one state hash, which it returns.
func waitHealed(t *testing.T, ps []*proc, d time.Duration) string {
	t.Helper()
	var hash string
	eventually(t, d, fmt.Sprintf("%d peers on every node and one state hash", len(ps)-1), func() bool {
		hashes := map[string]bool{}
		for _, p := range ps {
			var st status
			p.json(&st, "node", "status")
			var o orgInfo
			p.json(&o, "org", "show")
			if st.Peers != len(ps)-1 {
				return false
			}
			hashes[o.StateHash] = true
			hash = o.StateHash
		}
		return len(hashes) == 1
	})
	return hash
}

// kill9All kills every node of ps with SIGKILL, starts them all again on
// their data dirs, and returns how long the starts took.
func kill9All(ps []*proc) time.Duration {
	for _, p := range ps {
		p.kill9()
	}
	t0 := time.Now()
	for _, p := range ps {
		p.start()
	}
	return time.Since(t0)
}
