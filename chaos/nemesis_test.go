//go:build chaos

package chaos

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"time"
)

// Fault kinds.
const (
	faultHalves   = "partition-halves"   // 2 nodes | 3 nodes (nftables drops in each namespace)
	faultSingle   = "partition-single"   // 1 node | 4 nodes (nftables)
	faultBridge   = "partition-bridge"   // 2 | 1 | 2: the middle node sees both sides, the sides not each other
	faultLinkDown = "partition-linkdown" // 1 node's veth down on the bridge
	faultKill     = "kill9-restart"      // SIGKILL, 0-2s down, start again
	faultPause    = "pause"              // SIGSTOP, 2-12s, SIGCONT
	faultSkew     = "clock-skew"         // restart with FAKETIME ±60..300s for 15-40s, then restart without
	// faultTerm is only injected when CHAOS_FAULTS names it: the skew's
	// SIGTERM restart without the skew, to tell the two apart.
	faultTerm = "sigterm-restart"
	// stallSeen is not injected: a node's own log says it was not running
	// for a while (the host starved it of CPU), a pause all the same.
	stallSeen = "stall-seen-by-node"
)

var faultKinds = []string{faultHalves, faultSingle, faultBridge, faultLinkDown, faultKill, faultPause, faultSkew}

// fault is one fault the nemesis injected, and when.
type fault struct {
	kind       string
	nodes      []int // the nodes it acted on (every node, for a partition)
	detail     string
	start, end time.Time
}

func (f *fault) partition() bool {
	return f.kind == faultHalves || f.kind == faultSingle || f.kind == faultBridge || f.kind == faultLinkDown
}

// nemesis injects a fault every 2-5s while the network (one partition at
// a time) or a node (one process fault at a time) is free.
type nemesis struct {
	w   *netw
	ns  []*node
	rng *rand.Rand

	kinds    []string
	mu       sync.Mutex
	faults   []*fault
	netBusy  bool
	nodeBusy []bool
	errs     []string
	wg       sync.WaitGroup
}

// newNemesis returns a nemesis that injects the faults of kinds (all when
// empty).
func newNemesis(w *netw, ns []*node, seed uint64, kinds []string) *nemesis {
	if len(kinds) == 0 {
		kinds = faultKinds
	}
	return &nemesis{w: w, ns: ns, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), nodeBusy: make([]bool, len(ns)), kinds: kinds}
}

// between is a random duration in [a, b).
func (m *nemesis) between(a, b time.Duration) time.Duration {
	return a + time.Duration(m.rng.Int64N(int64(b-a)))
}

// run injects faults until stop is closed, then waits for every fault to
// heal (they heal at once when stop closes).
func (m *nemesis) run(stop <-chan struct{}) {
	for {
		m.mu.Lock()
		wait := m.between(2*time.Second, 5*time.Second)
		m.mu.Unlock()
		select {
		case <-stop:
			m.wg.Wait()
			return
		case <-time.After(wait):
		}
		m.inject(stop)
	}
}

func (m *nemesis) inject(stop <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	kind := m.kinds[m.rng.IntN(len(m.kinds))]
	perm := m.rng.Perm(len(m.ns))
	f := &fault{kind: kind}
	hold := m.between(5*time.Second, 20*time.Second)
	if f.partition() {
		if m.netBusy {
			return
		}
		m.netBusy = true
		for i := range m.ns {
			f.nodes = append(f.nodes, i)
		}
		m.wg.Add(1)
		go m.partition(f, perm, hold, stop)
		return
	}
	victim := perm[0]
	if m.nodeBusy[victim] {
		return
	}
	m.nodeBusy[victim] = true
	f.nodes = []int{victim}
	n := m.ns[victim] // read under m.mu: a node that joins appends to m.ns
	var act func()
	switch kind {
	case faultKill:
		down := m.between(0, 2*time.Second)
		f.detail = fmt.Sprintf("n%d down %s", victim+1, down.Round(time.Millisecond))
		act = func() {
			if err := n.restart(down, n.currentSkew()); err != nil {
				m.errorf("%s: %v", kind, err)
			}
		}
	case faultPause:
		hold = m.between(2*time.Second, 12*time.Second)
		f.detail = fmt.Sprintf("n%d for %s", victim+1, hold.Round(time.Millisecond))
		act = func() {
			if err := n.signal(syscall.SIGSTOP); err != nil {
				m.errorf("%s: %v", kind, err)
				return
			}
			sleepOrStop(hold, stop)
			if err := n.signal(syscall.SIGCONT); err != nil {
				m.errorf("%s: %v", kind, err)
			}
		}
	case faultTerm:
		f.detail = fmt.Sprintf("n%d", victim+1)
		act = func() {
			skew := n.currentSkew()
			n.stopGracefully()
			if err := n.start(skew); err != nil {
				m.errorf("%s: %v", kind, err)
			}
		}
	case faultSkew:
		secs := 60 + m.rng.IntN(241)
		if m.rng.IntN(2) == 0 {
			secs = -secs
		}
		skew := fmt.Sprintf("%+d", secs)
		hold = m.between(15*time.Second, 40*time.Second)
		f.detail = fmt.Sprintf("n%d FAKETIME=%s for %s", victim+1, skew, hold.Round(time.Millisecond))
		act = func() {
			n.stopGracefully()
			if err := n.start(skew); err != nil {
				m.errorf("%s: %v", kind, err)
				return
			}
			sleepOrStop(hold, stop)
			n.stopGracefully()
			if err := n.start(""); err != nil {
				m.errorf("%s: %v", kind, err)
			}
		}
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.record(f)
		act()
		m.mu.Lock()
		f.end = time.Now()
		m.nodeBusy[victim] = false
		m.mu.Unlock()
	}()
}

// partition cuts the network as f.kind says for hold (or until stop), then
// heals it.
func (m *nemesis) partition(f *fault, perm []int, hold time.Duration, stop <-chan struct{}) {
	defer m.wg.Done()
	blocked := map[int][]int{}
	cutSides := func(a, b []int) {
		for _, x := range a {
			blocked[x] = append(blocked[x], b...)
		}
		for _, x := range b {
			blocked[x] = append(blocked[x], a...)
		}
	}
	var err error
	switch f.kind {
	case faultHalves:
		cutSides(perm[:2], perm[2:])
		f.detail = fmt.Sprintf("%s | %s", names(perm[:2]), names(perm[2:]))
	case faultSingle:
		cutSides(perm[:1], perm[1:])
		f.detail = fmt.Sprintf("%s | %s", names(perm[:1]), names(perm[1:]))
	case faultBridge:
		cutSides(perm[:2], perm[3:])
		f.detail = fmt.Sprintf("%s | %s | %s (the middle one sees both)", names(perm[:2]), names(perm[2:3]), names(perm[3:]))
	}
	f.detail += fmt.Sprintf(" for %s", hold.Round(time.Millisecond))
	m.record(f)
	if f.kind == faultLinkDown {
		f.detail = fmt.Sprintf("%s link down for %s", names(perm[:1]), hold.Round(time.Millisecond))
		err = m.w.linkDown(perm[0])
	} else {
		err = m.w.cut(blocked)
	}
	if err != nil {
		m.errorf("%s: %v", f.kind, err)
	}
	sleepOrStop(hold, stop)
	m.w.heal()
	m.mu.Lock()
	f.end = time.Now()
	m.netBusy = false
	m.mu.Unlock()
}

func (m *nemesis) record(f *fault) {
	m.mu.Lock()
	f.start = time.Now()
	m.faults = append(m.faults, f)
	m.mu.Unlock()
}

func (m *nemesis) errorf(format string, a ...any) {
	m.mu.Lock()
	m.errs = append(m.errs, fmt.Sprintf(format, a...))
	m.mu.Unlock()
}

func (n *node) currentSkew() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.skew
}

func names(is []int) string {
	s := ""
	for k, i := range is {
		if k > 0 {
			s += ","
		}
		s += fmt.Sprintf("n%d", i+1)
	}
	return s
}

// sleepOrStop sleeps d, or less if stop closes.
func sleepOrStop(d time.Duration, stop <-chan struct{}) {
	select {
	case <-time.After(d):
	case <-stop:
	}
}
