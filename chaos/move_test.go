//go:build chaos

package chaos

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestNATMove (`make nat`, issue 32): a laptop moves between networks. In
// TestNAT's internet, a relay machine, a machine b behind NAT B (the
// office) and the laptop behind NAT A (home), listening on every address
// it will ever have, form an org; the laptop joined with the org key alone
// (no --bootstrap). Then its namespace's link is pulled from router A and
// plugged into router B on another LAN: its address, its NAT and its
// public address change while its process keeps running, and nobody types
// a command. The org must find it again: the relay and b connected to it,
// it private again with a reservation on the relay, heartbeats sent since
// the move reaching the relay with its relay address (its new LAN address
// follows within libp2p's minute-long cache of interface addresses); a
// job then runs items on it and its output is read from the relay and
// from b.
func TestNATMove(t *testing.T) {
	skipNAT(t)
	t0 := time.Now()
	o := newNATOrg(t)
	home, office := o.w.behindNAT("lap", 1, false), o.w.behindNAT("b", 2, false)
	lap := o.add(t, "lap", home, "0.0.0.0")
	b := o.add(t, "b", office, office.ip, "--bootstrap", o.byName)
	relay, ns := o.relay, o.all
	for _, n := range ns[1:] {
		o.join(t, n)
	}
	for _, n := range ns {
		t.Logf("%s = machine %s at %s", n.name, n.id, n.ip)
	}
	natWait(t, ns, 90*time.Second, "one org, every machine connected to the others, the laptop private with a relay address", func(sts []natStatus) string {
		for i, s := range sts {
			if s.StateHash == "" || s.StateHash != sts[0].StateHash || len(s.Connections) < 2 {
				return fmt.Sprintf("%s: state %.10s, %d connections", ns[i].name, s.StateHash, len(s.Connections))
			}
		}
		if s := sts[lap.i]; s.Reachability != "private" || len(relaysOf(s, ns)) == 0 {
			return "lap: " + s.Reachability + ", addrs " + strings.Join(s.Addrs, " ")
		}
		return ""
	})
	t.Logf("org formed, the laptop private behind NAT A, after %s", time.Since(t0).Round(time.Millisecond))

	moved := time.Now()
	to := o.w.move(home, office, "192.168.72.")
	lap.ip = to.ip
	t.Logf("the laptop moved to %s behind NAT B (%s on the internet)", to.ip, to.wan)
	natWait(t, ns, 3*time.Minute, "the laptop found again: connected to the relay and b, private with a relay address", func(sts []natStatus) string {
		var miss []string
		for _, n := range []*node{relay, b} {
			if sts[n.i].path(lap.id) == "" {
				miss = append(miss, n.name+" not connected to lap")
			}
		}
		if s := sts[lap.i]; s.Reachability != "private" || len(relaysOf(s, ns)) == 0 {
			miss = append(miss, "lap: "+s.Reachability+", addrs "+strings.Join(s.Addrs, " "))
		}
		return strings.Join(miss, "; ")
	})
	poll(t, 3*time.Minute, "a heartbeat from the laptop since the move at the relay, with a relay address", func() string {
		var m struct {
			Status        string   `json:"status"`
			LastHeartbeat string   `json:"last_heartbeat"`
			Addrs         []string `json:"addrs"`
		}
		if err := relay.json(30*time.Second, &m, "machine", "show", lap.id); err != nil {
			return err.Error()
		}
		at, _ := time.Parse(time.RFC3339, m.LastHeartbeat)
		if !at.After(moved.Add(time.Second)) || m.Status == "offline" || !strings.Contains(strings.Join(m.Addrs, " "), "/p2p-circuit") {
			return "lap " + m.Status + ", last heartbeat " + m.LastHeartbeat + ", addrs " + strings.Join(m.Addrs, " ")
		}
		return ""
	})
	sts, err := natSnapshot(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("found again %s after the move: relay->lap %s, b->lap %s, lap's relays %v", time.Since(moved).Round(time.Millisecond),
		sts[relay.i].path(lap.id), sts[b.i].path(lap.id), relaysOf(sts[lap.i], ns))

	job, ran := natJob(t, b, relay, ns, 36)
	for _, from := range []*node{relay, b} {
		natLogs(t, from, []*node{lap}, job, ran)
	}
	t.Logf("TestNATMove done after %s", time.Since(t0).Round(time.Millisecond))
}
