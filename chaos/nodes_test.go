//go:build chaos

package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// cshareBin returns the binary under test: $CSHARE_BIN, else one built into
// a temp dir.
func cshareBin(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("CSHARE_BIN"); b != "" {
		abs, err := filepath.Abs(b)
		if err != nil {
			t.Fatal(err)
		}
		return abs
	}
	bin := filepath.Join(t.TempDir(), "cshare")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/cshare").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// node is one node process in its namespace.
type node struct {
	i       int
	name    string
	ns, ip  string
	bin     string
	dir     string
	conf    string
	logPath string
	hb      time.Duration
	id      string   // machine ID, known after start
	listen  []string // --listen, default TCP on ip port 4001
	extra   []string // more flags of node run

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{} // closed when the process has been waited for
	paused bool
	skew   string // FAKETIME of the running process, "" for none
}

func (n *node) args() []string {
	listen := n.listen
	if len(listen) == 0 {
		listen = []string{"/ip4/" + n.ip + "/tcp/4001"}
	}
	args := []string{"netns", "exec", n.ns, n.bin, "node", "run", "--data-dir", n.dir, "--api", "127.0.0.1:0",
		"--heartbeat-interval", n.hb.String(), "--config", n.conf, "--name", n.name, "--log-level", "info"}
	for _, l := range listen {
		args = append(args, "--listen", l)
	}
	return append(args, n.extra...)
}

// start starts the process with the FAKETIME skew and waits for its API.
// `ip netns exec` execs the binary in place: the pid is the node's.
func (n *node) start(skew string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.startLocked(skew)
}

func (n *node) startLocked(skew string) error {
	_ = os.Remove(filepath.Join(n.dir, "api.addr"))
	f, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	fmt.Fprintf(f, "=== chaos: start at %s, FAKETIME=%q\n", time.Now().Format(time.RFC3339Nano), skew)
	cmd := exec.Command("ip", n.args()...)
	cmd.Stdout, cmd.Stderr = f, f
	env := []string{}
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "FAKETIME=") && !strings.HasPrefix(e, "LD_PRELOAD=") {
			env = append(env, e)
		}
	}
	if skew != "" {
		env = append(env, "FAKETIME="+skew)
	}
	cmd.Env = env
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	n.cmd, n.done, n.paused, n.skew = cmd, done, false, skew
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(n.dir, "api.addr")); err == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("%s exited at start: see %s", n.name, n.logPath)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: no API after 60s", n.name)
		}
	}
}

// kill9Locked kills the process with SIGKILL and waits for it; n.mu is held.
func (n *node) kill9Locked() {
	if n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.done
	n.cmd, n.paused = nil, false
}

// restart kills the process with SIGKILL, waits down, and starts it again
// with skew.
func (n *node) restart(down time.Duration, skew string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.kill9Locked()
	time.Sleep(down)
	return n.startLocked(skew)
}

// stopGracefully sends SIGTERM (SIGKILL after 15s) and waits.
func (n *node) stopGracefully() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return
	}
	if n.paused {
		_ = n.cmd.Process.Signal(syscall.SIGCONT)
	}
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.done:
	case <-time.After(15 * time.Second):
		_ = n.cmd.Process.Signal(syscall.SIGKILL)
		<-n.done
	}
	n.cmd, n.paused = nil, false
}

// signal sends SIGSTOP or SIGCONT.
func (n *node) signal(sig syscall.Signal) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return fmt.Errorf("%s is not running", n.name)
	}
	n.paused = sig == syscall.SIGSTOP
	return n.cmd.Process.Signal(sig)
}

// cli runs a CLI command against the node, inside its namespace, within d.
func (n *node) cli(d time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.ns, n.bin, "--data-dir", n.dir}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return out.String(), fmt.Errorf("%s: cshare %s: no answer within %s", n.name, strings.Join(args, " "), d)
		}
		return out.String(), fmt.Errorf("%s: cshare %s: %v: %s", n.name, strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// json runs a `--json` CLI command and decodes its output into v.
func (n *node) json(d time.Duration, v any, args ...string) error {
	out, err := n.cli(d, append(args, "--json")...)
	if err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		return fmt.Errorf("%s: cshare %s --json: %v", n.name, strings.Join(args, " "), err)
	}
	return nil
}

type nodeStatus struct {
	ID        string `json:"id"`
	Person    string `json:"person"`
	Peers     int    `json:"peers"`
	StateHash string `json:"state_hash"`
	PlanHash  string `json:"plan_hash"`
	Entries   int    `json:"entries"`
}

// startNodes starts a node in each of the first count namespaces of w,
// with an exec-driver node.yaml of slots slots and two recorded GPUs (the
// exec driver gives a run its GPUs in CUDA_VISIBLE_DEVICES), and returns
// them with a node for each namespace left, not started (a machine that
// joins later); t.Cleanup stops them all.
func startNodes(t *testing.T, w *netw, bin string, count, slots int, hb time.Duration) (started, later []*node) {
	t.Helper()
	base := t.TempDir()
	conf := filepath.Join(base, "node.yaml")
	yaml := fmt.Sprintf("runtime: {exec: true, docker: false, record_gpus: 2}\nresources: {max_concurrent_jobs: %d}\ndiscovery: {mdns: false}\n", slots)
	if err := os.WriteFile(conf, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	var ns []*node
	t.Cleanup(func() {
		for _, n := range ns {
			n.stopGracefully()
		}
	})
	for i, s := range w.nodes {
		n := &node{i: i, name: fmt.Sprintf("n%d", i+1), ns: s.ns, ip: s.ip, bin: bin, hb: hb,
			dir: filepath.Join(base, fmt.Sprintf("n%d", i+1)), conf: conf}
		n.logPath = n.dir + ".log"
		if err := os.MkdirAll(n.dir, 0o700); err != nil {
			t.Fatal(err)
		}
		ns = append(ns, n)
		if i >= count {
			continue
		}
		if err := n.start(""); err != nil {
			t.Fatal(err)
		}
	}
	return ns[:count], ns[count:]
}

// formOrg creates the org on the first node, joins the others with its key,
// approves them and makes every person an admin (admins see every job),
// waits until every node knows every machine and one state hash, and
// returns the org key.
func formOrg(t *testing.T, ns []*node) string {
	t.Helper()
	const d = 30 * time.Second
	out, err := ns[0].cli(d, "org", "create", "--name", "chaos")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	key := strings.TrimSpace(lines[len(lines)-1])
	var st nodeStatus
	if err := ns[0].json(d, &st, "node", "status"); err != nil {
		t.Fatal(err)
	}
	ns[0].id = st.ID
	for _, n := range ns[1:] {
		if err := admit(ns[0], n, key); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := waitConverged(ns, 60*time.Second, true, nil); !ok {
		t.Fatal("the org did not settle on one state and plan with every peer connected within 60s")
	}
	return key
}

// admit joins n to owner's org with key, approves it on owner and makes
// its person an admin (admins see every job); n.id is its machine ID.
func admit(owner, n *node, key string) error {
	const d = 30 * time.Second
	if _, err := n.cli(d, "node", "join", "--org-key", key); err != nil {
		return err
	}
	var st nodeStatus
	if err := n.json(d, &st, "node", "status"); err != nil {
		return err
	}
	n.id = st.ID
	if _, err := owner.cli(d, "machine", "approve", st.ID); err != nil {
		return err
	}
	_, err := owner.cli(d, "member", "set-role", st.Person, "admin")
	return err
}

// snapshot reads every node's status at once.
func snapshot(ns []*node) ([]nodeStatus, error) { return statuses[nodeStatus](ns) }

// statuses reads every node's status at once, each decoded into a T.
func statuses[T any](ns []*node) ([]T, error) {
	sts := make([]T, len(ns))
	errs := make([]error, len(ns))
	var wg sync.WaitGroup
	for i, n := range ns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = n.json(10*time.Second, &sts[i], "node", "status")
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return sts, err
		}
	}
	return sts, nil
}

// agree says whether the statuses show one state hash and one plan hash
// (and, if peers, every node connected to all others).
func agree(sts []nodeStatus, peers bool) bool {
	for _, s := range sts {
		if s.StateHash == "" || s.StateHash != sts[0].StateHash || s.PlanHash != sts[0].PlanHash {
			return false
		}
		if peers && s.Peers != len(sts)-1 {
			return false
		}
	}
	return true
}

// waitConverged polls every node until they agree; it returns how long
// that took and whether it happened within d. logf, if not nil, gets what
// each node says every 5s until then.
func waitConverged(ns []*node, d time.Duration, peers bool, logf func(string, ...any)) (time.Duration, bool) {
	t0 := time.Now()
	var logged time.Time
	for time.Since(t0) < d {
		sts, err := snapshot(ns)
		if err == nil && agree(sts, peers) {
			return time.Since(t0), true
		}
		if logf != nil && time.Since(logged) >= 5*time.Second {
			logged = time.Now()
			var b strings.Builder
			for i, s := range sts {
				fmt.Fprintf(&b, " %s: peers %d state %.10s plan %.10s;", ns[i].name, s.Peers, s.StateHash, s.PlanHash)
			}
			logf("not converged %s after healing:%s err %v", time.Since(t0).Round(time.Millisecond), b.String(), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(t0), false
}
