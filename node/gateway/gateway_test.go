package gateway

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/market"
	"github.com/cshare/cshare/runtime"
)

// TestOpenSSHCommand: `ssh HOST CMD` runs CMD in the contract's container,
// without a terminal, with its stdout, stderr and exit code, the client's
// environment and CSHARE_CONTRACT, and stdin.
func TestOpenSSHCommand(t *testing.T) {
	w := newWorld(t)
	id := w.contract("alice", "sleep", "3600")
	out, errOut, code := w.ssh(w.keys["alice"], id, "from stdin\n", []string{"-o", "SetEnv=GREETING=hello"},
		`echo "out $GREETING $CSHARE_CONTRACT"; echo err >&2; cat; test -t 0 || echo no-tty; exit 42`)
	if code != 42 {
		t.Fatalf("exit code %d, want 42 (stderr %q)", code, errOut)
	}
	want := "out hello " + id + "\nfrom stdin\nno-tty\n"
	if out != want {
		t.Fatalf("stdout %q, want %q", out, want)
	}
	if !strings.Contains(errOut, "err\n") {
		t.Fatalf("stderr %q lacks the command's err", errOut)
	}
	// A prefix of the ID names it, as the CLI's references do.
	if out, _, code := w.ssh(w.keys["alice"], id[:8], "", nil, "echo $CSHARE_CONTRACT"); code != 0 || out != id+"\n" {
		t.Fatalf("by prefix: %q, %d", out, code)
	}
}

// TestOpenSSHTerminal: `ssh -tt` gets a login shell on a terminal (TERM
// from the client), and its exit code.
func TestOpenSSHTerminal(t *testing.T) {
	w := newWorld(t)
	id := w.contract("alice", "sleep", "3600")
	out, errOut, code := w.ssh(w.keys["alice"], id, "tty; echo term=$TERM; exit 7\n", []string{"-tt", "-o", "SetEnv=TERM=xterm-test"})
	if code != 7 {
		t.Fatalf("exit code %d, want 7; stdout %q stderr %q", code, out, errOut)
	}
	if !strings.Contains(out, "/dev/pts/") || !strings.Contains(out, "term=xterm-test") {
		t.Fatalf("no terminal: %q", out)
	}
}

// TestWindowChange: a window change reaches the session's terminal.
func TestWindowChange(t *testing.T) {
	w := newWorld(t)
	id := w.contract("alice", "sleep", "3600")
	c, err := w.client(w.keys["alice"], id)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.RequestPty("xterm", 24, 80, nil); err != nil {
		t.Fatal(err)
	}
	in, _ := s.StdinPipe()
	outR, _ := s.StdoutPipe()
	if err := s.Shell(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			lines <- strings.TrimSpace(sc.Text())
		}
		close(lines)
	}()
	expect := func(want string) {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("session ended before %q", want)
				}
				if strings.HasSuffix(l, want) && !strings.Contains(l, "echo") {
					return
				}
			case <-deadline:
				t.Fatalf("no %q", want)
			}
		}
	}
	fmt.Fprintf(in, "echo size=$(stty size)\n")
	expect("size=24 80")
	if err := s.WindowChange(50, 132); err != nil {
		t.Fatal(err)
	}
	// The shell sees the change once it has read it: ask until it does.
	eventually(t, 20*time.Second, "the new size", func() string {
		fmt.Fprintf(in, "echo size=$(stty size)\n")
		select {
		case l := <-lines:
			if strings.HasSuffix(l, "size=50 132") && !strings.Contains(l, "echo") {
				return ""
			}
			return l
		case <-time.After(time.Second):
			return "no answer"
		}
	})
	fmt.Fprintf(in, "exit 3\n")
	err = s.Wait()
	if ee, ok := err.(interface{ ExitStatus() int }); !ok || ee.ExitStatus() != 3 {
		t.Fatalf("exit: %v, want status 3", err)
	}
}

// TestOpenSSHForward: `ssh -L` reaches a port served inside the container
// (busybox httpd), dialled on the container's address.
func TestOpenSSHForward(t *testing.T) {
	w := newWorld(t)
	id := w.contract("alice", "sh", "-c", "mkdir -p /www && echo hello-from-httpd > /www/index.html && exec httpd -f -p 8080 -h /www")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	local := l.Addr().(*net.TCPAddr).Port
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := exec.CommandContext(ctx, "ssh", w.sshArgs(w.keys["alice"], id, "-N", "-o", "ExitOnForwardFailure=yes",
		"-L", fmt.Sprintf("127.0.0.1:%d:localhost:8080", local))...)
	var errb strings.Builder
	c.Stderr = &errb
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = c.Wait() }()
	eventually(t, 30*time.Second, "httpd through the forward", func() string {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/index.html", local))
		if err != nil {
			return err.Error() + "; ssh: " + errb.String()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if string(b) != "hello-from-httpd\n" {
			return fmt.Sprintf("%d %q", resp.StatusCode, b)
		}
		return ""
	})
	// Anywhere but the container itself is refused.
	cl, err := w.client(w.keys["alice"], id)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if conn, err := cl.Dial("tcp", "172.17.0.1:22"); err == nil {
		conn.Close()
		t.Fatal("a forward to the docker host was let through")
	} else if !strings.Contains(err.Error(), "only ports inside the container") {
		t.Fatalf("refusal %v does not say why", err)
	}
}

// TestRefusals: another person's key, an unknown key, a stopped contract,
// a finished item and a target that is not here are each refused with a
// message the client prints; the contract's own key enters it.
func TestRefusals(t *testing.T) {
	w := newWorld(t)
	id := w.contract("alice", "sleep", "3600")
	stranger := w.newKey("stranger")
	for _, tc := range []struct {
		name, key, user, want string
	}{
		{"another person's key", w.keys["bob"], id, "no such contract"},
		{"an admin's key on a contract", w.keys["admin"], id, "no such contract"},
		{"an unknown key", stranger, id, "is not in the org's ledger"},
		{"no such contract", w.keys["alice"], "cffffffffffff", "no such contract"},
		{"a bad user name", w.keys["alice"], "a b", "not allowed"},
		{"an item number that is not one", w.keys["alice"], "job.x", "item number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := w.ssh(tc.key, tc.user, "", nil, "echo entered")
			if code != 255 || strings.Contains(out, "entered") {
				t.Fatalf("entered: code %d, %q", code, out)
			}
			if !strings.Contains(errOut, tc.want) {
				t.Fatalf("stderr %q lacks %q", errOut, tc.want)
			}
		})
	}
	// The contract's own key (contract create --ssh-key) enters it.
	own := w.newKey("own")
	w.book.change(func(st *ledger.State) {
		c := *st.Contracts[id]
		c.Spec.SSHKey = w.pubLine(own).Line
		st.Contracts[id] = &c
	})
	if out, errOut, code := w.ssh(own, id, "", nil, "echo entered"); code != 0 || out != "entered\n" {
		t.Fatalf("the contract's own key: %d %q %q", code, out, errOut)
	}
	// Stopped: refused, even for its renter.
	w.book.change(func(st *ledger.State) {
		c := *st.Contracts[id]
		c.Running = false
		st.Contracts[id] = &c
	})
	if _, errOut, code := w.ssh(w.keys["alice"], id, "", nil, "true"); code != 255 || !strings.Contains(errOut, "is stopped") {
		t.Fatalf("stopped contract: %d %q", code, errOut)
	}
	// Expired.
	w.book.change(func(st *ledger.State) {
		c := *st.Contracts[id]
		c.Running, c.End = true, w.now.UnixMilli()-1
		st.Contracts[id] = &c
	})
	if _, errOut, code := w.ssh(w.keys["alice"], id, "", nil, "true"); code != 255 || !strings.Contains(errOut, "is expired") {
		t.Fatalf("expired contract: %d %q", code, errOut)
	}
	// Hosted by another machine.
	w.book.change(func(st *ledger.State) {
		c := *st.Contracts[id]
		c.End = w.now.UnixMilli() + market.Hour
		c.Offer.Machine = "m-other"
		st.Contracts[id] = &c
	})
	if _, errOut, code := w.ssh(w.keys["alice"], id, "", nil, "true"); code != 255 || !strings.Contains(errOut, "runs on machine m-other") {
		t.Fatalf("elsewhere: %d %q", code, errOut)
	}
}

// TestKeyAddedAtOnce: a key added to the ledger after the contract
// started enters it at the next connection, and a removed one no longer.
func TestKeyAddedAtOnce(t *testing.T) {
	w := newWorld(t)
	id := w.contract("alice", "sleep", "3600")
	k := w.newKey("laptop")
	if _, errOut, code := w.ssh(k, id, "", nil, "true"); code != 255 || !strings.Contains(errOut, "not in the org's ledger") {
		t.Fatalf("before: %d %q", code, errOut)
	}
	w.addKey("alice", k)
	if out, errOut, code := w.ssh(k, id, "", nil, "echo in"); code != 0 || out != "in\n" {
		t.Fatalf("after adding: %d %q %q", code, out, errOut)
	}
	fp := w.pubLine(k).Fingerprint
	w.book.change(func(st *ledger.State) {
		var keep []ledger.SSHKey
		for _, x := range st.SSHKeys["alice"] {
			if x.Fingerprint != fp {
				keep = append(keep, x)
			}
		}
		st.SSHKeys["alice"] = keep
	})
	if _, _, code := w.ssh(k, id, "", nil, "true"); code != 255 {
		t.Fatalf("a removed key still enters: %d", code)
	}
}

// TestJobItem: JOB_ID.ITEM enters the container running that item, for
// the submitter and admins; others, finished items and items not running
// here are refused.
func TestJobItem(t *testing.T) {
	w := newWorld(t)
	job := "0a1b2c3d4e5f"
	w.book.change(func(st *ledger.State) {
		st.Jobs[job] = &ledger.Job{ID: job, Submitter: "bob", State: ledger.JobActive,
			Spec:  ledger.JobSpec{Name: "train", Driver: "docker", Image: runtime.TestImage, RangeStart: 1, RangeEnd: 3},
			Items: ledger.ItemsOf(ledger.Item{Status: ledger.ItemDone}, ledger.Item{}, ledger.Item{})}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := w.docker.Start(ctx, runtime.Spec{Org: testOrg, Job: job, Instance: job + "-s0", Machine: testMachine, Item: 2,
		Image: runtime.TestImage, Cmd: []string{"sleep", "3600"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = w.docker.Stop(ctx, run, 0)
		_ = w.docker.Remove(ctx, run)
	})
	for _, who := range []string{"bob", "admin"} {
		out, errOut, code := w.ssh(w.keys[who], job+".2", "", nil, "echo $CSHARE_JOB_ID $CSHARE_ITEM")
		if code != 0 || out != job+" 2\n" {
			t.Fatalf("%s: %d %q %q", who, code, out, errOut)
		}
	}
	if out, _, code := w.ssh(w.keys["bob"], "train.2", "", nil, "echo $CSHARE_ITEM"); code != 0 || out != "2\n" {
		t.Fatalf("by the job's name: %d %q", code, out)
	}
	for _, tc := range []struct{ key, user, want string }{
		{w.keys["alice"], job + ".2", "no such job"},
		{w.keys["bob"], job + ".1", "has finished (done)"},
		{w.keys["bob"], job + ".3", "is not running on this machine"},
		{w.keys["bob"], job + ".9", "has no item 9"},
	} {
		if _, errOut, code := w.ssh(tc.key, tc.user, "", nil, "true"); code != 255 || !strings.Contains(errOut, tc.want) {
			t.Fatalf("%s: %d %q, want %q", tc.user, code, errOut, tc.want)
		}
	}
}

// TestNoClientStopsOthers: clients that send garbage, say nothing, or hold
// 100 idle channels open do not stop another's session.
func TestNoClientStopsOthers(t *testing.T) {
	w := newWorld(t)
	id := w.contract("alice", "sleep", "3600")
	// Garbage, and silence, on raw connections.
	for i := 0; i < 20; i++ {
		c, err := net.Dial("tcp", w.gw.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if i%2 == 0 {
			_, _ = c.Write(append([]byte("SSH-2.0-junk\r\n"), randBytes(4096)...))
		}
	}
	// 100 idle channels on one connection: some are refused, none
	// answers for another.
	if _, err := w.client(w.keys["bob"], id); err == nil {
		t.Fatal("bob entered alice's contract")
	}
	cl, err := w.client(w.keys["alice"], id)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	opened, refused := 0, 0
	for i := 0; i < 100; i++ {
		ch, reqs, err := cl.OpenChannel("session", nil)
		if err != nil {
			refused++
			continue
		}
		opened++
		defer ch.Close()
		go func() {
			for range reqs {
			}
		}()
	}
	if opened != MaxChannels || refused != 100-MaxChannels {
		t.Fatalf("opened %d and refused %d of 100 channels; want %d open", opened, refused, MaxChannels)
	}
	for i := 0; i < 3; i++ {
		if out, errOut, code := w.ssh(w.keys["alice"], id, "", nil, "echo still "+strconv.Itoa(i)); code != 0 || out != "still "+strconv.Itoa(i)+"\n" {
			t.Fatalf("another session: %d %q %q", code, out, errOut)
		}
	}
}

// TestAuthorizeRules: the pure rules, without a container.
func TestAuthorizeRules(t *testing.T) {
	st := ledger.NewState()
	st.Org = testOrg
	for _, p := range []string{"alice", "bob", "admin", "gone"} {
		st.Members[p] = &ledger.Member{ID: p, Role: ledger.RoleMember}
	}
	st.Members["admin"].Role = ledger.RoleAdmin
	delete(st.Members, "gone")
	st.SSHKeys = map[string][]ledger.SSHKey{"alice": {{Fingerprint: "fa"}}, "bob": {{Fingerprint: "fb"}},
		"admin": {{Fingerprint: "fadm"}}, "gone": {{Fingerprint: "fgone"}}}
	st.Jobs["j00000000001"] = &ledger.Job{ID: "j00000000001", Submitter: "alice", State: ledger.JobActive, Spec: ledger.JobSpec{Driver: "exec", RangeStart: 0, RangeEnd: 1},
		Items: ledger.ItemsOf(ledger.Item{}, ledger.Item{Status: ledger.ItemFailed})}
	for _, tc := range []struct {
		user, fp, person, err string
	}{
		{"j00000000001.0", "fa", "alice", ""},
		{"j00000000001.0", "fadm", "admin", ""},
		{"j000.0", "fa", "alice", ""},
		{"j00000000001.0", "fb", "", "no such job"},
		{"j00000000001.1", "fa", "", "has finished (failed)"},
		{"j00000000001.0", "fgone", "", "is not in the org's ledger"},
		{"j00000000001.0", "nope", "", "is not in the org's ledger"},
	} {
		tg, err := ParseUser(tc.user)
		if err != nil {
			t.Fatal(err)
		}
		g, err := Authorize(st, tg, tc.fp, testMachine, 1000)
		switch {
		case tc.err == "" && (err != nil || g.Person != tc.person):
			t.Errorf("%s with %s: %v, person %q; want %q", tc.user, tc.fp, err, g.Person, tc.person)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s with %s: %v; want %q", tc.user, tc.fp, err, tc.err)
		}
	}
}
