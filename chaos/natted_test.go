//go:build chaos

package chaos

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The nemesis's machine behind a NAT (issue 32): before the faults it must
// find itself private and hold a reservation on a relay of the org; while
// they run, pathCount samples how its peers are connected to it.

// relaysOf are the names of the nodes whose circuits st's addresses go
// through.
func relaysOf(st natStatus, ns []*node) []string {
	var out []string
	for _, a := range st.Addrs {
		before, _, ok := strings.Cut(a, "/p2p-circuit")
		if !ok {
			continue
		}
		for _, n := range ns {
			if strings.HasSuffix(before, "/p2p/"+n.id) && !slices.Contains(out, n.name) {
				out = append(out, n.name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// waitRelayed polls n until it says it is private and has a relay address
// through one of ns, and returns the relays' names; it fails the test
// after d.
func waitRelayed(t *testing.T, n *node, ns []*node, d time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		var st natStatus
		err := n.json(10*time.Second, &st, "node", "status")
		relays := relaysOf(st, ns)
		if err == nil && st.Reachability == "private" && len(relays) > 0 {
			return strings.Join(relays, ",")
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not private with a relay address within %s: reachability %q, addrs %v, err %v", n.name, d, st.Reachability, st.Addrs, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// pathCount samples, every 5 s, the node behind the NAT's connections.
type pathCount struct {
	n      *node
	relays string // at the start

	mu               sync.Mutex
	reads, failed    int
	direct, relayed  int
	withRelay, alone int // reads with a relay address; reads with no peer
}

func (p *pathCount) run(stop <-chan struct{}, ns []*node) {
	if p == nil {
		return
	}
	for {
		select {
		case <-stop:
			return
		case <-time.After(5 * time.Second):
		}
		var st natStatus
		err := p.n.json(5*time.Second, &st, "node", "status")
		p.mu.Lock()
		p.reads++
		switch {
		case err != nil:
			p.failed++
		case len(st.Connections) == 0:
			p.alone++
		}
		if err == nil {
			for _, c := range st.Connections {
				if c.Path == "relayed" {
					p.relayed++
				} else {
					p.direct++
				}
			}
			if len(relaysOf(st, ns)) > 0 {
				p.withRelay++
			}
		}
		p.mu.Unlock()
	}
}

func (p *pathCount) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return fmt.Sprintf("%s behind a NAT that drops what comes in unasked: private with relays on %s before the faults; %d samples of its status during them (%d unanswered: paused, killed or skewed), %d with a relay address, %d with no peer; its connections in them: %d direct (it dialled out, or a punch), %d relayed",
		p.n.name, p.relays, p.reads, p.failed, p.withRelay, p.alone, p.direct, p.relayed)
}
