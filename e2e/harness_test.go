// Package e2e runs the built cshare binary as separate node processes and
// drives them through the CLI, as a user would.
package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// cshareBin returns the binary under test: $CSHARE_BIN, or one built once.
func cshareBin(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("CSHARE_BIN"); b != "" {
		return b
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "cshare-e2e-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "cshare")
		cmd := exec.Command("go", "build", "-o", binPath, "../cmd/cshare")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// proc is one node process.
type proc struct {
	t       *testing.T
	bin     string
	dir     string
	port    int
	cmd     *exec.Cmd
	log     *os.File
	extra   []string
	logPath string
	listen  string // "" = /ip4/127.0.0.1/tcp/<port>
}

func startNode(t *testing.T, name string, extra ...string) *proc {
	t.Helper()
	return startNodeOn(t, name, "", extra...)
}

// startNodeOn starts a node listening on the libp2p multiaddr listen (""
// for a free port chosen up front).
func startNodeOn(t *testing.T, name, listen string, extra ...string) *proc {
	t.Helper()
	p := &proc{t: t, bin: cshareBin(t), dir: filepath.Join(t.TempDir(), name), port: freePort(t), extra: extra, listen: listen}
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	p.logPath = p.dir + ".log"
	p.start()
	t.Cleanup(func() {
		if p.cmd != nil && p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _ = p.cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = p.cmd.Process.Kill()
			}
		}
		if t.Failed() {
			b, _ := os.ReadFile(p.logPath)
			t.Logf("log of %s:\n%s", p.dir, tail(string(b), 4000))
		}
	})
	return p
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func (p *proc) start() {
	t := p.t
	t.Helper()
	_ = os.Remove(filepath.Join(p.dir, "api.addr"))
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	listen := p.listen
	if listen == "" {
		listen = fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", p.port)
	}
	args := append([]string{"node", "run", "--data-dir", p.dir, "--api", "127.0.0.1:0",
		"--listen", listen, "--heartbeat-interval", "500ms"}, p.extra...)
	p.cmd = exec.Command(p.bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.log = f
	eventually(t, 20*time.Second, "node API up", func() bool {
		_, err := os.Stat(filepath.Join(p.dir, "api.addr"))
		return err == nil
	})
}

// kill9 kills the node process without any chance to clean up.
func (p *proc) kill9() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_, _ = p.cmd.Process.Wait()
	p.cmd.ProcessState = &os.ProcessState{}
}

// cli runs a CLI command against this node and returns stdout, stderr and
// the exit code.
func (p *proc) cli(args ...string) (string, string, int) {
	cmd := exec.Command(p.bin, append([]string{"--data-dir", p.dir}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		p.t.Fatalf("cshare %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// must runs a CLI command that must succeed.
func (p *proc) must(args ...string) string {
	p.t.Helper()
	out, errs, code := p.cli(args...)
	if code != 0 {
		p.t.Fatalf("cshare %s: exit %d: %s", strings.Join(args, " "), code, errs)
	}
	return out
}

func (p *proc) json(v any, args ...string) {
	p.t.Helper()
	out := p.must(append(args, "--json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		p.t.Fatalf("cshare %v --json: %v\n%s", args, err, out)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

func eventually(t *testing.T, d time.Duration, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for: %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type status struct {
	ID        string   `json:"id"`
	Person    string   `json:"person"`
	Role      string   `json:"role"`
	Org       string   `json:"org"`
	Peers     int      `json:"peers"`
	Heads     []string `json:"heads"`
	PlanHash  string   `json:"plan_hash"`
	PlanAgree int      `json:"plan_agree"`
	PlanPeers int      `json:"plan_peers"`
}

type orgInfo struct {
	ID        string `json:"id"`
	StateHash string `json:"state_hash"`
	Entries   int    `json:"entries"`
}

type machine struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Status string `json:"status"`
}

type job struct {
	ID    string `json:"id"`
	State string `json:"state"`
	Items struct {
		Total, Done, Failed, Running int64
	} `json:"items"`
	Instances []struct {
		Machine string `json:"machine"`
		Slot    int    `json:"slot"`
		Kind    string `json:"kind"`
		State   string `json:"state"`
	} `json:"instances"`
	Error string `json:"error"`
}

type item struct {
	Item     int64  `json:"item"`
	Status   string `json:"status"`
	Attempts int64  `json:"attempts"`
	Machine  string `json:"machine"`
}

// mesh starts n nodes, creates an org on the first, joins and approves the
// rest, and makes their persons admins: each node's person is its own, and
// admins see every job (a member sees only their own), so a test may watch
// any job from any node.
func mesh(t *testing.T, n int, extra ...string) []*proc {
	t.Helper()
	return meshOn(t, n, "", extra...)
}

// meshOn is mesh with every node listening on listen (see startNodeOn).
func meshOn(t *testing.T, n int, listen string, extra ...string) []*proc {
	t.Helper()
	ps := make([]*proc, n)
	for i := range ps {
		ps[i] = startNodeOn(t, fmt.Sprintf("node%d", i+1), listen, extra...)
	}
	key := lastLine(ps[0].must("org", "create", "--name", "e2e"))
	for _, p := range ps[1:] {
		p.must("node", "join", "--org-key", key)
		var st status
		p.json(&st, "node", "status")
		ps[0].must("machine", "approve", st.ID)
		ps[0].must("member", "set-role", st.Person, "admin")
	}
	for _, p := range ps {
		eventually(t, 20*time.Second, "all machines available on every node", func() bool { return p.available() == n })
		eventually(t, 20*time.Second, "every person an admin or the owner on every node", func() bool {
			admins := 0
			for _, m := range p.members() {
				if m.Role == "admin" || m.Role == "owner" {
					admins++
				}
			}
			return admins == n
		})
	}
	return ps
}

// available counts the machines p's node lists as available or busy.
func (p *proc) available() int {
	p.t.Helper()
	var ms []machine
	p.json(&ms, "machine", "ls")
	n := 0
	for _, m := range ms {
		if m.Status == "available" || m.Status == "busy" {
			n++
		}
	}
	return n
}

func dockerAvailable(t *testing.T) {
	t.Helper()
	if err := exec.Command("docker", "info").Run(); err != nil {
		t.Skip("no Docker engine reachable: skipping the Docker end-to-end test")
	}
	if err := exec.Command("bash", "../scripts/testimage.sh").Run(); err != nil {
		t.Skipf("cannot build the test image: %v", err)
	}
}

type member struct {
	ID       string   `json:"id"`
	Name     string   `json:"name"`
	Role     string   `json:"role"`
	Machines []string `json:"machines"`
	Joined   string   `json:"joined"`
}

func (p *proc) members() []member {
	p.t.Helper()
	var ms []member
	p.json(&ms, "member", "ls")
	return ms
}

type offerRow struct {
	ID      string  `json:"id"`
	Machine string  `json:"machine"`
	Mine    bool    `json:"mine"`
	CPUs    int64   `json:"cpus"`
	Price   float64 `json:"price"`
}

type contractRow struct {
	ID     string `json:"id"`
	Offer  string `json:"offer"`
	Host   string `json:"host"`
	Renter string `json:"renter"`
	State  string `json:"state"`
	GPUs   int    `json:"gpus"`
	Start  string `json:"start"`
	End    string `json:"end"`
	Cost   float64
	Reason string `json:"reason"`
}

func (p *proc) contract(id string) contractRow {
	p.t.Helper()
	var c contractRow
	p.json(&c, "contract", "show", id)
	return c
}

func findMember(ms []member, id string) *member {
	for i := range ms {
		if ms[i].ID == id {
			return &ms[i]
		}
	}
	return nil
}
