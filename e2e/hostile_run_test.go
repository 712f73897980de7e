package e2e

// The hostile probe (issue 27, item 9): one org of three persons on three
// node processes, and a table of hostile and careless inputs (hostile
// cases, in hostile_cases_test.go) tried through the CLI and the raw API.
// Each case is checked for what it must do itself (want) and for what
// must hold after every case: no raw control byte in any output, no
// person's data in another member's output, every node alive, one state
// hash on every node. TestHostile (build tag e2e) runs every case;
// TestHostileFast, here, runs the cases marked fast, in make test.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The three persons, each on their own node: the index of hostile.ps.
const (
	olive = iota // the owner (an admin): sees everything; hosts the offer
	ann          // a member: a job, a private dataset, a contract on olive's offer
	bob          // a member: a job, a private dataset
)

var personName = [3]string{"olive", "ann", "bob"}

// fullHostile is set under the e2e tag (hostile_test.go): TestHostile then
// runs every case, and TestHostileFast, a subset of them, is skipped.
var fullHostile bool

// hostile is the shared org every case runs against.
type hostile struct {
	ps      [3]*proc
	person  [3]string // person IDs
	machine [3]string // machine IDs
	job     [3]string // each person's job (done), its name, env, cmd and output canaries
	running string    // bob's long-running job (sleep), to modify and cancel
	offer   string    // olive's offer
	// contract is ann's contract on olive's offer: running, with an env,
	// cmd and onstart only ann, the host (olive) and admins may read.
	contract string
	privDS   [3]string // CIDs of ann's and bob's private datasets
	pubDS    string    // CID of ann's public dataset
	// secrets[p] is what only p and the admins may read: the canary
	// prefix of p's values and the IDs of p's job, contract and private
	// dataset.
	secrets [3][]string
	// active[p]: p's node is (still) in the org; a case that takes a node
	// out of the org on purpose clears it.
	active  [3]bool
	scratch string // files the cases use
	// diverged names the case after which the state hashes did not agree;
	// later cases then wait less for them.
	diverged string
	tokens   [3]string
	addrs    [3]string
}

// canary is the prefix of every value of person p that others must not
// read.
func canary(p int) string { return "canary-" + personName[p] }

// huge is a 10 KB value: an error may echo 64 characters of it, never 65.
var huge = strings.Repeat("Q", 10<<10)

// hostileConf writes a node.yaml: jobs run with the exec driver, four at a
// time; with docker, the node also has the Docker driver (olive's, to
// host contracts; bob's, to check images at the door as a user with
// Docker has them checked).
func hostileConf(t *testing.T, docker bool) string {
	t.Helper()
	conf := filepath.Join(t.TempDir(), "node.yaml")
	yaml := fmt.Sprintf("runtime: {exec: true, docker: %v}\nresources: {max_concurrent_jobs: 4}\ndiscovery: {mdns: false}\n", docker)
	if err := os.WriteFile(conf, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return conf
}

// newHostile starts the three nodes and makes the org: olive creates it,
// ann and bob join with member invites; each runs a job with canaries in
// its name, env, cmd and output; ann and bob each add a private dataset;
// olive offers part of her machine and ann rents it with an env, cmd and
// onstart of canaries.
func newHostile(t *testing.T) *hostile {
	t.Helper()
	dockerAvailable(t)
	began := time.Now()
	h := &hostile{scratch: t.TempDir(), active: [3]bool{true, true, true}}
	t.Cleanup(func() { // after the nodes stop (cleanups run last first)
		for _, p := range h.ps {
			if p != nil {
				killRunsUnder(filepath.Join(p.dir, "exec", "runs") + "/")
			}
		}
	})
	for i := range h.ps {
		h.ps[i] = startNode(t, personName[i], "--config", hostileConf(t, i != ann))
	}
	h.ps[olive].must("org", "create", "--name", "e2e", "--user-name", "olive")
	for _, p := range []int{ann, bob} {
		inv := lastLine(h.ps[olive].must("org", "invite", "--role", "member", "--uses", "1"))
		h.ps[p].must("member", "join", "--invite", inv, "--user-name", personName[p])
	}
	for i, p := range h.ps {
		var st status
		p.json(&st, "node", "status")
		h.person[i], h.machine[i] = st.Person, st.ID
		h.addrs[i] = readTrim(t, filepath.Join(p.dir, "api.addr"))
		h.tokens[i] = readTrim(t, filepath.Join(p.dir, "api.token"))
	}
	h.removeContainersOnCleanup(t)
	for _, p := range h.ps {
		eventually(t, 30*time.Second, "three members and three available machines on every node", func() bool {
			return p.available() == 3 && len(p.members()) == 3
		})
	}
	h.converged(t, 30*time.Second)

	for i, p := range h.ps {
		c := canary(i)
		out := p.must("job", "submit", "--driver", "exec", "--name", c+"-job", "--env", "SECRET="+c+"-job-env",
			"--", "sh", "-c", "echo "+c+"-job-out")
		h.job[i] = lastLine(out)
	}
	h.running = lastLine(h.ps[bob].must("job", "submit", "--driver", "exec", "--name", canary(bob)+"-sleeper", "--", "sh", "-c", "sleep 3600"))
	for _, i := range []int{ann, bob} {
		f := filepath.Join(h.scratch, personName[i]+".txt")
		if err := os.WriteFile(f, []byte(canary(i)+" private data\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		h.privDS[i] = lastLine(h.ps[i].must("dataset", "add", f, "--private", "--name", canary(i)+"-ds"))
	}
	pub := filepath.Join(h.scratch, "public.txt")
	if err := os.WriteFile(pub, []byte("public data\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h.pubDS = lastLine(h.ps[ann].must("dataset", "add", pub, "--name", "shared"))

	eventually(t, 30*time.Second, "olive can offer part of her machine", func() bool {
		out, _, code := h.ps[olive].cli("offer", "create", "--price", "0.5", "--cpus", "1", "--memory", "64m", "--disk", "0", "--for", "2h")
		h.offer = lastLine(out)
		return code == 0
	})
	eventually(t, 30*time.Second, "ann's node lists olive's offer", func() bool {
		var os []offerRow
		h.ps[ann].json(&os, "offer", "ls")
		return len(os) == 1 && os[0].ID == h.offer
	})
	a := canary(ann)
	h.contract = lastLine(h.ps[ann].must("contract", "create", h.offer, "--image", "cshare-busybox:latest", "--cpus", "1", "--for", "1h",
		"--env", "API_SECRET="+a+"-ct-env", "--onstart", "echo "+a+"-ct-onstart", "--", "sh", "-c", "sleep 3600 || echo "+a+"-ct-cmd"))
	eventually(t, 60*time.Second, "ann's contract running", func() bool {
		return h.ps[ann].contract(h.contract).State == "running"
	})
	for i := range h.ps {
		eventually(t, 60*time.Second, "every setup job done on every node (a member sees hers)", func() bool {
			for p, id := range h.job {
				if i != olive && p != i {
					continue
				}
				var j job
				h.ps[i].json(&j, "job", "show", id)
				if j.State != "done" {
					return false
				}
			}
			return true
		})
	}
	eventually(t, 30*time.Second, "bob's sleeper running", func() bool {
		var j job
		h.ps[bob].json(&j, "job", "show", h.running)
		return j.Items.Running == 1
	})
	for i := range h.secrets {
		h.secrets[i] = []string{canary(i), h.job[i]}
	}
	h.secrets[ann] = append(h.secrets[ann], h.contract, h.privDS[ann])
	h.secrets[bob] = append(h.secrets[bob], h.running, h.privDS[bob])
	h.converged(t, 30*time.Second)
	t.Logf("hostile org set up in %s: olive %s, ann %s, bob %s; ann's contract %s", time.Since(began).Round(time.Millisecond),
		h.person[olive], h.person[ann], h.person[bob], h.contract)
	return h
}

// removeContainersOnCleanup removes the containers of the Docker nodes
// when the test ends, whatever the cases did to the org.
func (h *hostile) removeContainersOnCleanup(t *testing.T) {
	ms := []string{h.machine[olive], h.machine[bob]}
	t.Cleanup(func() {
		for _, m := range ms {
			removeContainersOf(m)
		}
	})
}

func removeContainersOf(machine string) {
	if machine == "" {
		return
	}
	out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=cshare.machine="+machine).Output()
	for _, id := range strings.Fields(string(out)) {
		_ = exec.Command("docker", "rm", "-f", "-v", id).Run()
	}
}

// killRunsUnder kills the processes whose command line names dir, and
// their children: the exec driver's runs outlive their node by design (a
// node killed comes back to them), so a test ends its own.
func killRunsUnder(dir string) {
	procs, _ := filepath.Glob("/proc/[0-9]*")
	parent := map[int]int{}
	kill := map[int]bool{}
	for _, p := range procs {
		pid, err := strconv.Atoi(filepath.Base(p))
		if err != nil {
			continue
		}
		if cmd, err := os.ReadFile(p + "/cmdline"); err == nil && bytes.Contains(cmd, []byte(dir)) {
			kill[pid] = true
		}
		stat, _ := os.ReadFile(p + "/stat")
		if i := bytes.LastIndexByte(stat, ')'); i >= 0 {
			if f := strings.Fields(string(stat[i+1:])); len(f) > 1 {
				parent[pid], _ = strconv.Atoi(f[1])
			}
		}
	}
	for grew := true; grew; {
		grew = false
		for pid, pp := range parent {
			if kill[pp] && !kill[pid] {
				kill[pid], grew = true, true
			}
		}
	}
	for pid := range kill {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

func readTrim(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// hcase is one hostile or careless input: a CLI command or an API request,
// run as one person on their node, and what it must do.
type hcase struct {
	name string
	as   int  // olive, ann or bob: whose node runs it
	fast bool // also in TestHostileFast (make test)
	cli  []string
	req  *apiReq
	// dir, when set, runs the CLI with this data dir (a scratch one, for
	// the commands that do not talk to a node) instead of the node's.
	dir  string
	want want
	// then checks more, after the common checks (the case's own effect).
	then func(t *testing.T, h *hostile, r result)
	// cleanup undoes what may be left of the case (a blocked reader).
	cleanup func()
	// timeout bounds the case's command or request (default 30 s).
	timeout time.Duration
	// hides, when set, is a reference in the case to something the asker
	// may not see, and like one of the same shape that never existed: the
	// case is run again with like instead, and both refusals must read
	// the same (each reference read as REF), so that the answer tells
	// nothing of what exists.
	hides, like string
}

// apiReq is a raw HTTP request to the node's API. Auth is the bearer
// token unless noToken or token; host overrides the Host header; chunked
// sends the body without a length.
type apiReq struct {
	method, path, body string
	noToken            bool
	token              string
	host               string
	chunked            bool
}

// want is what a case must do.
type want struct {
	ok bool // exit 0, or a 2xx answer
	// either: succeeding or being refused (in the right form) are both
	// right; then checks what a success must leave.
	either bool
	code   int    // API: the refusal's status (0: any 4xx)
	field  string // API: the refusal's field; "a|b": either name
	// says: the error line (CLI) or error (API) contains each. A CLI
	// flag "--x" is named as "--x" or as "x:" (the message's subject).
	says []string
	not  []string // no output contains any
}

// result is what a case printed or answered.
type result struct {
	code           int // exit code, or HTTP status
	stdout, stderr string
	body           string
}

func (r result) all() string { return r.stdout + r.stderr + r.body }

// Shorthands for the table.
func args(a ...string) []string { return a }

func refused(says ...string) want { return want{says: says} }
func refusedAPI(code int, field string, says ...string) want {
	return want{code: code, field: field, says: says}
}
func ok(not ...string) want { return want{ok: true, not: not} }

func get(path string) *apiReq { return &apiReq{method: "GET", path: path} }
func post(path, body string) *apiReq {
	return &apiReq{method: "POST", path: path, body: body}
}

// runHostile runs the cases that pick selects, in order, each as a
// subtest, and checks what must hold after each.
func runHostile(t *testing.T, pick func(hcase) bool) {
	h := newHostile(t)
	began := time.Now()
	n := 0
	for _, c := range hostileCases(t, h) {
		if !pick(c) {
			continue
		}
		n++
		t.Run(c.name, func(t *testing.T) { h.run(t, c) })
	}
	t.Logf("%d hostile cases in %s", n, time.Since(began).Round(time.Millisecond))
}

func (h *hostile) run(t *testing.T, c hcase) {
	if c.cleanup != nil {
		defer c.cleanup()
	}
	var r result
	input := strings.Join(c.cli, " ")
	if c.req != nil {
		r = h.doWithin(t, c.as, c.req, c.limit())
		input = c.req.path + " " + c.req.body
		if r.code == -1 {
			t.Errorf("%s %s: no answer: %s", c.req.method, ellipsize(c.req.path), r.body)
			r.body = ""
		}
	} else {
		r = h.runCLI(t, c)
	}
	h.checkShape(t, c, r)
	for _, f := range outputFaults(r) {
		t.Error(f)
	}
	for _, s := range c.want.not {
		if strings.Contains(r.all(), s) {
			t.Errorf("the output names %q:\n%s", s, ellipsize(r.all()))
		}
	}
	if c.as != olive { // an admin may read everything
		for p := range h.secrets {
			if p == c.as {
				continue
			}
			for _, s := range h.secrets[p] {
				if s != "" && !strings.Contains(input, s) && strings.Contains(r.all(), s) {
					t.Errorf("%s reads %s's %q:\n%s", personName[c.as], personName[p], s, ellipsize(r.all()))
				}
			}
		}
	}
	if c.hides != "" {
		h.sameAsUnknown(t, c, r)
	}
	if c.then != nil {
		c.then(t, h, r)
	}
	h.alive(t)
	h.agree(t, c.name)
}

// runCLI runs the case's command on its person's node (or in c.dir), with
// a deadline: a command that hangs fails its case, not the run.
func (h *hostile) runCLI(t *testing.T, c hcase) result {
	t.Helper()
	dir := h.ps[c.as].dir
	if c.dir != "" {
		dir = c.dir
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.limit())
	defer cancel()
	cmd := exec.CommandContext(ctx, h.ps[c.as].bin, append([]string{"--data-dir", dir}, c.cli...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Errorf("cshare %s: no answer within %s (killed)", ellipsize(strings.Join(c.cli, " ")), c.limit())
	}
	code := 0
	if ee, isExit := err.(*exec.ExitError); isExit {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("cshare %s: %v", ellipsize(strings.Join(c.cli, " ")), err)
	}
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

func (c hcase) limit() time.Duration {
	if c.timeout > 0 {
		return c.timeout
	}
	return 30 * time.Second
}

// do sends a raw request to person p's node.
func (h *hostile) do(t *testing.T, p int, a *apiReq) result {
	t.Helper()
	return h.doWithin(t, p, a, 30*time.Second)
}

// doWithin is do with a deadline of d.
func (h *hostile) doWithin(t *testing.T, p int, a *apiReq, d time.Duration) result {
	t.Helper()
	var body io.Reader = strings.NewReader(a.body)
	if a.chunked {
		body = io.MultiReader(strings.NewReader(a.body)) // no length: sent chunked
	}
	req, err := http.NewRequest(a.method, "http://"+h.addrs[p]+a.path, body)
	if err != nil {
		t.Fatalf("request %s %s: %v", a.method, ellipsize(a.path), err)
	}
	if a.chunked {
		req.ContentLength = -1
	}
	switch {
	case a.noToken:
	case a.token != "":
		req.Header.Set("Authorization", "Bearer "+a.token)
	default:
		req.Header.Set("Authorization", "Bearer "+h.tokens[p])
	}
	if a.host != "" {
		req.Host = a.host
	}
	if a.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		return result{code: -1, body: err.Error()}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	return result{code: resp.StatusCode, body: string(b)}
}

// checkShape checks the case's own outcome: success, or a refusal of one
// line (CLI) or one JSON error with the right field (API).
func (h *hostile) checkShape(t *testing.T, c hcase, r result) {
	t.Helper()
	w := c.want
	if c.req != nil {
		success := r.code >= 200 && r.code < 300
		switch {
		case success && (w.ok || w.either):
			return
		case success:
			t.Errorf("answered %d; want a refusal (%s): %s", r.code, wantText(w), ellipsize(r.body))
			return
		case w.ok:
			t.Errorf("answered %d; want a success: %s", r.code, ellipsize(r.body))
			return
		}
		if r.code < 400 || r.code >= 500 || (w.code != 0 && r.code != w.code) {
			t.Errorf("answered %d; want %s: %s", r.code, wantText(w), ellipsize(r.body))
		}
		var e struct {
			Error string `json:"error"`
			Field string `json:"field"`
		}
		dec := json.NewDecoder(strings.NewReader(r.body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil || e.Error == "" || strings.TrimSpace(r.body[dec.InputOffset():]) != "" {
			t.Errorf("answer %d is not one JSON error object: %s", r.code, ellipsize(r.body))
			return
		}
		if w.field != "" && !slices.Contains(strings.Split(w.field, "|"), e.Field) {
			t.Errorf("error %q has field %q; want field %q", ellipsize(e.Error), e.Field, w.field)
		}
		for _, s := range w.says {
			if !strings.Contains(e.Error, s) {
				t.Errorf("error %q does not say %q", ellipsize(e.Error), s)
			}
		}
		return
	}
	switch {
	case r.code == 0 && (w.ok || w.either):
		return
	case r.code == 0:
		t.Errorf("exit 0; want a refusal (%s); stdout: %s", wantText(w), ellipsize(r.stdout))
		return
	case w.ok:
		t.Errorf("exit %d; want a success; stderr: %s", r.code, ellipsize(r.stderr))
		return
	}
	line := strings.TrimSuffix(r.stderr, "\n")
	if line == "" || strings.Contains(line, "\n") || !strings.HasPrefix(line, "cshare: ") {
		t.Errorf("exit %d with stderr %q; want one line, cshare: ...", r.code, ellipsize(r.stderr))
	}
	if r.stdout != "" {
		t.Errorf("a refusal also prints on stdout: %s", ellipsize(r.stdout))
	}
	for _, s := range w.says {
		flag, isFlag := strings.CutPrefix(s, "--")
		if !strings.Contains(line, s) && !(isFlag && strings.Contains(line, flag+":")) {
			t.Errorf("error %q does not say %q", ellipsize(line), s)
		}
	}
}

// errorText is the refusal a result holds: the CLI's line, or the API's
// error and field.
func errorText(r result) string {
	if r.body == "" {
		return strings.TrimSpace(r.stderr)
	}
	return strings.TrimSpace(r.body)
}

// sameAsUnknown runs c again with c.like for c.hides and checks that both
// are refused alike: a reference to what the asker may not see must read
// as one to nothing.
func (h *hostile) sameAsUnknown(t *testing.T, c hcase, r result) {
	t.Helper()
	swap := func(s string) string { return strings.ReplaceAll(s, c.hides, c.like) }
	u := c
	u.hides = ""
	if c.req != nil {
		req := *c.req
		req.path, req.body = swap(req.path), swap(req.body)
		u.req = &req
	} else {
		u.cli = nil
		for _, a := range c.cli {
			u.cli = append(u.cli, swap(a))
		}
	}
	var ur result
	if u.req != nil {
		ur = h.doWithin(t, u.as, u.req, u.limit())
	} else {
		ur = h.runCLI(t, u)
	}
	norm := func(s, ref string) string { return strings.ReplaceAll(s, ref, "REF") }
	got, unknown := norm(errorText(r), c.hides), norm(errorText(ur), c.like)
	if r.code != ur.code || got != unknown {
		t.Errorf("the answer tells what exists:\n  for %s: %d %s\n  for %s (nothing): %d %s",
			c.hides, r.code, ellipsize(got), c.like, ur.code, ellipsize(unknown))
	}
}

func wantText(w want) string {
	s := "a refusal"
	if w.code != 0 {
		s = fmt.Sprint(w.code)
	}
	if w.field != "" {
		s += " with field " + w.field
	}
	if len(w.says) > 0 {
		s += fmt.Sprintf(" saying %q", w.says)
	}
	return s
}

// outputFaults says what is wrong with any output: a raw control byte but
// \n and \t (a C1 control too), or more than 64 characters of a huge
// value echoed.
func outputFaults(r result) []string {
	var faults []string
	for _, o := range []string{r.stdout, r.stderr, r.body} {
		for i, c := range []byte(o) {
			if (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f {
				faults = append(faults, fmt.Sprintf("raw control byte 0x%02x at %d of the output: %q", c, i, ellipsize(o)))
				break
			}
		}
		for _, ru := range o {
			if ru >= 0x80 && ru <= 0x9f {
				faults = append(faults, fmt.Sprintf("raw C1 control U+%04X in the output: %q", ru, ellipsize(o)))
				break
			}
		}
		if strings.Contains(o, huge[:65]) {
			faults = append(faults, fmt.Sprintf("the output echoes more than 64 characters of a 10 KB value (%d bytes)", len(o)))
		}
	}
	return faults
}

// alive checks that every node still in the org answers its status.
func (h *hostile) alive(t *testing.T) {
	t.Helper()
	for i := range h.ps {
		if !h.active[i] {
			continue
		}
		r := h.do(t, i, get("/v1/status"))
		if r.code != 200 {
			t.Errorf("%s's node does not answer its status after the case: %d %s", personName[i], r.code, ellipsize(r.body))
		}
	}
}

// hashes reads the state hash of every node still in the org.
func (h *hostile) hashes(t *testing.T) map[string][]string {
	t.Helper()
	got := map[string][]string{}
	for i := range h.ps {
		if !h.active[i] {
			continue
		}
		r := h.do(t, i, get("/v1/org"))
		var o orgInfo
		if r.code != 200 || json.Unmarshal([]byte(r.body), &o) != nil {
			got["no answer"] = append(got["no answer"], personName[i])
			continue
		}
		got[o.StateHash] = append(got[o.StateHash], personName[i])
	}
	return got
}

// agree waits until every node still in the org has one state hash (10 s;
// 2 s while an earlier case left them apart).
func (h *hostile) agree(t *testing.T, name string) {
	t.Helper()
	d := 10 * time.Second
	if h.diverged != "" {
		d = 2 * time.Second
	}
	deadline := time.Now().Add(d)
	for {
		got := h.hashes(t)
		if len(got) <= 1 && got["no answer"] == nil { // none: no node left in the org
			h.diverged = ""
			return
		}
		if time.Now().After(deadline) {
			if h.diverged == "" {
				h.diverged = name
				t.Errorf("the nodes' state hashes differ %s after the case: %v", d, got)
			} else {
				t.Errorf("the nodes' state hashes still differ (since %q): %v", h.diverged, got)
			}
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// converged waits until the org's nodes have one state hash.
func (h *hostile) converged(t *testing.T, d time.Duration) {
	t.Helper()
	eventually(t, d, "one state hash on every node", func() bool {
		got := h.hashes(t)
		return len(got) == 1 && got["no answer"] == nil
	})
}

func ellipsize(s string) string {
	if len(s) > 600 {
		return s[:600] + fmt.Sprintf("… (%d bytes)", len(s))
	}
	return s
}

// isMember says whether p's node lists person as a member.
func (h *hostile) isMember(t *testing.T, p int, person string) bool {
	t.Helper()
	r := h.do(t, p, get("/v1/members"))
	var ms []member
	if r.code != 200 || json.Unmarshal([]byte(r.body), &ms) != nil {
		t.Fatalf("members on %s's node: %d %s", personName[p], r.code, ellipsize(r.body))
	}
	return findMember(ms, person) != nil
}

// fifo makes a named pipe in the scratch dir, and a cleanup that opens
// and closes it for writing, which ends a read blocked on it.
func (h *hostile) fifo(t *testing.T, name string) (string, func()) {
	t.Helper()
	p := filepath.Join(h.scratch, name)
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	return p, func() {
		if f, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	}
}

// inOrg says whether p's node reports an org.
func (h *hostile) inOrg(t *testing.T, p int) bool {
	t.Helper()
	r := h.do(t, p, get("/v1/status"))
	var st status
	return r.code == 200 && json.Unmarshal([]byte(r.body), &st) == nil && st.Org != ""
}

// stillMember checks that person p is a member on olive's node and p's
// node is in the org.
func (h *hostile) stillMember(t *testing.T, p int) {
	t.Helper()
	if !h.isMember(t, olive, h.person[p]) || !h.inOrg(t, p) {
		t.Errorf("%s is no longer a member (on olive's node: %v; %s's node in the org: %v)",
			personName[p], h.isMember(t, olive, h.person[p]), personName[p], h.inOrg(t, p))
	}
}

// orgStands checks that every node is still in the org after a refused
// org delete; if one is not, it is no longer checked.
func orgStands(t *testing.T, h *hostile, _ result) {
	t.Helper()
	for i := range h.ps {
		if h.active[i] && !h.inOrg(t, i) {
			t.Errorf("%s's node left the org", personName[i])
			h.active[i] = false
		}
	}
}

// contractIntact checks ann's contract on every node after a refused
// extension: running, ending in the future, with a cost of zero or more.
func (h *hostile) contractIntact(t *testing.T) {
	t.Helper()
	for i := range h.ps {
		if !h.active[i] || i == bob {
			continue
		}
		r := h.do(t, i, get("/v1/contracts/"+h.contract))
		var c contractRow
		if r.code != 200 || json.Unmarshal([]byte(r.body), &c) != nil {
			t.Errorf("contract show on %s's node: %d %s", personName[i], r.code, ellipsize(r.body))
			continue
		}
		end, err := time.Parse(time.RFC3339, c.End)
		if c.State != "running" || err != nil || !end.After(time.Now()) || c.Cost < 0 {
			t.Errorf("on %s's node the contract is %s, ends %q, costs %v", personName[i], c.State, c.End, c.Cost)
		}
	}
	noNegativeCost(t, h.do(t, olive, get("/v1/contract-usage")))
}

// noNegativeCost checks a contract-usage answer, if it is one, for costs
// below zero.
func noNegativeCost(t *testing.T, r result) {
	t.Helper()
	if r.code != 200 {
		return
	}
	var u struct {
		Renters, Hosts []struct {
			Person                         string
			Cost, ComputeCost, StorageCost float64 `json:",omitempty"`
		}
	}
	if err := json.Unmarshal([]byte(r.body), &u); err != nil {
		t.Errorf("usage: %v: %s", err, ellipsize(r.body))
	}
	for _, a := range append(u.Renters, u.Hosts...) {
		if a.Cost < 0 || a.ComputeCost < 0 || a.StorageCost < 0 {
			t.Errorf("usage: a negative cost: %s", ellipsize(r.body))
		}
	}
}

// selfRemoval checks person p's removal of their own person or machine
// (id): refused, it changed nothing; done, another machine (olive's)
// received it. Either way p's node is checked no more if it left.
func (h *hostile) selfRemoval(t *testing.T, p int, r result, id string) {
	t.Helper()
	gone := func() bool {
		if id == h.person[p] {
			return !h.isMember(t, olive, id)
		}
		rm := h.do(t, olive, get("/v1/machines/"+id))
		var m machine
		return rm.code == 404 || (json.Unmarshal([]byte(rm.body), &m) == nil && m.Status == "removed")
	}
	if r.code != 0 {
		if gone() || !h.inOrg(t, p) {
			t.Errorf("a refused self-removal changed something: gone on olive's node %v, %s's node in the org %v", gone(), personName[p], h.inOrg(t, p))
		}
		if !h.inOrg(t, p) {
			h.active[p] = false
		}
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for !gone() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if !gone() {
		t.Errorf("%s's self-removal succeeded (%q) but never reached olive's node", personName[p], strings.TrimSpace(r.stdout))
	}
	// Removed, p's node leaves the org: it is checked no more.
	for h.inOrg(t, p) && time.Now().Before(deadline.Add(10*time.Second)) {
		time.Sleep(50 * time.Millisecond)
	}
	if h.inOrg(t, p) {
		t.Errorf("%s's node is still in the org after removing itself", personName[p])
	}
	h.active[p] = false
}

// TestHostileOutputFaults: the check every hostile case's output passes
// finds what it must, and only that.
func TestHostileOutputFaults(t *testing.T) {
	for _, c := range []struct {
		out    string
		faulty bool
	}{
		{"one line\n\ttabbed, ünïcode ✓\n", false},
		{huge[:64] + "…", false},
		{"a\x1b[2J", true},
		{"bell\x07", true},
		{"cr\r", true},
		{"nul\x00", true},
		{"del\x7f", true},
		{"csi\u009b2J", true},
		{huge[:65], true},
	} {
		for _, r := range []result{{stdout: c.out}, {stderr: c.out}, {body: c.out}} {
			if got := outputFaults(r); (len(got) > 0) != c.faulty {
				t.Errorf("outputFaults(%q) = %q; want faulty %v", c.out, got, c.faulty)
			}
		}
	}
}

// TestHostileFast runs the fast subset of the hostile cases (make test);
// under the e2e tag TestHostile runs them all instead.
func TestHostileFast(t *testing.T) {
	if fullHostile {
		t.Skip("the e2e tag is set: TestHostile runs every hostile case")
	}
	runHostile(t, func(c hcase) bool { return c.fast })
}
