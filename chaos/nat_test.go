//go:build chaos

package chaos

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/client"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/cshare/cshare/ledger"
)

// TestNAT (`make nat`, issue 32) builds, in network namespaces, an
// "internet" (a bridge with public-looking addresses of its own, natPub,
// reaching nothing outside) with a relay machine on it, and three private
// machines each behind its own NAT router namespace: a and b behind
// endpoint-independent NATs (iptables MASQUERADE, which keeps the port),
// c behind a NAT that maps every destination to a new random port
// (--random-fully), where hole punching cannot work. Each router drops what
// comes in unasked, as home routers do. The private machines know the relay
// only by a name (/dns4/relay.nat.example, from /etc/netns/*/hosts): they
// start with --bootstrap to it, and join with an org key whose only address
// is that name. It checks that the four form one org with one state hash,
// that the relay finds itself public and relays, and the others private;
// that a and b end up connected directly (hole punching) while c stays
// relayed; that a job runs items on every machine and c's item output is
// read from a; that a dataset added behind one NAT is fetched behind the
// others; and that a stranger gets no reservation from the relay and no
// relayed connection through it.
//
// NAT_ATTEMPTS=N (`make nat-bench`) then restarts b N times on a fresh port
// and reports how many of the attempts ended direct and the time from
// relayed to direct (p50, p90): a figure, not an assertion.
func TestNAT(t *testing.T) {
	skipNAT(t)
	attempts := 0
	if s := os.Getenv("NAT_ATTEMPTS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 {
			t.Fatalf("NAT_ATTEMPTS: %q is not a count", s)
		}
		attempts = v
	}
	t0 := time.Now()
	o := newNATOrg(t)
	stranger := o.w.public("stranger", 50)
	as, bs, cs := o.w.behindNAT("a", 1, false), o.w.behindNAT("b", 2, false), o.w.behindNAT("c", 3, true)
	relay := o.relay
	a := o.add(t, "a", as, as.ip, "--bootstrap", o.byName)
	b := o.add(t, "b", bs, bs.ip, "--bootstrap", o.byName)
	c := o.add(t, "c", cs, cs.ip, "--bootstrap", o.byName)
	ns := o.all
	for _, n := range ns[1:] {
		o.join(t, n)
	}
	for _, n := range ns {
		t.Logf("%s = machine %s at %s", n.name, n.id, n.ip)
	}
	const d = 30 * time.Second

	// One org, one state; each machine connected to the three others.
	natWait(t, ns, 60*time.Second, "one org with one state hash, every machine connected to the others", func(sts []natStatus) string {
		for i, s := range sts {
			if s.StateHash == "" || s.StateHash != sts[0].StateHash || len(s.Connections) < 3 {
				return fmt.Sprintf("%s: state %.10s, %d connections", ns[i].name, s.StateHash, len(s.Connections))
			}
		}
		return ""
	})
	t.Logf("one org, one state, all connected after %s", time.Since(t0).Round(time.Millisecond))
	natWait(t, ns, 60*time.Second, "the relay public and relaying, the others private", func(sts []natStatus) string {
		if !sts[0].RelayServing || sts[0].Reachability != "public" {
			return fmt.Sprintf("relay: %s, serving %v", sts[0].Reachability, sts[0].RelayServing)
		}
		for i, s := range sts[1:] {
			if s.Reachability != "private" {
				return fmt.Sprintf("%s: %s", ns[i+1].name, s.Reachability)
			}
		}
		return ""
	})
	natWait(t, ns, 60*time.Second, "a and b direct (hole punched), c relayed to both", func(sts []natStatus) string {
		var miss []string
		for _, want := range []struct {
			from, to *node
			path     string
		}{{a, b, "direct"}, {b, a, "direct"}, {c, a, "relayed"}, {c, b, "relayed"}, {a, c, "relayed"}} {
			if got := sts[want.from.i].path(want.to.id); got != want.path {
				miss = append(miss, fmt.Sprintf("%s->%s %s", want.from.name, want.to.name, orDash(got)))
			}
		}
		return strings.Join(miss, ", ")
	})
	t.Logf("a-b direct, c relayed, after %s", time.Since(t0).Round(time.Millisecond))

	// A job runs items on every machine; c's output is read from a.
	job, ran := natJob(t, a, b, ns, 48)
	for _, from := range []*node{a, c} {
		natLogs(t, from, []*node{c, b}, job, ran)
	}

	// A dataset added behind a's NAT is fetched behind b's and c's.
	data := filepath.Join(o.base, "data.bin")
	blob := bytes.Repeat([]byte("cshare across NATs\n"), 200_000) // 3.8 MB, 15 blocks
	if err := os.WriteFile(data, blob, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := a.cli(d, "dataset", "add", data, "--name", "behind-a"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*node{b, c} {
		dst := filepath.Join(o.base, "got-"+n.name)
		got, err := n.cli(60*time.Second, "dataset", "get", "behind-a", "--out", dst)
		if err != nil {
			t.Fatalf("%s: %v", n.name, err)
		}
		back, err := os.ReadFile(dst)
		if err != nil || !bytes.Equal(back, blob) {
			t.Fatalf("%s fetched %d bytes (%v), want the %d added behind a", n.name, len(back), err, len(blob))
		}
		t.Logf("%s: %s", n.name, strings.TrimSpace(got))
		if relayed := strings.Contains(got, "fetched partly through a relay"); relayed != (n == c) {
			t.Errorf("%s's dataset get says it went through a relay: %v, want %v", n.name, relayed, n == c)
		}
	}

	// A stranger gets no reservation and no relayed connection.
	probe := strangerProbe(t, stranger.ns, relay, relay.ip, a.id)
	for _, what := range []string{"reserve", "relayed"} {
		if !strings.Contains(probe, what+": refused") {
			t.Errorf("stranger %s: want refused; probe said:\n%s", what, probe)
		}
	}
	sts, err := natSnapshot(ns)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*node{a, b} {
		if got := sts[c.i].path(p.id); got != "relayed" {
			t.Errorf("c's path to %s at the end: %s, want relayed", p.name, orDash(got))
		}
	}
	if got := sts[a.i].path(b.id); got != "direct" {
		t.Errorf("a's path to b at the end: %s, want direct", orDash(got))
	}
	t.Logf("TestNAT checks done after %s", time.Since(t0).Round(time.Millisecond))

	if attempts > 0 {
		natBench(t, ns, a, b, attempts)
	}
}

// natBench restarts b attempts times, each time on a new port (fresh NAT
// mappings on both routers), and reports how often a's path to b ended
// direct and how long it was relayed first.
func natBench(t *testing.T, ns []*node, a, b *node, attempts int) {
	var took []time.Duration
	ok := 0
	for k := 0; k < attempts; k++ {
		port := 4101 + k
		b.listen = []string{fmt.Sprintf("/ip4/%s/tcp/%d", b.ip, port), fmt.Sprintf("/ip4/%s/udp/%d/quic-v1", b.ip, port)}
		if err := b.restart(0, ""); err != nil {
			t.Fatal(err)
		}
		var relayedAt time.Time
		deadline := time.Now().Add(45 * time.Second)
		path := ""
		for time.Now().Before(deadline) {
			var st natStatus
			if err := a.json(5*time.Second, &st, "node", "status"); err == nil {
				path = st.path(b.id)
				// The first connection after the restart must be the
				// relayed one: an old direct one is gone with b's
				// process (its sockets closed at once).
				if path == "relayed" && relayedAt.IsZero() {
					relayedAt = time.Now()
				}
				if path == "direct" && !relayedAt.IsZero() {
					break
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		switch {
		case path == "direct" && !relayedAt.IsZero():
			ok++
			took = append(took, time.Since(relayedAt))
			t.Logf("attempt %d: direct %s after relayed", k+1, time.Since(relayedAt).Round(time.Millisecond))
		default:
			t.Logf("attempt %d: %s after 45s (relayed seen: %v)", k+1, orDash(path), !relayedAt.IsZero())
		}
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	q := func(p float64) time.Duration {
		if len(took) == 0 {
			return 0
		}
		return took[min(len(took)-1, int(p*float64(len(took))))]
	}
	t.Logf("hole punching a<->b: %d of %d fresh attempts direct; relayed->direct p50 %s, p90 %s",
		ok, attempts, q(0.5).Round(time.Millisecond), q(0.9).Round(time.Millisecond))
}

// natJob submits a job of items items through from, with two instances a
// machine of ns, waits until watcher says it is done and checks that items
// ran on every machine; ran is an item run on each machine, by machine ID.
func natJob(t *testing.T, from, watcher *node, ns []*node, items int) (job string, ran map[string]int64) {
	t.Helper()
	const d = 30 * time.Second
	cpus := fmt.Sprint(2 * len(ns))
	out, err := from.cli(d, "job", "submit", "--driver", "exec", "--cpus", cpus, "--max-cpus", cpus, "--name", "nat", "--range", fmt.Sprintf("1-%d", items),
		"--", "sh", "-c", "sleep 0.4; echo item $CSHARE_ITEM ran on $CSHARE_MACHINE")
	if err != nil {
		t.Fatal(err)
	}
	job = lastLine(out)
	deadline := time.Now().Add(60 * time.Second)
	for {
		var j struct {
			State string `json:"state"`
		}
		if err := watcher.json(d, &j, "job", "show", job); err == nil && j.State == "done" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s not done within 60s (state %q)", job, j.State)
		}
		time.Sleep(200 * time.Millisecond)
	}
	var its []natItem
	if err := watcher.json(d, &its, "job", "items", job); err != nil {
		t.Fatal(err)
	}
	ran = map[string]int64{}
	names := map[string]string{}
	for _, it := range its {
		ran[it.Machine] = it.Item
	}
	for _, n := range ns {
		names[n.id] = n.name
	}
	for _, n := range ns {
		if _, ok := ran[n.id]; !ok {
			t.Errorf("no item of the job ran on %s (items ran on %v)", n.name, machineNames(ran, names))
		}
	}
	return job, ran
}

// natLogs checks that from reads the output of an item of job run on each
// of on (but itself).
func natLogs(t *testing.T, from *node, on []*node, job string, ran map[string]int64) {
	t.Helper()
	for _, m := range on {
		item, ok := ran[m.id]
		if !ok || from == m {
			continue
		}
		got, err := from.cli(30*time.Second, "job", "logs", job, "--item", fmt.Sprint(item))
		if want := fmt.Sprintf("item %d ran on %s", item, m.id); err != nil || !strings.Contains(got, want) {
			t.Errorf("%s reading the output of item %d, run on %s: %q, %v", from.name, item, m.name, got, err)
		}
	}
}

// skipNAT skips a NAT test where network namespaces cannot be made, and
// in the stranger probe's process.
func skipNAT(t *testing.T) {
	t.Helper()
	if os.Getenv(strangerEnv) != "" {
		t.Skip("the stranger probe runs as TestNATStranger")
	}
	if why := canNetns(); why != "" {
		t.Skipf("nat: skipped: %s", why)
	}
}

// natOrg is an org of a relay machine on an internet (natPub) and
// machines behind NATs, as TestNAT and TestNATMove build it: the machines
// know the relay only by a name (/dns4/relay.nat.example, from
// /etc/netns/*/hosts) and join with an org key whose only address is that
// name.
type natOrg struct {
	w         *internet
	bin, base string
	conf      string
	all       []*node
	relay     *node
	byName    string // the relay's /dns4 address
	key       string
}

// newNATOrg makes the internet, starts the relay machine on it and creates
// the org there; t.Cleanup stops every node added and keeps their logs if
// the test failed (or NAT_LOGS is set).
func newNATOrg(t *testing.T) *natOrg {
	t.Helper()
	o := &natOrg{bin: cshareBin(t), w: setupInternet(t, natPub), base: t.TempDir()}
	o.conf = filepath.Join(o.base, "node.yaml")
	if err := os.WriteFile(o.conf, []byte("runtime: {exec: true, docker: false}\nresources: {max_concurrent_jobs: 2}\ndiscovery: {mdns: false}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, n := range o.all {
			n.stopGracefully()
		}
		if t.Failed() || os.Getenv("NAT_LOGS") != "" {
			keepNATLogs(t, o.all)
		}
	})
	rs := o.w.public("relay", 1)
	o.relay = o.add(t, "relay", rs, rs.ip)
	out, err := o.relay.cli(30*time.Second, "org", "create", "--name", "nat")
	if err != nil {
		t.Fatal(err)
	}
	var st natStatus
	if err := o.relay.json(30*time.Second, &st, "node", "status"); err != nil {
		t.Fatal(err)
	}
	o.relay.id = st.ID
	o.byName = "/dns4/" + relayName + "/tcp/4001/p2p/" + o.relay.id
	o.key = keyWithAddrs(t, lastLine(out), o.byName)
	return o
}

// add starts machine name at s, listening on TCP and QUIC port 4001 of ip
// (s.ip, or 0.0.0.0 for every address it will ever have).
func (o *natOrg) add(t *testing.T, name string, s site, ip string, extra ...string) *node {
	t.Helper()
	n := &node{i: len(o.all), name: name, ns: s.ns, ip: s.ip, bin: o.bin, hb: time.Second, dir: filepath.Join(o.base, name), conf: o.conf,
		listen: []string{"/ip4/" + ip + "/tcp/4001", "/ip4/" + ip + "/udp/4001/quic-v1"}, extra: extra}
	n.logPath = n.dir + ".log"
	if err := os.MkdirAll(n.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	o.all = append(o.all, n)
	if err := n.start(""); err != nil {
		t.Fatal(err)
	}
	return n
}

// join joins n to the org with the key; the relay approves it and makes
// its person an admin.
func (o *natOrg) join(t *testing.T, n *node) {
	t.Helper()
	if err := admit(o.relay, n, o.key); err != nil {
		t.Fatal(err)
	}
}

// keyWithAddrs is org key key with addrs as its only bootstrap addresses
// (a key's addresses are not signed: they only say where to knock).
func keyWithAddrs(t *testing.T, key string, addrs ...string) string {
	t.Helper()
	tok, err := ledger.ParseToken(key)
	if err != nil {
		t.Fatal(err)
	}
	tok.Addrs = addrs
	return tok.Encode()
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// natStatus is what TestNAT reads of node status --json.
type natStatus struct {
	ID           string   `json:"id"`
	Person       string   `json:"person"`
	StateHash    string   `json:"state_hash"`
	Reachability string   `json:"reachability"`
	RelayServing bool     `json:"relay_serving"`
	Addrs        []string `json:"addrs"`
	Connections  []struct {
		Machine string `json:"machine"`
		Path    string `json:"path"`
		Addr    string `json:"addr"`
	} `json:"connections"`
}

// path is the path to machine id, "" when not connected.
func (s natStatus) path(id string) string {
	for _, c := range s.Connections {
		if c.Machine == id {
			return c.Path
		}
	}
	return ""
}

type natItem struct {
	Item    int64  `json:"item"`
	Machine string `json:"machine"`
}

func machineNames(ran map[string]int64, names map[string]string) []string {
	var out []string
	for id := range ran {
		out = append(out, names[id])
	}
	sort.Strings(out)
	return out
}

func natSnapshot(ns []*node) ([]natStatus, error) { return statuses[natStatus](ns) }

// natWait polls every node's status until cond says "" (what is missing
// otherwise), or fails the test after d.
func natWait(t *testing.T, ns []*node, d time.Duration, what string, cond func([]natStatus) string) {
	t.Helper()
	poll(t, d, what, func() string {
		sts, err := natSnapshot(ns)
		if err != nil {
			return err.Error()
		}
		return cond(sts)
	})
}

// poll calls cond until it says "" (what is missing otherwise), or fails
// the test after d; every 10 s it logs what is still missing.
func poll(t *testing.T, d time.Duration, what string, cond func() string) {
	t.Helper()
	t0 := time.Now()
	deadline, logged := t0.Add(d), t0
	for {
		last := cond()
		if last == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s: %s", what, d, last)
		}
		if time.Since(logged) >= 10*time.Second {
			logged = time.Now()
			t.Logf("waiting %s for %s: %s", time.Since(t0).Round(time.Second), what, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// keepNATLogs copies the nodes' logs where a failed run (or any, with
// NAT_LOGS=DIR) can be read.
func keepNATLogs(t *testing.T, ns []*node) {
	dir := os.Getenv("NAT_LOGS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), fmt.Sprintf("cshare-nat-%d", os.Getpid()))
	}
	_ = os.MkdirAll(dir, 0o755)
	for _, n := range ns {
		if b, err := os.ReadFile(n.logPath); err == nil {
			_ = os.WriteFile(filepath.Join(dir, n.name+".log"), b, 0o644)
		}
	}
	t.Logf("node logs kept in %s", dir)
}

// The stranger probe: the test binary run again inside the stranger's
// namespace (TestNATStranger), as a plain libp2p host that is no machine
// of the org.
const strangerEnv = "CSHARE_NAT_STRANGER" // relay multiaddr with /p2p/, a space, the target machine ID

func strangerProbe(t *testing.T, ns string, relay *node, relayIP, target string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", ns, os.Args[0], "-test.run", "^TestNATStranger$", "-test.v")
	cmd.Env = append(os.Environ(), strangerEnv+"=/ip4/"+relayIP+"/tcp/4001/p2p/"+relay.id+" "+target)
	out, _ := cmd.CombinedOutput()
	return string(out)
}

// TestNATStranger is the stranger's side of TestNAT; it runs only when
// TestNAT starts it (strangerEnv). It says "reserve: refused" when the
// relay gave it no reservation, and "relayed: refused" when it could not
// reach the target machine through the relay.
func TestNATStranger(t *testing.T) {
	spec := os.Getenv(strangerEnv)
	if spec == "" {
		t.Skip("run by TestNAT")
	}
	relayAddr, target, _ := strings.Cut(spec, " ")
	rinfo, err := peer.AddrInfoFromString(relayAddr)
	if err != nil {
		t.Fatal(err)
	}
	tid, err := peer.Decode(target)
	if err != nil {
		t.Fatal(err)
	}
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/0.0.0.0/tcp/0"), libp2p.EnableRelay(), libp2p.DisableMetrics())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.Connect(ctx, *rinfo); err != nil {
		t.Fatalf("stranger: cannot reach the relay at all: %v", err)
	}
	if _, err := client.Reserve(ctx, h, *rinfo); err != nil {
		fmt.Printf("reserve: refused (%v)\n", err)
	} else {
		fmt.Println("reserve: granted")
	}
	circuit, err := ma.NewMultiaddr(relayAddr + "/p2p-circuit")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Connect(network.WithAllowLimitedConn(ctx, "probe"), peer.AddrInfo{ID: tid, Addrs: []ma.Multiaddr{circuit}}); err != nil {
		fmt.Printf("relayed: refused (%v)\n", err)
	} else {
		fmt.Println("relayed: connected")
	}
}
