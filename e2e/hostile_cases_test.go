package e2e

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// hostileCases is the probe's table, in the order it runs: the cases that
// may take a node or the org away (if a defect lets them) come last.
// Persons: olive is the owner, on the host; ann and bob are members. A
// refusal is one line on stderr (CLI) or one JSON error (API), naming the
// flag or the field at fault; "no such ..." for what the asker may not see.
func hostileCases(t *testing.T, h *hostile) []hcase {
	esc := url.PathEscape
	a := canary(ann)
	aJob, bJob, oJob := h.job[ann], h.job[bob], h.job[olive]
	ct := h.contract
	// References of the shapes of a job's, a contract's and a dataset's
	// that never existed (a CID of "hello world" as a raw leaf).
	const (
		fakeJob      = "000000000000"
		fakeContract = "c000000000000"
		strangerCID  = "bafkreifzjut3te2nhyekklss27nh3k72ysco7y32koao5eei66wof36n5e"
	)
	fifo, unblock := h.fifo(t, "pipe.car")
	notCAR := filepath.Join(h.scratch, "not.car")
	exists := filepath.Join(h.scratch, "exists")
	for _, f := range []string{notCAR, exists} {
		if err := os.WriteFile(f, []byte("not a CAR file\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out := func(name string) string { return filepath.Join(h.scratch, name) }
	absent := func(path string) func(*testing.T, *hostile, result) {
		return func(t *testing.T, _ *hostile, _ result) {
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Errorf("a refused command left %s behind (%v)", path, err)
			}
		}
	}
	// A plaintext export of ann's person, readable by everyone, and a
	// fresh data dir to import it into (user commands need no node).
	loose := out("ann.person")
	h.ps[ann].must("user", "export", "--out", loose)
	if err := os.Chmod(loose, 0o666); err != nil {
		t.Fatal(err)
	}
	garbage := out("garbage.person")
	if err := os.WriteFile(garbage, []byte(huge), 0o600); err != nil {
		t.Fatal(err)
	}
	badPlan := out("plan.json")
	if err := os.WriteFile(badPlan, []byte(`{"machines": [{"cores": 9223372036854775807, "slots": -1}], "jobs": "x"`), 0o600); err != nil {
		t.Fatal(err)
	}
	fresh := func(name string) string { return filepath.Join(h.scratch, "fresh-"+name) }
	bigBody := `{"cmd":["` + strings.Repeat("Q", 2<<20) + `"]}`
	jobJSON := func(extra string) string { return `{"driver":"exec","cmd":["true"]` + extra + `}` }
	// ctJSON is a contract request for olive's offer with fields added.
	ctJSON := func(fields string) string {
		return `{"offer":"` + h.offer + `","image":"cshare-busybox:latest"` + fields + `}`
	}
	offerJSON := func(extra string) string { return `{"price":"0.1","cpus":1,"memory_mb":64,"disk_mb":0` + extra + `}` }

	return []hcase{
		// Job submit through the CLI: every bad flag is named.
		{name: "cli/job submit --priority -1", as: ann, cli: args("job", "submit", "--driver", "exec", "--priority", "-1", "--", "true"), want: refused("--priority")},
		{name: "cli/job submit --priority 2^64", as: ann, cli: args("job", "submit", "--driver", "exec", "--priority", "18446744073709551616", "--", "true"), want: refused("--priority")},
		{name: "cli/job submit --range 1-2^63-1", as: ann, fast: true, cli: args("job", "submit", "--driver", "exec", "--range", "1-9223372036854775807", "--", "true"), want: refused("--range")},
		{name: "cli/job submit --range backwards", as: ann, cli: args("job", "submit", "--driver", "exec", "--range", "5-1", "--", "true"), want: refused("--range")},
		{name: "cli/job submit --range negative", as: ann, cli: args("job", "submit", "--driver", "exec", "--range", "-3", "--", "true"), want: refused("--range")},
		{name: "cli/job submit --range one past the maximum", as: ann, cli: args("job", "submit", "--driver", "exec", "--range", "1-1000001", "--", "true"), want: refused("--range")},
		{name: "cli/job submit --cpus 2^63-1", as: ann, cli: args("job", "submit", "--driver", "exec", "--cpus", "9223372036854775807", "--", "true"), want: refused("--cpus")},
		{name: "cli/job submit --cpus -1", as: ann, cli: args("job", "submit", "--driver", "exec", "--cpus", "-1", "--", "true"), want: refused("--cpus")},
		{name: "cli/job submit --cores -1", as: ann, cli: args("job", "submit", "--driver", "exec", "--cores", "-1", "--", "true"), want: refused("--cores")},
		{name: "cli/job submit --cores 1e300", as: ann, cli: args("job", "submit", "--driver", "exec", "--cores", "1e300", "--", "true"), want: refused("--cores")},
		{name: "cli/job submit --cores NaN", as: ann, cli: args("job", "submit", "--driver", "exec", "--cores", "NaN", "--", "true"), want: refused("--cores")},
		{name: "cli/job submit --memory -5m", as: ann, cli: args("job", "submit", "--driver", "exec", "--memory", "-5m", "--", "true"), want: refused("--memory")},
		{name: "cli/job submit --memory 2^70 bytes", as: ann, cli: args("job", "submit", "--driver", "exec", "--memory", "99999999999999999999g", "--", "true"), want: refused("--memory")},
		{name: "cli/job submit --gpus -1", as: ann, cli: args("job", "submit", "--driver", "exec", "--gpus", "-1", "--", "true"), want: refused("--gpus")},
		{name: "cli/job submit --retries 101", as: ann, cli: args("job", "submit", "--driver", "exec", "--retries", "101", "--", "true"), want: refused("--retries")},
		{name: "cli/job submit --max-cpus -2", as: ann, cli: args("job", "submit", "--driver", "exec", "--max-cpus", "-2", "--", "true"), want: refused("--max-cpus")},
		{name: "cli/job submit --image ../x", as: bob, fast: true, cli: args("job", "submit", "--image", "../x", "--", "true"), want: refused("--image")},
		{name: "cli/job submit --image BusyBox:Latest", as: bob, cli: args("job", "submit", "--image", "BusyBox:Latest", "--", "true"), want: refused("--image")},
		{name: "cli/job submit --image 10 KB", as: bob, fast: true, cli: args("job", "submit", "--image", huge, "--", "true"), want: refused("--image")},
		{name: "cli/job submit --image ../x on a machine without Docker", as: ann, cli: args("job", "submit", "--image", "../x", "--", "true"), want: want{either: true, says: []string{"--image"}}},
		{name: "cli/job submit --image 10 KB on a machine without Docker", as: ann, cli: args("job", "submit", "--image", huge, "--", "true"), want: want{either: true, says: []string{"--image"}}},
		{name: "cli/job submit --driver ../../bin/sh", as: ann, cli: args("job", "submit", "--driver", "../../bin/sh", "--", "true"), want: refused("--driver")},
		{name: "cli/job submit --env without =", as: ann, cli: args("job", "submit", "--driver", "exec", "--env", "NOVALUE", "--", "true"), want: refused("--env")},
		{name: "cli/job submit --env invalid UTF-8", as: ann, fast: true, cli: args("job", "submit", "--driver", "exec", "--env", "A=\xff\xfe", "--", "true"), want: refused("--env")},
		{name: "cli/job submit --env 10 KB name", as: ann, cli: args("job", "submit", "--driver", "exec", "--env", huge+"=1", "--", "true"), want: want{either: true, says: []string{"--env"}}},
		{name: "cli/job submit cmd invalid UTF-8", as: ann, fast: true, cli: args("job", "submit", "--driver", "exec", "--", "echo", "\xff\xfe"), want: refused("cmd")},
		{name: "cli/job submit no cmd", as: ann, cli: args("job", "submit", "--driver", "exec"), want: refused("cmd")},
		{name: "cli/job submit --name 10 KB", as: ann, cli: args("job", "submit", "--driver", "exec", "--name", huge, "--", "true"), want: refused("--name")},
		{name: "cli/job submit --name with a newline and ESC", as: ann, cli: args("job", "submit", "--driver", "exec", "--name", "a\nb\x1b[2J", "--", "true"), want: refused("--name")},
		{name: "cli/job submit --dataset ../x", as: ann, cli: args("job", "submit", "--driver", "exec", "--dataset", "../x", "--", "true"), want: refused("--dataset")},
		{name: "cli/job submit --dataset mount at ../../etc", as: ann, cli: args("job", "submit", "--driver", "exec", "--dataset", "shared:../../etc", "--", "true"), want: refused("--dataset")},
		{name: "cli/job submit --dataset bob's private one", as: ann, fast: true, cli: args("job", "submit", "--driver", "exec", "--dataset", h.privDS[bob]+":/data", "--", "true"), want: refused("--dataset"), hides: h.privDS[bob], like: strangerCID},
		{name: "cli/job submit unknown flag", as: ann, cli: args("job", "submit", "--bogus", "--", "true"), want: refused("--bogus")},
		{name: "cli/job submit cmd with ESC, then shown escaped", as: ann, cli: args("job", "submit", "--driver", "exec", "--json", "--", "printf", "\x1b[2J\x07"), want: ok()},

		// Job submit through the raw API: the field at fault is named.
		{name: "api/jobs malformed JSON", as: bob, fast: true, req: post("/v1/jobs", `{"cmd":["true"]`), want: refusedAPI(400, "")},
		{name: "api/jobs trailing comma", as: bob, req: post("/v1/jobs", `{"cmd":["true"],}`), want: refusedAPI(400, "")},
		{name: "api/jobs a list for a body", as: bob, req: post("/v1/jobs", `[1,2]`), want: refusedAPI(400, "")},
		{name: "api/jobs a string for a body", as: bob, req: post("/v1/jobs", `"true"`), want: refusedAPI(400, "")},
		{name: "api/jobs two JSON values", as: bob, req: post("/v1/jobs", jobJSON("")+jobJSON("")), want: refusedAPI(400, "")},
		{name: "api/jobs null body", as: bob, req: post("/v1/jobs", `null`), want: refusedAPI(400, "cmd")},
		{name: "api/jobs empty object", as: bob, req: post("/v1/jobs", `{}`), want: refusedAPI(400, "cmd")},
		{name: "api/jobs empty cmd", as: bob, req: post("/v1/jobs", `{"driver":"exec","cmd":[]}`), want: refusedAPI(400, "cmd")},
		{name: "api/jobs cmd a string", as: bob, req: post("/v1/jobs", `{"driver":"exec","cmd":"true"}`), want: refusedAPI(400, "cmd")},
		{name: "api/jobs env a list", as: bob, req: post("/v1/jobs", jobJSON(`,"env":["A=1"]`)), want: refusedAPI(400, "env")},
		{name: "api/jobs priority a string", as: bob, req: post("/v1/jobs", jobJSON(`,"priority":"high"`)), want: refusedAPI(400, "priority")},
		{name: "api/jobs priority 1e400", as: bob, req: post("/v1/jobs", jobJSON(`,"priority":1e400`)), want: refusedAPI(400, "priority")},
		{name: "api/jobs priority 2^63", as: bob, req: post("/v1/jobs", jobJSON(`,"priority":9223372036854775808`)), want: refusedAPI(400, "priority")},
		{name: "api/jobs priority 10000", as: bob, req: post("/v1/jobs", jobJSON(`,"priority":10000`)), want: refusedAPI(400, "priority")},
		{name: "api/jobs max_cpus 1.5", as: bob, req: post("/v1/jobs", jobJSON(`,"max_cpus":1.5`)), want: refusedAPI(400, "max_cpus")},
		{name: "api/jobs max_cpus -2", as: bob, req: post("/v1/jobs", jobJSON(`,"max_cpus":-2`)), want: refusedAPI(400, "max_cpus")},
		{name: "api/jobs unknown field", as: bob, req: post("/v1/jobs", jobJSON(`,"bogus":1`)), want: refusedAPI(400, "bogus")},
		{name: "api/jobs NUL in cmd", as: bob, fast: true, req: post("/v1/jobs", `{"driver":"exec","cmd":["echo","a\u0000b"]}`), want: refusedAPI(400, "cmd")},
		{name: "api/jobs invalid UTF-8 in cmd", as: bob, fast: true, req: post("/v1/jobs", "{\"driver\":\"exec\",\"cmd\":[\"echo\",\"\xff\xfe\"]}"), want: refusedAPI(400, "cmd")},
		{name: "api/jobs NUL in env", as: bob, fast: true, req: post("/v1/jobs", jobJSON(`,"env":{"A":"x\u0000y"}`)), want: refusedAPI(400, "env")},
		{name: "api/jobs invalid UTF-8 in env", as: bob, req: post("/v1/jobs", jobJSON(",\"env\":{\"A\":\"\xc3\"}")), want: refusedAPI(400, "env")},
		{name: "api/jobs env name with =", as: bob, req: post("/v1/jobs", jobJSON(`,"env":{"A=B":"c"}`)), want: refusedAPI(400, "env")},
		{name: "api/jobs env name empty", as: bob, req: post("/v1/jobs", jobJSON(`,"env":{"":"c"}`)), want: refusedAPI(400, "env")},
		{name: "api/jobs range_start -5", as: bob, req: post("/v1/jobs", jobJSON(`,"range_start":-5,"range_end":1`)), want: refusedAPI(400, "range")},
		{name: "api/jobs range_end 2^63-1", as: bob, req: post("/v1/jobs", jobJSON(`,"range_start":1,"range_end":9223372036854775807`)), want: refusedAPI(400, "range")},
		{name: "api/jobs range -2^63..2^63-1", as: bob, req: post("/v1/jobs", jobJSON(`,"range_start":-9223372036854775808,"range_end":9223372036854775807`)), want: refusedAPI(400, "range")},
		{name: "api/jobs cores_milli -1", as: bob, req: post("/v1/jobs", jobJSON(`,"cores_milli":-1`)), want: refusedAPI(400, "cores")},
		{name: "api/jobs memory_mb 2^63-1", as: bob, req: post("/v1/jobs", jobJSON(`,"memory_mb":9223372036854775807`)), want: refusedAPI(400, "memory")},
		{name: "api/jobs gpus 2^63-1", as: bob, req: post("/v1/jobs", jobJSON(`,"gpus":9223372036854775807`)), want: refusedAPI(400, "gpus")},
		{name: "api/jobs cpus 2^63-1", as: bob, req: post("/v1/jobs", jobJSON(`,"cpus":9223372036854775807`)), want: refusedAPI(400, "cpus")},
		{name: "api/jobs retries 2^63-1", as: bob, req: post("/v1/jobs", jobJSON(`,"retries":9223372036854775807`)), want: refusedAPI(400, "retries")},
		{name: "api/jobs name 10 KB", as: bob, fast: true, req: post("/v1/jobs", jobJSON(`,"name":"`+huge+`"`)), want: refusedAPI(400, "name")},
		{name: "api/jobs image ../x", as: bob, req: post("/v1/jobs", `{"image":"../x","cmd":["true"]}`), want: refusedAPI(400, "image")},
		{name: "api/jobs driver unknown", as: bob, req: post("/v1/jobs", `{"driver":"qemu","cmd":["true"]}`), want: refusedAPI(400, "driver")},
		{name: "api/jobs datasets ../x", as: bob, req: post("/v1/jobs", jobJSON(`,"datasets":["../x:/data"]`)), want: refusedAPI(0, "datasets|dataset")},
		{name: "api/jobs 100 KB cmd (entry too large)", as: bob, fast: true, req: post("/v1/jobs", `{"driver":"exec","cmd":["echo","`+strings.Repeat("Q", 100<<10)+`"]}`), want: refusedAPI(400, "cmd")},
		{name: "api/jobs 100 KB env value", as: bob, req: post("/v1/jobs", jobJSON(`,"env":{"A":"`+strings.Repeat("Q", 100<<10)+`"}`)), want: refusedAPI(400, "env")},
		{name: "api/jobs body over 1 MiB", as: bob, fast: true, req: post("/v1/jobs", bigBody), want: refusedAPI(413, "")},
		{name: "api/jobs body over 1 MiB, chunked", as: bob, req: &apiReq{method: "POST", path: "/v1/jobs", body: bigBody, chunked: true}, want: refusedAPI(413, "")},

		// Another person's job: "no such job", as job show says, for every
		// verb; their data nowhere in the answer.
		{name: "cli/job show: ann's job, by bob", as: bob, fast: true, cli: args("job", "show", aJob), want: refused("no such job"), hides: aJob, like: fakeJob},
		{name: "cli/job cancel: ann's job, by bob", as: bob, fast: true, cli: args("job", "cancel", aJob), want: refused("no such job"), hides: aJob, like: fakeJob},
		{name: "cli/job modify: ann's job, by bob", as: bob, fast: true, cli: args("job", "modify", aJob, "--priority", "1"), want: refused("no such job"), hides: aJob, like: fakeJob},
		{name: "cli/job logs: ann's job, by bob", as: bob, cli: args("job", "logs", aJob), want: refused("no such job"), hides: aJob, like: fakeJob},
		{name: "cli/job items: ann's job, by bob", as: bob, cli: args("job", "items", aJob), want: refused("no such job"), hides: aJob, like: fakeJob},
		{name: "cli/job cancel: bob's running job, by ann", as: ann, cli: args("job", "cancel", h.running), want: refused("no such job"), hides: h.running, like: fakeJob},
		{name: "cli/job modify: bob's running job, by ann", as: ann, cli: args("job", "modify", h.running, "--max-cpus", "5"), want: refused("no such job"), hides: h.running, like: fakeJob},
		{name: "cli/job logs: bob's job, by ann", as: ann, cli: args("job", "logs", bJob), want: refused("no such job"), hides: bJob, like: fakeJob},
		{name: "cli/job show --explain: ann's job, by bob", as: bob, cli: args("job", "show", aJob, "--explain"), want: refused("no such job"), hides: aJob, like: fakeJob},
		{name: "api/job explain: ann's job, by bob", as: bob, req: get("/v1/jobs/" + aJob + "/explain"), want: refusedAPI(404, "", "no such job"), hides: aJob, like: fakeJob},
		{name: "cli/job show: olive's job, by ann", as: ann, cli: args("job", "show", oJob), want: refused("no such job"), hides: oJob, like: fakeJob},
		{name: "cli/job show: a prefix of ann's job, by bob", as: bob, cli: args("job", "show", aJob[:len(aJob)-4]), want: refused("no such job")},
		{name: "cli/job ls: bob's own only", as: bob, fast: true, cli: args("job", "ls", "--json"), want: ok()},
		{name: "cli/job ls: ann's own only", as: ann, cli: args("job", "ls"), want: ok()},
		{name: "api/job show: ann's job, by bob", as: bob, req: get("/v1/jobs/" + aJob), want: refusedAPI(404, "", "no such job"), hides: aJob, like: fakeJob},
		{name: "api/job cancel: ann's job, by bob", as: bob, fast: true, req: post("/v1/jobs/"+aJob+"/cancel", ""), want: refusedAPI(404, "", "no such job"), hides: aJob, like: fakeJob},
		{name: "api/job modify: ann's job, by bob", as: bob, req: post("/v1/jobs/"+aJob+"/modify", `{"priority":1}`), want: refusedAPI(404, "", "no such job"), hides: aJob, like: fakeJob},
		{name: "api/job logs: ann's job, by bob", as: bob, req: get("/v1/jobs/" + aJob + "/logs?item=1"), want: refusedAPI(404, "", "no such job"), hides: aJob, like: fakeJob},
		{name: "api/job items: ann's job, by bob", as: bob, req: get("/v1/jobs/" + aJob + "/items"), want: refusedAPI(404, "", "no such job"), hides: aJob, like: fakeJob},
		{name: "api/jobs: bob's own only", as: bob, req: get("/v1/jobs"), want: ok()},
		{name: "cli/job show: olive (admin) reads ann's job", as: olive, cli: args("job", "show", aJob, "--json"), want: ok(),
			then: func(t *testing.T, _ *hostile, r result) {
				if !strings.Contains(r.stdout, a+"-job") {
					t.Errorf("the admin does not see ann's job: %s", ellipsize(r.stdout))
				}
			}},
		{name: "cli/job logs: ann reads her own", as: ann, cli: args("job", "logs", aJob), want: ok(),
			then: func(t *testing.T, _ *hostile, r result) {
				if !strings.Contains(r.stdout, a+"-job-out") {
					t.Errorf("ann's own logs: %q", r.stdout)
				}
			}},
		{name: "cli/job show: unknown ID", as: ann, cli: args("job", "show", "jnosuchjob"), want: refused("no such job")},
		{name: "cli/job show: 10 KB ID", as: ann, cli: args("job", "show", huge), want: refused("no such job")},
		{name: "cli/job show: ../../etc/passwd", as: ann, cli: args("job", "show", "../../etc/passwd"), want: refused("no such job")},
		{name: "cli/job show: ESC in the ID", as: ann, cli: args("job", "show", "\x1b[2J\x1b]0;pwned\x07"), want: refused("no such job")},
		{name: "cli/job logs --item 0", as: ann, cli: args("job", "logs", aJob, "--item", "0"), want: refused("--item")},
		{name: "cli/job logs --item 2^63-1", as: ann, cli: args("job", "logs", aJob, "--item", "9223372036854775807"), want: refused("--item")},
		{name: "cli/job logs --item 2^63", as: ann, cli: args("job", "logs", aJob, "--item", "9223372036854775808"), want: refused("--item")},
		{name: "api/job logs item=abc", as: ann, req: get("/v1/jobs/" + aJob + "/logs?item=abc"), want: refusedAPI(400, "item")},
		{name: "api/job logs without item", as: ann, req: get("/v1/jobs/" + aJob + "/logs"), want: refusedAPI(400, "item")},
		{name: "api/job logs item=-9223372036854775808", as: ann, req: get("/v1/jobs/" + aJob + "/logs?item=-9223372036854775808"), want: refusedAPI(400, "item")},
		{name: "cli/job modify --priority 0", as: bob, cli: args("job", "modify", h.running, "--priority", "0"), want: refused("--priority")},
		{name: "cli/job modify --max-cpus -5", as: bob, cli: args("job", "modify", h.running, "--max-cpus", "-5"), want: refused("--max-cpus")},
		{name: "cli/job modify nothing to change", as: bob, cli: args("job", "modify", h.running), want: refused("--")},
		{name: "api/job modify priority -1", as: bob, req: post("/v1/jobs/"+h.running+"/modify", `{"priority":-1}`), want: refusedAPI(400, "priority")},
		{name: "api/job modify max_cpus 2^63-1", as: bob, req: post("/v1/jobs/"+h.running+"/modify", `{"max_cpus":9223372036854775807}`), want: refusedAPI(400, "max_cpus")},
		{name: "api/job modify priority a string", as: bob, req: post("/v1/jobs/"+h.running+"/modify", `{"priority":"1"}`), want: refusedAPI(400, "priority")},
		{name: "api/job cancel: an ID of 10 KB", as: bob, req: post("/v1/jobs/"+huge+"/cancel", ""), want: refusedAPI(404, "", "no such job")},

		// Contracts: ann's is hers, her host's (olive) and the admins'.
		{name: "cli/contract show: ann's, by bob", as: bob, fast: true, cli: args("contract", "show", ct), want: refused("no such contract"), hides: ct, like: fakeContract},
		{name: "cli/contract ls: not ann's, by bob", as: bob, fast: true, cli: args("contract", "ls", "--json"), want: ok()},
		{name: "cli/contract stop: ann's, by bob", as: bob, cli: args("contract", "stop", ct), want: refused("no such contract"), hides: ct, like: fakeContract},
		{name: "cli/contract start: ann's, by bob", as: bob, cli: args("contract", "start", ct), want: refused("no such contract"), hides: ct, like: fakeContract},
		{name: "cli/contract rm: ann's, by bob", as: bob, cli: args("contract", "rm", ct), want: refused("no such contract"), hides: ct, like: fakeContract},
		{name: "cli/contract extend: ann's, by bob", as: bob, cli: args("contract", "extend", ct, "--for", "1h"), want: refused("no such contract"), hides: ct, like: fakeContract},
		{name: "api/contract show: ann's, by bob", as: bob, req: get("/v1/contracts/" + ct), want: refusedAPI(404, "", "no such contract"), hides: ct, like: fakeContract},
		{name: "api/contracts: not ann's, by bob", as: bob, req: get("/v1/contracts"), want: ok()},
		{name: "api/contract stop: ann's, by bob", as: bob, req: post("/v1/contracts/"+ct+"/stop", ""), want: refusedAPI(404, "", "no such contract"), hides: ct, like: fakeContract},
		{name: "api/contract rm: ann's, by bob", as: bob, req: post("/v1/contracts/"+ct+"/rm", ""), want: refusedAPI(404, "", "no such contract"), hides: ct, like: fakeContract},
		{name: "api/contract usage: no one's secrets, by bob", as: bob, req: get("/v1/contract-usage"), want: ok()},
		{name: "cli/contract show: olive (the host) reads ann's env", as: olive, cli: args("contract", "show", ct, "--json"), want: ok(),
			then: func(t *testing.T, _ *hostile, r result) {
				if !strings.Contains(r.stdout, a+"-ct-env") {
					t.Errorf("the host does not see the contract's env: %s", ellipsize(r.stdout))
				}
			}},
		{name: "cli/contract show: ann reads her own", as: ann, cli: args("contract", "show", ct, "--json"), want: ok()},
		{name: "cli/contract show: unknown ID", as: ann, cli: args("contract", "show", "cnosuch"), want: refused("no such contract")},
		{name: "cli/contract show: 10 KB ID", as: ann, cli: args("contract", "show", huge), want: refused("no such contract")},
		{name: "cli/contract extend: by the renter", as: ann, cli: args("contract", "extend", ct, "--for", "1h"), want: refused("only the host")},
		{name: "cli/contract extend --for -1h", as: olive, cli: args("contract", "extend", ct, "--for", "-1h"), want: refused("--for")},
		{name: "cli/contract extend --for 0s", as: olive, cli: args("contract", "extend", ct, "--for", "0s"), want: refused("--for")},
		{name: "cli/contract extend --for 2562047h (2^63 ns)", as: olive, cli: args("contract", "extend", ct, "--for", "2562048h"), want: refused("--for")},
		{name: "cli/contract extend --for 300000000d", as: olive, cli: args("contract", "extend", ct, "--for", "300000000d"), want: refused("--for")},
		{name: "api/contract extend for_ms -1", as: olive, req: post("/v1/contracts/"+ct+"/extend", `{"for_ms":-1}`), want: refusedAPI(400, "for_ms")},
		{name: "api/contract extend for_ms 0", as: olive, req: post("/v1/contracts/"+ct+"/extend", `{"for_ms":0}`), want: refusedAPI(400, "for_ms")},
		{name: "api/contract extend without for_ms", as: olive, req: post("/v1/contracts/"+ct+"/extend", `{}`), want: refusedAPI(400, "for_ms")},
		{name: "api/contract extend for_ms 1e18", as: olive, req: post("/v1/contracts/"+ct+"/extend", `{"for_ms":1000000000000000000}`), want: refusedAPI(0, "for_ms")},
		{name: "api/contract extend for_ms a string", as: olive, req: post("/v1/contracts/"+ct+"/extend", `{"for_ms":"1h"}`), want: refusedAPI(400, "for_ms")},
		{name: "api/contract action explode", as: ann, req: post("/v1/contracts/"+ct+"/explode", ""), want: refusedAPI(404, "action")},
		{name: "cli/contract create --image ../x", as: bob, fast: true, cli: args("contract", "create", h.offer, "--image", "../x", "--cpus", "1", "--for", "1m"), want: refused("--image")},
		{name: "cli/contract create --image BusyBox:Latest", as: bob, cli: args("contract", "create", h.offer, "--image", "BusyBox:Latest", "--cpus", "1", "--for", "1m"), want: refused("--image")},
		{name: "cli/contract create --image 10 KB", as: bob, cli: args("contract", "create", h.offer, "--image", huge, "--cpus", "1", "--for", "1m"), want: refused("--image")},
		{name: "cli/contract create --for -1h", as: bob, cli: args("contract", "create", h.offer, "--image", "cshare-busybox:latest", "--cpus", "1", "--for", "-1h"), want: refused("--for")},
		{name: "cli/contract create --for 300000000d", as: bob, cli: args("contract", "create", h.offer, "--image", "cshare-busybox:latest", "--cpus", "1", "--for", "300000000d"), want: refused("--for")},
		{name: "cli/contract create --gpus -1", as: bob, cli: args("contract", "create", h.offer, "--image", "cshare-busybox:latest", "--gpus", "-1"), want: refused("--gpus")},
		{name: "cli/contract create --cpus 2^63-1", as: bob, cli: args("contract", "create", h.offer, "--image", "cshare-busybox:latest", "--cpus", "9223372036854775807"), want: refused("--cpus")},
		{name: "cli/contract create --disk -1g", as: bob, cli: args("contract", "create", h.offer, "--image", "cshare-busybox:latest", "--cpus", "1", "--disk", "-1g"), want: refused("--disk")},
		{name: "cli/contract create --env invalid UTF-8", as: bob, cli: args("contract", "create", h.offer, "--image", "cshare-busybox:latest", "--cpus", "1", "--env", "A=\xff"), want: refused("--env")},
		{name: "cli/contract create unknown offer", as: bob, cli: args("contract", "create", "onosuchoffer", "--image", "cshare-busybox:latest"), want: refused("no such offer")},
		{name: "api/contracts for_ms 2^63-1", as: bob, fast: true, req: post("/v1/contracts", ctJSON(`,"cpus":1,"for_ms":9223372036854775807`)), want: refusedAPI(400, "for_ms|duration")},
		{name: "api/contracts for_ms -1", as: bob, req: post("/v1/contracts", ctJSON(`,"cpus":1,"for_ms":-1`)), want: refusedAPI(400, "for_ms|duration")},
		{name: "api/contracts NUL in cmd", as: bob, req: post("/v1/contracts", ctJSON(`,"cpus":1,"cmd":["a\u0000b"]`)), want: refusedAPI(400, "cmd")},
		{name: "api/contracts NUL in onstart", as: bob, req: post("/v1/contracts", ctJSON(`,"cpus":1,"onstart":"echo \u0000"`)), want: refusedAPI(400, "onstart")},
		{name: "api/contracts invalid UTF-8 in env", as: bob, req: post("/v1/contracts", ctJSON(",\"cpus\":1,\"env\":{\"A\":\"\xff\"}")), want: refusedAPI(400, "env")},
		{name: "api/contracts image ../x", as: bob, req: post("/v1/contracts", `{"offer":"`+h.offer+`","image":"../x","cpus":1}`), want: refusedAPI(400, "image")},
		{name: "api/contracts no offer", as: bob, req: post("/v1/contracts", `{"image":"cshare-busybox:latest"}`), want: refusedAPI(400, "offer")},
		{name: "api/contracts offer a number", as: bob, req: post("/v1/contracts", `{"offer":5,"image":"cshare-busybox:latest"}`), want: refusedAPI(400, "offer")},
		{name: "api/contracts cpus -1", as: bob, req: post("/v1/contracts", ctJSON(`,"cpus":-1`)), want: refusedAPI(400, "cpus")},
		{name: "api/contracts disk_mb 2^63-1", as: bob, req: post("/v1/contracts", ctJSON(`,"cpus":1,"disk_mb":9223372036854775807`)), want: refusedAPI(400, "disk_mb|disk")},
		{name: "api/contract-usage at=-1", as: bob, req: get("/v1/contract-usage?at=-1"), want: refusedAPI(400, "at")},
		{name: "api/contract-usage at=abc", as: bob, req: get("/v1/contract-usage?at=abc"), want: refusedAPI(400, "at")},
		{name: "api/contract-usage at=2^63-1", as: olive, req: get("/v1/contract-usage?at=9223372036854775807"), want: want{either: true, field: "at"},
			then: func(t *testing.T, _ *hostile, r result) { noNegativeCost(t, r) }},
		{name: "cli/contract usage --at garbage", as: bob, cli: args("contract", "usage", "--at", "yesterday"), want: refused("--at")},

		// Offers.
		{name: "cli/offer create --price -1", as: olive, cli: args("offer", "create", "--price", "-1", "--cpus", "1"), want: refused("--price")},
		{name: "cli/offer create --price 1e400", as: olive, cli: args("offer", "create", "--price", "1e400", "--cpus", "1"), want: refused("--price")},
		{name: "cli/offer create --price NaN", as: olive, cli: args("offer", "create", "--price", "NaN", "--cpus", "1"), want: refused("--price")},
		{name: "cli/offer create --memory 10t", as: olive, fast: true, cli: args("offer", "create", "--price", "1", "--memory", "10t"), want: refused("--memory")},
		{name: "cli/offer create --cpus -1", as: olive, cli: args("offer", "create", "--price", "1", "--cpus", "-1"), want: refused("--cpus")},
		{name: "cli/offer create --for 300000000d", as: olive, cli: args("offer", "create", "--price", "1", "--cpus", "1", "--for", "300000000d"), want: refused("--for")},
		{name: "cli/offer create --until 1900-01-01", as: olive, cli: args("offer", "create", "--price", "1", "--cpus", "1", "--until", "1900-01-01"), want: refused("--until")},
		{name: "cli/offer create --min-duration -1h", as: olive, cli: args("offer", "create", "--price", "1", "--cpus", "1", "--min-duration", "-1h"), want: refused("--min-duration")},
		{name: "cli/offer create --gpus 5 on a machine with none", as: bob, cli: args("offer", "create", "--price", "1", "--gpus", "5"), want: refused("--gpus")},
		{name: "api/offers price abc", as: olive, req: post("/v1/offers", `{"price":"abc"}`), want: refusedAPI(400, "price")},
		{name: "api/offers no price", as: olive, req: post("/v1/offers", `{}`), want: refusedAPI(400, "price")},
		{name: "api/offers for_ms 2^63-1", as: olive, req: post("/v1/offers", offerJSON(`,"for_ms":9223372036854775807`)), want: refusedAPI(400, "for_ms|duration")},
		{name: "api/offers until -1", as: olive, req: post("/v1/offers", offerJSON(`,"until":-1`)), want: refusedAPI(400, "until")},
		{name: "api/offers until 2^63-1", as: olive, req: post("/v1/offers", offerJSON(`,"until":9223372036854775807`)), want: refusedAPI(400, "until")},
		{name: "api/offers min_duration_ms -1", as: olive, req: post("/v1/offers", offerJSON(`,"min_duration_ms":-1`)), want: refusedAPI(400, "min_duration_ms|min_duration")},
		{name: "api/offers min_duration_ms 2^63-1", as: olive, req: post("/v1/offers", offerJSON(`,"min_duration_ms":9223372036854775807`)), want: refusedAPI(400, "min_duration_ms|min_duration")},
		{name: "api/offers cpus -5", as: olive, req: post("/v1/offers", `{"price":"1","cpus":-5}`), want: refusedAPI(400, "cpus")},
		{name: "api/offers memory_mb a string", as: olive, req: post("/v1/offers", `{"price":"1","memory_mb":"10t"}`), want: refusedAPI(400, "memory_mb")},
		{name: "cli/offer ls gpus>=two", as: bob, cli: args("offer", "ls", "gpus>=two"), want: refused("gpus>=two")},
		{name: "cli/offer ls a control character", as: bob, fast: true, cli: args("offer", "ls", "gpus>=1\x01"), want: want{not: []string{"brackets and commas"}}},
		{name: "cli/offer ls 10 KB query", as: bob, cli: args("offer", "ls", huge), want: refused()},
		{name: "cli/offer ls -o bogus", as: bob, cli: args("offer", "ls", "-o", "bogus"), want: refused("bogus")},
		{name: "cli/offer rm: olive's, by bob", as: bob, cli: args("offer", "rm", h.offer), want: refused("no offer")},
		{name: "api/offers q with NUL", as: bob, req: get("/v1/offers?q=" + url.QueryEscape("cpus>=1\x00")), want: refusedAPI(400, "q|query")},
		{name: "api/offers o bogus", as: bob, req: get("/v1/offers?o=bogus"), want: refusedAPI(400, "o|order")},
		{name: "api/offer remove: olive's, by bob", as: bob, req: post("/v1/offers/"+h.offer+"/remove", ""), want: refusedAPI(404, "")},

		// Datasets: a private one is its owner's and the admins'.
		{name: "cli/dataset show: ann's private CID, by bob", as: bob, fast: true, cli: args("dataset", "show", h.privDS[ann]), want: refused(), hides: h.privDS[ann], like: strangerCID},
		{name: "cli/dataset show: ann's private name, by bob", as: bob, cli: args("dataset", "show", a+"-ds"), want: refused(), hides: a + "-ds", like: "nosuch-ds"},
		{name: "cli/dataset ls: not ann's private one, by bob", as: bob, fast: true, cli: args("dataset", "ls", "--json"), want: ok()},
		{name: "cli/dataset get: ann's private, by bob", as: bob, cli: args("dataset", "get", h.privDS[ann], "--out", out("bob-got")), want: refused(), then: absent(out("bob-got")), hides: h.privDS[ann], like: strangerCID},
		{name: "cli/dataset rm: ann's private, by bob", as: bob, cli: args("dataset", "rm", h.privDS[ann]), want: refused(), hides: h.privDS[ann], like: strangerCID},
		{name: "cli/dataset rm: ann's public, by bob", as: bob, cli: args("dataset", "rm", h.pubDS), want: refused()},
		{name: "cli/dataset access: ann's private, by bob", as: bob, cli: args("dataset", "access", h.privDS[ann], "org"), want: refused(), hides: h.privDS[ann], like: strangerCID},
		{name: "cli/dataset access: ann's public, by bob", as: bob, cli: args("dataset", "access", h.pubDS, "private"), want: refused()},
		{name: "api/dataset access: everyone", as: ann, req: post("/v1/datasets/"+h.pubDS+"/access", `{"access":"everyone"}`), want: refusedAPI(400, "access")},
		{name: "cli/dataset export: ann's private, by bob", as: bob, cli: args("dataset", "export", h.privDS[ann], "--car", out("bob.car")), want: refused(), then: absent(out("bob.car")), hides: h.privDS[ann], like: strangerCID},
		{name: "cli/dataset show: bob's private CID, by ann", as: ann, cli: args("dataset", "show", h.privDS[bob]), want: refused(), hides: h.privDS[bob], like: strangerCID},
		{name: "api/dataset show: ann's private CID, by bob", as: bob, req: get("/v1/datasets/" + h.privDS[ann]), want: refusedAPI(0, ""), hides: h.privDS[ann], like: strangerCID},
		{name: "api/dataset remove: ann's private CID, by bob", as: bob, req: post("/v1/datasets/"+h.privDS[ann]+"/remove", ""), want: refusedAPI(0, ""), hides: h.privDS[ann], like: strangerCID},
		{name: "api/dataset get: ann's private CID, by bob", as: bob, req: post("/v1/datasets/"+h.privDS[ann]+"/get", `{"out":"`+out("bob-got2")+`"}`), want: refusedAPI(0, ""), then: absent(out("bob-got2")), hides: h.privDS[ann], like: strangerCID},
		{name: "api/datasets: not ann's private one, by bob", as: bob, req: get("/v1/datasets"), want: ok()},
		{name: "cli/dataset show: olive (admin) reads ann's private", as: olive, cli: args("dataset", "show", h.privDS[ann]), want: ok()},
		{name: "cli/dataset show: unknown CID", as: ann, cli: args("dataset", "show", strangerCID), want: refused()},
		{name: "cli/dataset show: ../../x", as: ann, cli: args("dataset", "show", "../../x"), want: refused()},
		{name: "cli/dataset get: unknown CID leaves no --out", as: ann, cli: args("dataset", "get", strangerCID, "--out", out("ann-got")), want: refused(), then: absent(out("ann-got"))},
		{name: "cli/dataset get --out that exists", as: ann, cli: args("dataset", "get", h.pubDS, "--out", exists), want: refused("--out")},
		{name: "cli/dataset add --name ../x", as: ann, cli: args("dataset", "add", notCAR, "--name", "../x"), want: want{either: true, says: []string{"--name"}}},
		{name: "cli/dataset add --name 10 KB", as: ann, cli: args("dataset", "add", notCAR, "--name", huge), want: refused("--name")},
		{name: "cli/dataset add --name with ESC", as: ann, cli: args("dataset", "add", notCAR, "--name", "x\x1b[2J"), want: refused("--name")},
		{name: "cli/dataset add a missing path", as: ann, cli: args("dataset", "add", out("missing")), want: refused()},
		{name: "cli/dataset import a file that is no CAR", as: ann, cli: args("dataset", "import", notCAR), want: refused()},
		{name: "api/datasets relative path", as: ann, req: post("/v1/datasets", `{"path":"relative/x"}`), want: refusedAPI(400, "path")},
		{name: "api/datasets no path", as: ann, req: post("/v1/datasets", `{}`), want: refusedAPI(400, "path")},
		{name: "api/datasets name ../../x", as: ann, req: post("/v1/datasets", `{"path":"`+notCAR+`","name":"../../x"}`), want: want{either: true, code: 400, field: "name"}},
		{name: "api/datasets private a string", as: ann, req: post("/v1/datasets", `{"path":"`+notCAR+`","private":"yes"}`), want: refusedAPI(400, "private")},
		{name: "api/dataset import relative path", as: ann, req: post("/v1/datasets/import", `{"path":"x.car"}`), want: refusedAPI(400, "path")},
		{name: "api/dataset get relative out", as: ann, req: post("/v1/datasets/"+h.pubDS+"/get", `{"out":"relative"}`), want: refusedAPI(400, "out")},
		{name: "api/dataset export no car", as: ann, req: post("/v1/datasets/"+h.pubDS+"/export", `{}`), want: refusedAPI(400, "car")},
		{name: "api/dataset progress ../..", as: ann, req: get("/v1/datasets/progress/" + esc("../..")), want: want{either: true}},
		{name: "api/dataset show 10 KB ref", as: ann, req: get("/v1/datasets/" + huge), want: refusedAPI(404, "")},

		// The org, its members and machines.
		{name: "cli/org delete: by a member", as: bob, cli: args("org", "delete", "--confirm", "e2e"), want: refused("owner")},
		{name: "cli/org delete --confirm E2E", as: olive, cli: args("org", "delete", "--confirm", "E2E"), want: refused("--confirm")},
		{name: "cli/org delete --confirm 10 KB", as: olive, cli: args("org", "delete", "--confirm", huge), want: refused("--confirm")},
		{name: "api/org delete confirm a number", as: olive, req: post("/v1/org/delete", `{"confirm":5}`), want: refusedAPI(400, "confirm")},
		{name: "api/org delete no confirm", as: olive, req: post("/v1/org/delete", `{}`), want: refusedAPI(400, "confirm")},
		{name: "api/org delete confirm with a trailing space", as: olive, fast: true, req: post("/v1/org/delete", `{"confirm":"e2e "}`), want: refusedAPI(400, "confirm"), then: orgStands},
		{name: "api/org delete confirm with a NUL", as: olive, req: post("/v1/org/delete", `{"confirm":"e2e\u0000"}`), want: refusedAPI(400, "confirm"), then: orgStands},
		{name: "cli/org set: by a member", as: bob, cli: args("org", "set", "smartshare.mode=jobs"), want: refused("admin")},
		{name: "cli/org set an unknown key", as: olive, cli: args("org", "set", "bogus.key=1"), want: refused("bogus.key")},
		{name: "cli/org set without =", as: olive, cli: args("org", "set", "noequals"), want: refused("noequals")},
		{name: "cli/org set market.delete_after=-1s", as: olive, cli: args("org", "set", "market.delete_after=-1s"), want: refused("market.delete_after")},
		{name: "cli/org set market.delete_after=300000000d", as: olive, cli: args("org", "set", "market.delete_after=300000000d"), want: refused("market.delete_after")},
		{name: "api/org settings NUL value", as: olive, req: post("/v1/org/settings", `{"set":{"smartshare.mode":"jobs\u0000"}}`), want: refusedAPI(400, "smartshare.mode|set")},
		{name: "api/org settings set a list", as: olive, req: post("/v1/org/settings", `{"set":["a"]}`), want: refusedAPI(400, "set")},
		{name: "cli/org invite: by a member", as: bob, cli: args("org", "invite"), want: refused("admin")},
		{name: "cli/org invite --uses -1", as: olive, cli: args("org", "invite", "--uses", "-1"), want: refused("--uses")},
		{name: "cli/org invite --expires -1h", as: olive, cli: args("org", "invite", "--expires", "-1h"), want: refused("--expires")},
		{name: "cli/org invite --expires 300000000d", as: olive, cli: args("org", "invite", "--expires", "300000000d"), want: want{either: true, says: []string{"--expires"}}},
		{name: "cli/org invite --role owner", as: olive, cli: args("org", "invite", "--role", "owner"), want: refused("--role")},
		{name: "api/org invite uses -1", as: olive, req: post("/v1/org/invite", `{"role":"member","uses":-1}`), want: refusedAPI(400, "uses")},
		{name: "api/org invite role god", as: olive, req: post("/v1/org/invite", `{"role":"god"}`), want: refusedAPI(400, "role")},
		{name: "cli/org transfer: by a member", as: bob, cli: args("org", "transfer", "--to", h.person[ann]), want: refused("owner")},
		{name: "cli/org transfer to a member (not an admin)", as: olive, cli: args("org", "transfer", "--to", h.person[ann]), want: refused("admin")},
		{name: "cli/org transfer to no one", as: olive, cli: args("org", "transfer", "--to", "nosuchperson"), want: refused("nosuchperson")},
		{name: "api/org transfer to empty", as: olive, req: post("/v1/org/transfer", `{"to":""}`), want: refusedAPI(400, "to")},
		{name: "cli/org key --rotate: by a member", as: bob, cli: args("org", "key", "--rotate"), want: refused("admin")},
		{name: "cli/node join garbage, already in an org", as: bob, cli: args("node", "join", "--org-key", "garbage"), want: refused()},
		{name: "api/org create, already in an org", as: bob, req: post("/v1/org", `{"name":"other"}`), want: refusedAPI(0, "")},
		{name: "api/join a 10 KB key", as: bob, req: post("/v1/join", `{"org_key":"`+huge+`"}`), want: refusedAPI(0, "")},
		{name: "cli/machine approve: unknown, by a member", as: bob, cli: args("machine", "approve", "nosuchmachine"), want: refused()},
		{name: "cli/machine remove: ann's, by bob", as: bob, cli: args("machine", "remove", h.machine[ann]), want: refused(),
			then: func(t *testing.T, h *hostile, _ result) { h.stillMember(t, ann) }},
		{name: "cli/machine show: 10 KB ID", as: bob, cli: args("machine", "show", huge), want: refused()},
		{name: "api/machine action explode", as: olive, req: post("/v1/machines/"+h.machine[ann]+"/explode", ""), want: refusedAPI(404, "action")},
		{name: "api/machine show unknown", as: ann, req: get("/v1/machines/nosuch"), want: refusedAPI(404, "")},
		{name: "cli/member set-role: by a member", as: bob, cli: args("member", "set-role", h.person[ann], "admin"), want: refused("owner")},
		{name: "cli/member set-role god", as: olive, cli: args("member", "set-role", h.person[ann], "god"), want: refused("god")},
		{name: "api/member role a number", as: olive, req: post("/v1/members/"+h.person[ann]+"/role", `{"role":5}`), want: refusedAPI(400, "role")},
		{name: "api/member role empty", as: olive, req: post("/v1/members/"+h.person[ann]+"/role", `{}`), want: refusedAPI(400, "role")},
		{name: "cli/member remove: ann, by bob", as: bob, fast: true, cli: args("member", "remove", h.person[ann]), want: refused(),
			then: func(t *testing.T, h *hostile, _ result) { h.stillMember(t, ann) }},
		{name: "cli/member remove: the owner, by ann", as: ann, cli: args("member", "remove", h.person[olive]), want: refused("owner")},
		{name: "cli/member remove: the owner, by herself", as: olive, cli: args("member", "remove", h.person[olive]), want: refused("owner")},
		{name: "cli/member remove: no one", as: olive, cli: args("member", "remove", "nosuchperson"), want: refused("nosuchperson")},
		{name: "cli/member leave: the owner", as: olive, cli: args("member", "leave"), want: refused("transfer")},
		{name: "api/leave purge a string", as: bob, req: post("/v1/leave", `{"purge":"yes"}`), want: refusedAPI(400, "purge"),
			then: func(t *testing.T, h *hostile, _ result) { h.stillMember(t, bob) }},
		{name: "api/leave malformed JSON", as: bob, req: post("/v1/leave", `{`), want: refusedAPI(400, ""),
			then: func(t *testing.T, h *hostile, _ result) { h.stillMember(t, bob) }},

		// The protocol: routes, methods, tokens, hosts.
		{name: "api/unknown route", as: ann, req: get("/v1/nosuch"), want: refusedAPI(404, "")},
		{name: "api/DELETE /v1/jobs", as: ann, req: &apiReq{method: "DELETE", path: "/v1/jobs"}, want: refusedAPI(405, "")},
		{name: "api/GET /v1/node/stop", as: ann, req: get("/v1/node/stop"), want: refusedAPI(405, "")},
		{name: "api/PUT /v1/org", as: ann, req: &apiReq{method: "PUT", path: "/v1/org", body: `{}`}, want: refusedAPI(405, "")},
		{name: "api/GET /v1/jobs/ID/cancel", as: ann, req: get("/v1/jobs/" + aJob + "/cancel"), want: refusedAPI(405, "")},
		{name: "api/no token", as: ann, req: &apiReq{method: "GET", path: "/v1/jobs", noToken: true}, want: refusedAPI(401, "")},
		{name: "api/bob's token on ann's node", as: ann, req: &apiReq{method: "GET", path: "/v1/jobs", token: h.tokens[bob]}, want: refusedAPI(401, "")},
		{name: "api/a rebound Host", as: ann, req: &apiReq{method: "GET", path: "/v1/jobs", host: "evil.example:80"}, want: refusedAPI(403, "")},
		{name: "api/dashboard sign-in code without a token", as: ann, req: &apiReq{method: "POST", path: "/v1/dashboard/code", noToken: true}, want: refusedAPI(401, "")},
		{name: "api/metrics without a token", as: ann, req: &apiReq{method: "GET", path: "/metrics", noToken: true}, want: refusedAPI(401, "")},
		{name: "api/job path ..%2f..%2fetc", as: ann, req: get("/v1/jobs/" + esc("../../etc/passwd")), want: refusedAPI(404, "")},
		{name: "api/job ID %00", as: ann, req: get("/v1/jobs/%00"), want: refusedAPI(404, "")},
		{name: "api/dashboard sign-in code, bob's own node", as: bob, req: &apiReq{method: "POST", path: "/v1/dashboard/code"}, want: ok()},

		// What a member reads of the org: nothing of another's.
		{name: "cli/machine show: ann's machine, by bob", as: bob, cli: args("machine", "show", h.machine[ann], "--json"), want: ok()},
		{name: "cli/machine ls, by bob", as: bob, cli: args("machine", "ls", "--json"), want: ok()},
		{name: "cli/member ls, by bob", as: bob, cli: args("member", "ls"), want: ok()},
		{name: "cli/org show, by bob", as: bob, cli: args("org", "show", "--json"), want: ok()},
		{name: "cli/node status, by bob", as: bob, cli: args("node", "status"), want: ok()},
		{name: "cli/contract usage, by bob", as: bob, cli: args("contract", "usage"), want: ok()},
		{name: "cli/offer ls, by bob", as: bob, cli: args("offer", "ls", "--json"), want: ok()},

		// Commands that need no node: user keys and the planner.
		{name: "cli/user import a plaintext key readable by all", as: ann, fast: true, dir: fresh("loose"), cli: args("user", "import", loose), want: refused("chmod 600")},
		{name: "cli/user import a 10 KB garbage file", as: ann, dir: fresh("garbage"), cli: args("user", "import", garbage), want: refused()},
		{name: "cli/user init --name 10 KB", as: ann, dir: fresh("init"), cli: args("user", "init", "--name", huge), want: refused("--name")},
		{name: "cli/user init --name with ESC", as: ann, dir: fresh("init2"), cli: args("user", "init", "--name", "x\x1b[2J"), want: refused("--name")},
		{name: "cli/smartshare plan a malformed file", as: ann, cli: args("smartshare", "plan", badPlan), want: refused()},

		// Last: what takes time, or a node or the org away, if a defect
		// lets it.
		{name: "cli/dataset import a FIFO", as: bob, cli: args("dataset", "import", fifo), want: refused(), timeout: 5 * time.Second, cleanup: unblock},
		{name: "api/dataset import a FIFO", as: bob, req: post("/v1/datasets/import", `{"path":"`+fifo+`"}`), want: refusedAPI(400, "path"), timeout: 5 * time.Second, cleanup: unblock},
		{name: "api/contract extend for_ms 2^63-1, by the host", as: olive, fast: true, req: post("/v1/contracts/"+ct+"/extend", `{"for_ms":9223372036854775807}`), want: refusedAPI(400, "for_ms"),
			then: func(t *testing.T, h *hostile, _ result) { h.contractIntact(t) }},
		{name: "api/contract extend for_ms 2^63-1-now, by the host", as: olive, req: post("/v1/contracts/"+ct+"/extend", `{"for_ms":`+itoa(1<<63-1-time.Now().UnixMilli()-3600_000)+`}`), want: refusedAPI(400, "for_ms"),
			then: func(t *testing.T, h *hostile, _ result) { h.contractIntact(t) }},
		{name: "cli/member remove: bob, by himself", as: bob, fast: true, cli: args("member", "remove", h.person[bob]), want: want{either: true},
			then: func(t *testing.T, h *hostile, r result) { h.selfRemoval(t, bob, r, h.person[bob]) }},
		{name: "cli/machine remove: ann's own machine, by herself", as: ann, cli: args("machine", "remove", h.machine[ann]), want: want{either: true},
			then: func(t *testing.T, h *hostile, r result) { h.selfRemoval(t, ann, r, h.machine[ann]) }},
		{name: "cli/org delete --confirm e2e<TAB>", as: olive, fast: true, cli: args("org", "delete", "--confirm", "e2e\t"), want: refused("--confirm"), then: orgStands},
	}
}

func itoa(v int64) string { b, _ := json.Marshal(v); return string(b) }
