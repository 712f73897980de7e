//go:build chaos

package chaos

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Names of the run's network objects carry the test process's pid, so two
// runs on one host never collide and a run that died without cleaning up
// is swept by the next (sweepStale).
const subnet = "10.77.0." // the bridge has no host address: nothing routes out

type netw struct {
	pid    int
	bridge string
	ns     []string // per node
	vhost  []string // host end of each node's veth pair
	vpeer  []string // the node's end, inside its namespace
	rule   []string // the host FORWARD rule letting the bridge forward
}

// sh runs a command and returns its combined output, or an error naming
// the command.
func sh(stdin string, args ...string) (string, error) {
	cmd := exec.Command(args[0], args[1:]...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// canNetns says why this host cannot run the nemesis, or "".
func canNetns() string {
	if os.Geteuid() != 0 {
		return "not root: network namespaces need root"
	}
	for _, tool := range []string{"ip", "nft", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			return tool + " is not installed"
		}
	}
	probe := fmt.Sprintf("chaos-%d-probe", os.Getpid())
	if _, err := sh("", "ip", "netns", "add", probe); err != nil {
		return "cannot create a network namespace: " + err.Error()
	}
	_, _ = sh("", "ip", "netns", "del", probe)
	return ""
}

var (
	staleNS     = regexp.MustCompile(`^chaos-(\d+)-`)
	staleBridge = regexp.MustCompile(`^ch(?:br|nb)(\d+)$`) // chaos's, TestNAT's
	staleRule   = regexp.MustCompile(`--comment "?chaos-(\d+)"?`)
)

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil || syscall.Kill(pid, 0) == syscall.EPERM }

// sweepStale removes the namespaces, bridges and FORWARD rules of earlier
// runs whose test process is gone.
func sweepStale(t *testing.T) {
	dead := func(re *regexp.Regexp, s string) bool {
		m := re.FindStringSubmatch(s)
		if m == nil {
			return false
		}
		pid, _ := strconv.Atoi(m[1])
		return pid != os.Getpid() && !alive(pid)
	}
	if out, err := sh("", "ip", "netns", "list"); err == nil {
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) > 0 && dead(staleNS, f[0]) {
				t.Logf("sweeping a stale namespace: %s", f[0])
				_, _ = sh("", "ip", "netns", "del", f[0])
			}
		}
	}
	if out, err := sh("", "ip", "-o", "link", "show", "type", "bridge"); err == nil {
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) > 1 {
				name := strings.TrimSuffix(f[1], ":")
				if dead(staleBridge, name) {
					t.Logf("sweeping a stale bridge: %s", name)
					_, _ = sh("", "ip", "link", "del", name)
				}
			}
		}
	}
	if out, err := sh("", "iptables", "-S", "FORWARD"); err == nil {
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "-A FORWARD") && dead(staleRule, l) {
				t.Logf("sweeping a stale FORWARD rule: %s", l)
				args := append([]string{"iptables", "-D"}, strings.Fields(strings.ReplaceAll(strings.TrimPrefix(l, "-A "), `"`, ""))...)
				_, _ = sh("", args...)
			}
		}
	}
}

// setupNet creates the bridge and n namespaces with an address each
// (subnet + 1..n); t.Cleanup removes them all.
func setupNet(t *testing.T, n int) *netw {
	t.Helper()
	sweepStale(t)
	w := &netw{pid: os.Getpid(), bridge: fmt.Sprintf("chbr%d", os.Getpid())}
	t.Cleanup(w.teardown)
	must := func(args ...string) {
		t.Helper()
		if _, err := sh("", args...); err != nil {
			t.Fatal(err)
		}
	}
	must("ip", "link", "add", w.bridge, "type", "bridge")
	must("ip", "link", "set", w.bridge, "up")
	// Docker sets FORWARD's policy to DROP, and br_netfilter sends bridged
	// frames through it: let this bridge forward to itself.
	w.rule = []string{"FORWARD", "-i", w.bridge, "-o", w.bridge, "-m", "comment", "--comment", fmt.Sprintf("chaos-%d", w.pid), "-j", "ACCEPT"}
	must(append([]string{"iptables", "-I"}, w.rule...)...)
	for i := 0; i < n; i++ {
		ns := fmt.Sprintf("chaos-%d-n%d", w.pid, i+1)
		vh, vp := fmt.Sprintf("chv%dn%d", w.pid, i+1), fmt.Sprintf("chp%dn%d", w.pid, i+1)
		w.ns, w.vhost, w.vpeer = append(w.ns, ns), append(w.vhost, vh), append(w.vpeer, vp)
		must("ip", "netns", "add", ns)
		must("ip", "link", "add", vh, "type", "veth", "peer", "name", vp)
		must("ip", "link", "set", vp, "netns", ns)
		must("ip", "link", "set", vh, "master", w.bridge)
		must("ip", "link", "set", vh, "up")
		must("ip", "-n", ns, "link", "set", "lo", "up")
		must("ip", "-n", ns, "addr", "add", w.addr(i)+"/24", "dev", vp)
		must("ip", "-n", ns, "link", "set", vp, "up")
	}
	return w
}

func (w *netw) addr(i int) string { return subnet + strconv.Itoa(i+1) }

func (w *netw) teardown() {
	for _, ns := range w.ns {
		_, _ = sh("", "ip", "netns", "del", ns) // takes its veth pair along
	}
	_, _ = sh("", "ip", "link", "del", w.bridge)
	if w.rule != nil {
		_, _ = sh("", append([]string{"iptables", "-D"}, w.rule...)...)
	}
}

// cut makes every pair (a, b) of blocked unable to reach each other: each
// namespace drops what comes from, or goes to, the nodes it is cut from.
// It replaces any earlier cut.
func (w *netw) cut(blocked map[int][]int) error {
	w.heal()
	for i, others := range blocked {
		if len(others) == 0 {
			continue
		}
		var ips []string
		for _, o := range others {
			ips = append(ips, w.addr(o))
		}
		set := strings.Join(ips, ", ")
		rules := fmt.Sprintf(`table inet chaos {
	chain in {
		type filter hook input priority 0; policy accept;
		ip saddr { %s } drop
	}
	chain out {
		type filter hook output priority 0; policy accept;
		ip daddr { %s } drop
	}
}
`, set, set)
		if _, err := sh(rules, "ip", "netns", "exec", w.ns[i], "nft", "-f", "-"); err != nil {
			return err
		}
	}
	return nil
}

// heal removes every cut and brings every link up.
func (w *netw) heal() {
	for i, ns := range w.ns {
		_, _ = sh("", "ip", "netns", "exec", ns, "nft", "delete", "table", "inet", "chaos")
		_, _ = sh("", "ip", "link", "set", w.vhost[i], "up")
	}
}

// linkDown takes node i's veth down on the bridge side.
func (w *netw) linkDown(i int) error {
	_, err := sh("", "ip", "link", "set", w.vhost[i], "down")
	return err
}
