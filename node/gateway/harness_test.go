package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/market"
	"github.com/cshare/cshare/p2p"
	"github.com/cshare/cshare/runtime"
	"github.com/cshare/cshare/runtime/runtimetest"
)

// The gateway's tests run Debian's OpenSSH client (and x/crypto's, where
// they need what OpenSSH does not let a script do, such as a window
// change) against a gateway on 127.0.0.1, entering real containers of the
// local Docker engine, with a State built by hand: persons, their keys,
// contracts and jobs.

const (
	testOrg     = "org-test"
	testMachine = "m-test"
)

// book is a Ledger over a State the test changes.
type book struct {
	mu sync.RWMutex
	st *ledger.State
}

func (b *book) View(fn func(st *ledger.State)) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	fn(b.st)
}

func (b *book) Write(context.Context, string, any) (*ledger.Entry, error) {
	return nil, fmt.Errorf("the test's book takes no writes")
}

func (b *book) Org() string { return testOrg }

func (b *book) change(fn func(st *ledger.State)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	fn(b.st)
}

// noMachines: no other machine.
type noMachines struct{}

func (noMachines) Gateway(string) (p2p.SSHGateway, string, bool) { return p2p.SSHGateway{}, "", false }
func (noMachines) RunningOn(string, int64) string                { return "" }

// world is a gateway over a book, with persons that hold SSH keys.
type world struct {
	t      testing.TB
	dir    string
	book   *book
	gw     *Service
	docker *runtime.Docker
	known  string // known_hosts with the gateway's key
	port   int
	keys   map[string]string // person -> private key file
	now    time.Time
}

// newWorld starts a gateway on 127.0.0.1 over a State with members alice,
// bob and admin (an admin), each with an SSH key of their own.
func newWorld(t testing.TB) *world {
	t.Helper()
	needSSH(t)
	d := runtimetest.Docker(t)
	w := &world{t: t, dir: t.TempDir(), docker: d, keys: map[string]string{}, now: time.Now()}
	st := ledger.NewState()
	st.Org = testOrg
	for _, p := range []string{"alice", "bob", "admin"} {
		role := ledger.RoleMember
		if p == "admin" {
			role = ledger.RoleAdmin
		}
		st.Members[p] = &ledger.Member{ID: p, Name: p, Role: role}
	}
	w.book = &book{st: st}
	for _, p := range []string{"alice", "bob", "admin"} {
		w.addKey(p, w.newKey(p))
	}
	reg := runtime.NewRegistry()
	reg.Add("docker", d)
	gw, err := New(Deps{Ledger: w.book, Drivers: reg, Machines: noMachines{}, Machine: testMachine,
		Person: func() string { return "alice" }, DataDir: w.dir, Listen: "127.0.0.1:0", Now: time.Now,
		Log: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := gw.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); gw.Close() })
	w.gw = gw
	_, port, _ := net.SplitHostPort(gw.Addr())
	w.port, _ = strconv.Atoi(port)
	w.known = filepath.Join(w.dir, "known_hosts")
	line := fmt.Sprintf("[127.0.0.1]:%d %s\n", w.port, gw.Announce().HostKey)
	if err := os.WriteFile(w.known, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	return w
}

// testWriter sends the gateway's log to the test's.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

var sshOnce sync.Once

// needSSH makes sure OpenSSH's client is installed (with apt-get when it
// is not), and skips only when it cannot be.
func needSSH(t testing.TB) {
	t.Helper()
	sshOnce.Do(func() {
		if _, err := exec.LookPath("ssh"); err == nil {
			return
		}
		_ = exec.Command("sh", "-c", "apt-get install -y openssh-client || (apt-get update && apt-get install -y openssh-client)").Run()
	})
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("skipping: no OpenSSH client (ssh), and apt-get install -y openssh-client failed")
	}
	if _, err := exec.LookPath("ssh-keygen"); err != nil {
		t.Skip("skipping: no ssh-keygen")
	}
}

// newKey makes an ed25519 key pair with ssh-keygen and returns the
// private key's file (the public one is beside it, .pub).
func (w *world) newKey(name string) string {
	w.t.Helper()
	f := filepath.Join(w.dir, "id_"+name+"_"+hex.EncodeToString(randBytes(3)))
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", f).CombinedOutput(); err != nil {
		w.t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	return f
}

func randBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// pubLine is the canonical line of the public key beside private key f.
func (w *world) pubLine(f string) ledger.ParsedSSHKey {
	w.t.Helper()
	b, err := os.ReadFile(f + ".pub")
	if err != nil {
		w.t.Fatal(err)
	}
	k, err := ledger.CheckSSHKey("key", string(b))
	if err != nil {
		w.t.Fatal(err)
	}
	return k
}

// addKey records key file f as person's in the State, now.
func (w *world) addKey(person, f string) {
	k := w.pubLine(f)
	w.book.change(func(st *ledger.State) {
		if st.SSHKeys == nil {
			st.SSHKeys = map[string][]ledger.SSHKey{}
		}
		st.SSHKeys[person] = append(st.SSHKeys[person], ledger.SSHKey{Key: k.Line, Fingerprint: k.Fingerprint})
	})
	if w.keys[person] == "" {
		w.keys[person] = f
	}
}

// contract records a running contract of renter hosted here, runs its
// container (cmd in the test image) and returns its ID.
func (w *world) contract(renter string, cmd ...string) string {
	w.t.Helper()
	id := "c" + hex.EncodeToString(randBytes(6))
	now := w.now.UnixMilli()
	w.book.change(func(st *ledger.State) {
		st.Contracts[id] = &ledger.Contract{Contract: market.Contract{ID: id, Seq: int64(len(st.Contracts) + 1), Renter: renter, Host: "admin",
			Offer: market.Offer{Machine: testMachine, Until: now + market.Hour}, Accepted: true, Start: now - 1000, End: now + market.Hour,
			Running: true, Since: now - 1000}, Spec: ledger.ContractSpec{Image: runtime.TestImage}}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := w.docker.CreateContract(ctx, runtime.ContractSpec{Org: testOrg, Machine: testMachine, Contract: id, Image: runtime.TestImage, Cmd: cmd})
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = w.docker.RemoveContract(ctx, run)
	})
	if err := w.docker.StartContract(ctx, run); err != nil {
		w.t.Fatal(err)
	}
	return id
}

// sshArgs are OpenSSH's arguments to reach user on the gateway with key
// file (checking the gateway's host key, reading no user config).
func (w *world) sshArgs(key, user string, extra ...string) []string {
	args := []string{"-F", "/dev/null", "-p", strconv.Itoa(w.port), "-i", key, "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
		"-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile=" + w.known, "-o", "ConnectTimeout=10"}
	args = append(args, extra...)
	return append(args, user+"@127.0.0.1")
}

// ssh runs OpenSSH's client to user with key, the remote command cmd (""
// for none) and stdin; it returns stdout, stderr and the exit code.
func (w *world) ssh(key, user, stdin string, extra []string, cmd ...string) (string, string, int) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, "ssh", append(w.sshArgs(key, user, extra...), cmd...)...)
	c.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		w.t.Fatalf("ssh: %v", err)
	}
	return out.String(), errb.String(), code
}

// client is x/crypto's SSH client to user with key file f.
func (w *world) client(f, user string) (*ssh.Client, error) {
	b, err := os.ReadFile(f)
	if err != nil {
		return nil, err
	}
	signer, err := ssh.ParsePrivateKey(b)
	if err != nil {
		return nil, err
	}
	return ssh.Dial("tcp", w.gw.Addr(), &ssh.ClientConfig{User: user, Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: ssh.FixedHostKey(w.gw.signer.PublicKey()), Timeout: 10 * time.Second})
}

// eventually polls cond every 20 ms until it returns "" or d passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		msg := cond()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %s", d, what, msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
