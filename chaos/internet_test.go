//go:build chaos

package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"
)

// The "internet" of the nemesis and of TestNAT: a bridge with addresses
// libp2p takes for public (AutoNAT, relays and hole punching act only on
// public addresses) and no address on the host, so nothing routes to or
// from the real network. Machines sit on it in namespaces of their own
// (public) or behind a NAT router namespace (behindNAT). Names carry the
// test process's pid, so two runs on one host never collide and a run
// that died without cleaning up is swept by the next (sweepStale).

// natPub is TestNAT's internet; chaosPub the nemesis's.
const (
	natPub   = "11.77.0."
	chaosPub = "11.78.0."
)

// relayName is the relay's name (pub+"1") in /etc/hosts of the machines
// behind a NAT.
const relayName = "relay.nat.example"

type internet struct {
	pid    int
	pub    string // the address prefix, natPub or chaosPub
	bridge string
	rule   []string // the host FORWARD rule letting the bridge forward
	ns     []string // every namespace made
	vhost  []string // every host end of a veth on the bridge
	etc    []string // /etc/netns/<ns> dirs made
	n      int
}

// site is where a machine is: its namespace and address there, its address
// on the internet and the host end of the veth that connects it (its
// router's, behind a NAT).
type site struct {
	ns, ip string
	wan    string
	vhost  string
	router string // the router's namespace, "" for a public machine
}

// setupInternet creates the bridge of an internet of addresses pub+N; t.Cleanup
// removes it with every namespace made on it.
func setupInternet(t *testing.T, pub string) *internet {
	t.Helper()
	sweepStale(t)
	sweepStaleEtc(t)
	w := &internet{pid: os.Getpid(), pub: pub, bridge: fmt.Sprintf("chbr%d", os.Getpid())}
	t.Cleanup(w.teardown)
	w.must(t, "ip", "link", "add", w.bridge, "type", "bridge")
	w.must(t, "ip", "link", "set", w.bridge, "up")
	// Docker sets FORWARD's policy to DROP, and br_netfilter sends bridged
	// frames through it: let this bridge forward to itself.
	w.rule = []string{"FORWARD", "-i", w.bridge, "-o", w.bridge, "-m", "comment", "--comment", fmt.Sprintf("chaos-%d", w.pid), "-j", "ACCEPT"}
	w.must(t, append([]string{"iptables", "-I"}, w.rule...)...)
	return w
}

func (w *internet) must(t *testing.T, args ...string) {
	t.Helper()
	if _, err := sh("", args...); err != nil {
		t.Fatal(err)
	}
}

// run runs setup steps, recording the namespaces they add for teardown.
func (w *internet) run(steps [][]string) {
	for _, args := range steps {
		if args[1] == "netns" && args[2] == "add" {
			w.ns = append(w.ns, args[3])
		}
		if _, err := sh("", args...); err != nil {
			panic(err) // setup of a root-only test: fail loudly
		}
	}
}

// public makes namespace name on the internet at pub+host.
func (w *internet) public(name string, host int) site {
	ns := fmt.Sprintf("chaos-%d-%s", w.pid, name)
	w.n++
	vh, vp := fmt.Sprintf("cnv%d%c", w.pid, 'a'+w.n), fmt.Sprintf("cnp%d%c", w.pid, 'a'+w.n)
	ip := w.pub + strconv.Itoa(host)
	w.vhost = append(w.vhost, vh)
	w.run([][]string{
		{"ip", "netns", "add", ns},
		{"ip", "link", "add", vh, "type", "veth", "peer", "name", vp},
		{"ip", "link", "set", vp, "netns", ns},
		{"ip", "-n", ns, "link", "set", vp, "name", "wan"},
		{"ip", "link", "set", vh, "master", w.bridge},
		{"ip", "link", "set", vh, "up"},
		{"ip", "-n", ns, "link", "set", "lo", "up"},
		{"ip", "-n", ns, "addr", "add", ip + "/24", "dev", "wan"},
		{"ip", "-n", ns, "link", "set", "wan", "up"},
	})
	return site{ns: ns, ip: ip, wan: ip, vhost: vh}
}

// behindNAT makes a machine's namespace behind router k (a namespace on
// the internet at pub+10+k, masquerading what leaves by its wan), on LAN
// 192.168.(60+k).0/24. randomFully makes the router map each destination
// to a new random port. The router drops what comes in unasked, as home
// routers do.
func (w *internet) behindNAT(name string, k int, randomFully bool) site {
	r := w.public("r"+name, 10+k)
	masq := []string{"ip", "netns", "exec", r.ns, "iptables", "-t", "nat", "-A", "POSTROUTING", "-o", "wan", "-j", "MASQUERADE"}
	if randomFully {
		masq = append(masq, "--random-fully")
	}
	in := func(chain string) [][]string {
		x := []string{"ip", "netns", "exec", r.ns, "iptables", "-A", chain, "-i", "wan"}
		return [][]string{
			append(slices.Clone(x), "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "ACCEPT"),
			append(slices.Clone(x), "-j", "DROP"),
		}
	}
	steps := [][]string{{"ip", "netns", "exec", r.ns, "sysctl", "-qw", "net.ipv4.ip_forward=1"}, masq}
	steps = append(steps, in("INPUT")...)
	w.run(append(steps, in("FORWARD")...))
	ns := fmt.Sprintf("chaos-%d-%s", w.pid, name)
	w.run([][]string{{"ip", "netns", "add", ns}})
	ip := w.plug(ns, r.ns, "lan", fmt.Sprintf("192.168.%d.", 60+k))
	// The relay by name: ip netns exec mounts /etc/netns/<ns>/hosts on
	// /etc/hosts.
	dir := filepath.Join("/etc/netns", ns)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		panic(err)
	}
	w.etc = append(w.etc, dir)
	hosts := "127.0.0.1 localhost\n" + w.pub + "1 " + relayName + "\n"
	if err := os.WriteFile(filepath.Join(dir, "hosts"), []byte(hosts), 0o644); err != nil {
		panic(err)
	}
	return site{ns: ns, ip: ip, wan: r.wan, vhost: r.vhost, router: r.ns}
}

// plug connects machine namespace ns to router namespace router by a veth,
// dev on the router's side and eth0 on the machine's, on LAN lan+"0/24"
// (the router lan+"1", the machine lan+"2", its default route); it
// returns the machine's address.
func (w *internet) plug(ns, router, dev, lan string) string {
	w.run([][]string{
		{"ip", "link", "add", dev, "netns", router, "type", "veth", "peer", "name", "eth0", "netns", ns},
		{"ip", "-n", router, "addr", "add", lan + "1/24", "dev", dev},
		{"ip", "-n", router, "link", "set", dev, "up"},
		{"ip", "-n", ns, "link", "set", "lo", "up"},
		{"ip", "-n", ns, "addr", "add", lan + "2/24", "dev", "eth0"},
		{"ip", "-n", ns, "link", "set", "eth0", "up"},
		{"ip", "-n", ns, "route", "add", "default", "via", lan + "1"},
	})
	return lan + "2"
}

// move unplugs machine s from its router and plugs it into to's router,
// on LAN lan (a laptop carried to another network: the processes in its
// namespace keep running, its address changes); it returns the new site.
func (w *internet) move(s site, to site, lan string) site {
	w.run([][]string{{"ip", "-n", s.ns, "link", "del", "eth0"}}) // takes the router's end along
	ip := w.plug(s.ns, to.router, "lan2", lan)
	return site{ns: s.ns, ip: ip, wan: to.wan, vhost: to.vhost, router: to.router}
}

func (w *internet) teardown() {
	for _, ns := range w.ns {
		_, _ = sh("", "ip", "netns", "del", ns)
	}
	for _, vh := range w.vhost {
		_, _ = sh("", "ip", "link", "del", vh)
	}
	_, _ = sh("", "ip", "link", "del", w.bridge)
	if w.rule != nil {
		_, _ = sh("", append([]string{"iptables", "-D"}, w.rule...)...)
	}
	for _, d := range w.etc {
		_ = os.RemoveAll(d)
	}
}

var staleEtc = regexp.MustCompile(`^chaos-(\d+)-`)

// sweepStaleEtc removes the /etc/netns dirs of earlier runs whose test
// process is gone.
func sweepStaleEtc(t *testing.T) {
	ents, _ := os.ReadDir("/etc/netns")
	for _, e := range ents {
		m := staleEtc.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		if pid, _ := strconv.Atoi(m[1]); pid != os.Getpid() && !alive(pid) {
			t.Logf("sweeping a stale /etc/netns/%s", e.Name())
			_ = os.RemoveAll(filepath.Join("/etc/netns", e.Name()))
		}
	}
}
