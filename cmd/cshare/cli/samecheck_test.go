package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cshare/cshare/node"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/runtime"
	"github.com/cshare/cshare/runtime/hw"
)

// realNode is a real in-process node (fake driver, no GPUs) that owns an
// org, and its data dir for the CLI.
type realNode struct {
	*node.Node
	dataDir, addr, token string
}

func startRealNode(t *testing.T) *realNode {
	t.Helper()
	dir := t.TempDir()
	n, err := node.Start(context.Background(), node.Options{DataDir: dir, API: "127.0.0.1:0", Listen: []string{"/ip4/127.0.0.1/tcp/0"},
		HeartbeatInterval: time.Second, Name: "check", NVML: hw.NoNVML{}, Driver: runtime.NewFake(), DisableMDNS: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	rn := &realNode{Node: n, dataDir: dir}
	for name, v := range map[string]*string{api.AddrFile: &rn.addr, api.TokenFile: &rn.token} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		*v = strings.TrimSpace(string(b))
	}
	if r := rn.run("org", "create", "--name", "check"); r.code != 0 {
		t.Fatalf("org create: %d %s", r.code, r.stderr)
	}
	return rn
}

func (n *realNode) run(args ...string) result {
	return runCLI(append([]string{"--data-dir", n.dataDir}, args...)...)
}

// post sends body as is to the node's API.
func (n *realNode) post(t *testing.T, path, body string) (int, api.Error) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+n.addr+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+n.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	var e api.Error
	if err := json.Unmarshal(buf.Bytes(), &e); err != nil {
		t.Fatalf("POST %s: %d %q is not a JSON error: %v", path, resp.StatusCode, buf.String(), err)
	}
	return resp.StatusCode, e
}

// cliErrRE takes a CLI error line apart: "cshare: FIELD: MESSAGE (see ...)".
var cliErrRE = regexp.MustCompile(`^cshare: ([^:]+): (.*) \(see cshare job submit --help\)\n$`)

// flagOf is the CLI's name for a job spec field: its flag (the command has
// none).
func flagOf(field string) string {
	if field == "cmd" {
		return field
	}
	return "--" + strings.ReplaceAll(field, "_", "-")
}

// TestSameChecksCLIAndAPI: one bad job spec, given to `cshare job submit`
// or POSTed straight to /v1/jobs, is refused with the same field (the
// flag, in the CLI) and the same message. Rows with no CLI arguments or no
// body are what only one side can express.
func TestSameChecksCLIAndAPI(t *testing.T) {
	n := startRealNode(t)
	cases := []struct {
		name  string
		cli   []string // job submit's arguments; nil: the CLI cannot say it
		body  string   // the POST /v1/jobs body; "": the API cannot say it
		field string   // the spec field both name
		want  string   // the message after "field: "
	}{
		{"empty command", []string{"--"}, `{"cmd":[]}`, "cmd", "[] is empty; give the job's command after --"},
		{"no command at all", []string{"--range", "1-3"}, `{}`, "cmd", "[] is empty"},
		{"empty argument zero", []string{"--", ""}, `{"cmd":[""]}`, "cmd", `"" is not a program; the first word of the command must not be blank`},
		{"blank argument zero", []string{"--", "  ", "x"}, `{"cmd":["  ","x"]}`, "cmd", `"  " is not a program`},
		{"cores 1e9", []string{"--cores", "1e9", "--", "true"}, `{"cmd":["true"],"cores_milli":1000000000000}`, "cores",
			"1000000000 is above the maximum 4096; allowed: 0.001 to 4096 cores per instance"},
		{"cores 4097", []string{"--cores", "4097", "--", "true"}, `{"cmd":["true"],"cores_milli":4097000}`, "cores", "4097 is above the maximum 4096"},
		{"cores negative", []string{"--cores", "-0.5", "--", "true"}, `{"cmd":["true"],"cores_milli":-500}`, "cores", "-0.5 is below the minimum 0.001"},
		// Below one millicore: the API's unit cannot hold it.
		{"cores 0.0001", []string{"--cores", "0.0001", "--", "true"}, "", "cores", "0.0001 is below the minimum 0.001; allowed: 0.001 to 4096 cores"},
		{"memory 17179869184g", []string{"--memory", "17179869184g", "--", "true"}, `{"cmd":["true"],"memory_mb":17592186044416}`, "memory",
			"16 EiB is above the maximum 16 TiB; allowed: a size like 512m, 2g or 4GiB, from 4 MiB to 16 TiB"},
		{"memory 3m", []string{"--memory", "3m", "--", "true"}, `{"cmd":["true"],"memory_mb":3}`, "memory", "3 MiB is below the minimum 4 MiB"},
		{"memory negative", nil, `{"cmd":["true"],"memory_mb":-1}`, "memory", "-1 MiB is below the minimum 4 MiB"},
		{"priority 1e9", []string{"--priority", "1e9", "--", "true"}, `{"cmd":["true"],"priority":1000000000}`, "priority",
			"1000000000 is above the maximum 9999; allowed: 1 (the highest) to 9999 (the lowest)"},
		{"priority 10000", []string{"--priority", "10000", "--", "true"}, `{"cmd":["true"],"priority":10000}`, "priority", "10000 is above the maximum 9999"},
		{"priority negative", []string{"--priority", "-3", "--", "true"}, `{"cmd":["true"],"priority":-3}`, "priority", "-3 is below the minimum 1"},
		{"range overflow", []string{"--range", "0-9223372036854775807", "--", "true"}, `{"cmd":["true"],"range_start":0,"range_end":9223372036854775807}`, "range",
			"0-9223372036854775807 has 9223372036854775808 items, above the maximum 1000000"},
		{"range too long", []string{"--range", "1-1000001", "--", "true"}, `{"cmd":["true"],"range_start":1,"range_end":1000001}`, "range", "1-1000001 has 1000001 items, above the maximum 1000000"},
		{"range empty", []string{"--range", "5-1", "--", "true"}, `{"cmd":["true"],"range_start":5,"range_end":1}`, "range", "5-1 is empty; the start must not exceed the end"},
		{"range beyond int64", []string{"--range", "1-99999999999999999999", "--", "true"}, "", "range", "has a number above the maximum 9223372036854775807"},
		{"range_end beyond int64", nil, `{"cmd":["true"],"range_end":99999999999999999999}`, "range_end", "number 99999999999999999999 is not a whole number in the 64-bit range"},
		{"cpus -1", []string{"--cpus", "-1", "--", "true"}, `{"cmd":["true"],"cpus":-1}`, "cpus", "-1 is below the minimum 1"},
		{"cpus 1e7", []string{"--cpus", "1e7", "--", "true"}, `{"cmd":["true"],"cpus":10000000}`, "cpus", "10000000 is above the maximum 1048576"},
		{"max_cpus -2", []string{"--max-cpus", "-2", "--", "true"}, `{"cmd":["true"],"max_cpus":-2}`, "max_cpus", "-2 is below the minimum -1"},
		{"gpus 65", []string{"--gpus", "65", "--", "true"}, `{"cmd":["true"],"gpus":65}`, "gpus", "65 is above the maximum 64"},
		{"retries 101", []string{"--retries", "101", "--", "true"}, `{"cmd":["true"],"retries":101}`, "retries", "101 is above the maximum 100"},
		{"driver", []string{"--driver", "podman", "--", "true"}, `{"cmd":["true"],"driver":"podman"}`, "driver", `"podman" is not a driver; allowed: docker, exec`},
		{"empty env name", []string{"--env", "=x", "--", "true"}, `{"cmd":["true"],"env":{"":"x"}}`, "env", `"" is an empty name; allowed: letters, digits and _`},
		{"reserved env name", []string{"--env", "CSHARE_ITEM=1", "--", "true"}, `{"cmd":["true"],"env":{"CSHARE_ITEM":"1"}}`, "env", `"CSHARE_ITEM" is reserved`},
		// Text a process cannot take: NUL bytes, and bytes that are not
		// UTF-8 (which JSON would have turned into U+FFFD).
		{"NUL in cmd", nil, `{"cmd":["echo","a\u0000b"]}`, "cmd", `"a\x00b" (word 2 of the command) holds a NUL byte at byte 1`},
		{"NUL in env", nil, `{"cmd":["true"],"env":{"A":"x\u0000"}}`, "env", `"x\x00" (A's value) holds a NUL byte at byte 1`},
		{"bad UTF-8 in cmd (CLI)", []string{"--", "echo", "a\xffb"}, "", "cmd", `"a\xffb" (word 2 of the command) is not valid UTF-8 at byte 1`},
		{"bad UTF-8 in cmd (API)", nil, "{\"cmd\":[\"echo\",\"a\xffb\"]}", "cmd", "holds bytes that are not valid UTF-8 (at byte 17 of the request body)"},
		{"bad UTF-8 in env (CLI)", []string{"--env", "A=\xc3", "--", "true"}, "", "env", `"\xc3" (A's value) is not valid UTF-8 at byte 0`},
		{"bad UTF-8 in env (API)", nil, "{\"cmd\":[\"true\"],\"env\":{\"A\":\"\xc3\"}}", "env", "holds bytes that are not valid UTF-8"},
		{"lone surrogate in cmd", nil, `{"cmd":["echo","\ud800"]}`, "cmd", `holds \ud800, a UTF-16 surrogate escape without its pair`},
		// The image, as Docker reads it, before any machine pulls it.
		{"image ../x", []string{"--image", "../x", "--", "true"}, `{"cmd":["true"],"image":"../x"}`, "image", `"../x" is not an image reference`},
		{"image BusyBox:Latest", []string{"--image", "BusyBox:Latest", "--", "true"}, `{"cmd":["true"],"image":"BusyBox:Latest"}`, "image",
			`"BusyBox:Latest" has upper-case letters where Docker takes lower case only`},
		{"image 10 KB", []string{"--image", strings.Repeat("a", 10240), "--", "true"}, `{"cmd":["true"],"image":"` + strings.Repeat("a", 10240) + `"}`, "image",
			`"` + strings.Repeat("a", 64) + `…" (10240 bytes) is too long`},
		// A name with a control character names its field in the API too.
		{"name with ESC", []string{"--name", "a\x1bb", "--", "true"}, `{"cmd":["true"],"name":"a\u001bb"}`, "name", `"a\x1bb" holds a control character (U+001B)`},
		// Too large for one ledger entry: said naming --env, not as
		// "entry too large: N bytes, limit 65536".
		{"env too large", []string{"--env", "A=" + strings.Repeat("x", 100000), "--", "true"}, `{"cmd":["true"],"env":{"A":"` + strings.Repeat("x", 100000) + `"}}`, "env",
			"100008 bytes (command 5, env 100003) is too large"},
		{"trailing data", nil, `{"cmd":["true"]} {"x":1}`, "", "unexpected data after the JSON value at byte 16; send one JSON object"},
		{"unknown key", nil, `{"cmd":["true"],"range":"1-3"}`, "range", `unknown field "range"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var cliMsg, apiMsg string
			if c.cli != nil {
				r := n.run(append([]string{"job", "submit"}, c.cli...)...)
				m := cliErrRE.FindStringSubmatch(r.stderr)
				if r.code != 2 || m == nil || r.stdout != "" {
					t.Fatalf("cli %q: exit %d, stdout %q, stderr %q; want exit 2 and one line naming %s", c.cli, r.code, r.stdout, r.stderr, flagOf(c.field))
				}
				if m[1] != flagOf(c.field) || !strings.Contains(m[2], c.want) {
					t.Errorf("cli %q: %q: want %s: ...%s...", c.cli, r.stderr, flagOf(c.field), c.want)
				}
				cliMsg = m[2]
			}
			if c.body != "" {
				code, e := n.post(t, "/v1/jobs", c.body)
				if code != http.StatusBadRequest || e.Field != c.field || strings.Contains(e.Error, "\n") {
					t.Fatalf("api %s: %d %+v; want 400 naming field %q", c.body, code, e, c.field)
				}
				// The message after "field: " (or, for a body that does not
				// decode, after "request body: ").
				var ok bool
				if apiMsg, ok = strings.CutPrefix(e.Error, c.field+": "); c.field == "" || !ok {
					apiMsg, _ = strings.CutPrefix(e.Error, "request body: ")
				}
				if !strings.Contains(apiMsg, c.want) {
					t.Errorf("api %s: %q: want ...%s...", c.body, e.Error, c.want)
				}
			}
			if c.cli != nil && c.body != "" && cliMsg != apiMsg {
				t.Errorf("the CLI and the API differ:\ncli %q\napi %q", cliMsg, apiMsg)
			}
		})
	}
	var jobs []api.JobInfo
	if r := n.run("job", "ls", "--json"); r.code != 0 || json.Unmarshal([]byte(r.stdout), &jobs) != nil || len(jobs) != 0 {
		t.Fatalf("refused submissions left jobs: %d %s %s", r.code, r.stdout, r.stderr)
	}
}

// TestSubmitUnfitWarns: a job no machine of the org fits, for GPUs, cores
// or memory alike, is accepted; the CLI warns on stderr naming the
// resource and the largest machine's value, keeps the job ID as the last
// line of stdout, and job show gives the same reason.
func TestSubmitUnfitWarns(t *testing.T) {
	n := startRealNode(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--gpus", "1"}, "1 GPU per instance, above the largest machine's 0"},
		{[]string{"--cores", "4096"}, "4096 cores per instance, above the largest machine's "},
		{[]string{"--memory", "16t"}, "16 TiB memory per instance, above the largest machine's "},
	} {
		r := n.run(append(append([]string{"job", "submit"}, c.args...), "--", "true")...)
		if r.code != 0 {
			t.Fatalf("%q: exit %d, stderr %q; want it accepted", c.args, r.code, r.stderr)
		}
		if !strings.HasPrefix(r.stderr, "warning: ") || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%q: stderr %q; want one warning line with %q", c.args, r.stderr, c.want)
		}
		id := r.lastLine()
		deadline := time.Now().Add(30 * time.Second)
		for {
			var j api.JobInfo
			s := n.run("job", "show", id, "--json")
			if s.code == 0 && json.Unmarshal([]byte(s.stdout), &j) == nil && strings.HasPrefix(j.Reason, "requirements_not_met: ") && strings.Contains(j.Reason, c.want) {
				if h := n.run("job", "show", id); !strings.Contains(h.stdout, c.want) {
					t.Errorf("job show lacks the reason %q:\n%s", c.want, h.stdout)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%q: job show %s: reason %q, stderr %q; want requirements_not_met naming %q", c.args, id, j.Reason, s.stderr, c.want)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if r := n.run("job", "cancel", id); r.code != 0 {
			t.Fatalf("cancel: %s", r.stderr)
		}
	}
	// A job that fits is not warned about; job show speaks in cores and
	// sizes.
	r := n.run("job", "submit", "--cores", "0.5", "--memory", "512m", "--", "true")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	if s := n.run("job", "show", r.lastLine()); !strings.Contains(s.stdout, "0.5 cores, 512 MiB memory") {
		t.Errorf("job show:\n%s", s.stdout)
	}
}
