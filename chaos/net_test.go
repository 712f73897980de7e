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

// netw is the nemesis's network: its nodes on an internet (chaosPub),
// one of them (natted, unless -1) behind a NAT router that drops what
// comes in unasked, so the others reach it only through a relay or a
// connection it opened.
type netw struct {
	*internet
	nodes  []site
	natted int
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

// setupNet creates the internet and n namespaces, node i at chaosPub+(i+1)
// or, for natted, behind a router at chaosPub+(11+natted); t.Cleanup
// removes them all.
func setupNet(t *testing.T, n, natted int) *netw {
	t.Helper()
	w := &netw{internet: setupInternet(t, chaosPub), natted: natted}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("n%d", i+1)
		if i == natted {
			w.nodes = append(w.nodes, w.behindNAT(name, i+1, false))
		} else {
			w.nodes = append(w.nodes, w.public(name, i+1))
		}
	}
	return w
}

// addr is node i's address on the internet (its router's, behind the NAT).
func (w *netw) addr(i int) string { return w.nodes[i].wan }

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
		if _, err := sh(rules, "ip", "netns", "exec", w.nodes[i].ns, "nft", "-f", "-"); err != nil {
			return err
		}
	}
	return nil
}

// heal removes every cut and brings every link up.
func (w *netw) heal() {
	for _, s := range w.nodes {
		_, _ = sh("", "ip", "netns", "exec", s.ns, "nft", "delete", "table", "inet", "chaos")
		_, _ = sh("", "ip", "link", "set", s.vhost, "up")
	}
}

// linkDown takes node i's veth (its router's) down on the bridge side.
func (w *netw) linkDown(i int) error {
	_, err := sh("", "ip", "link", "set", w.nodes[i].vhost, "down")
	return err
}
