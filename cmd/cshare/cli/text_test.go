package cli

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
)

// hostile holds ESC, CR, LF, NUL, DEL, a C1 CSI and a bidi override.
const hostile = "evil\x1b[2J\x1b[31m\rCR\nLF\x00NUL\x7fDEL\u009b1m\u202eRLO"

// safeOutput fails unless out is valid UTF-8 whose only control character
// is the newline ending each line.
func safeOutput(t *testing.T, what, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Errorf("%s: output is not valid UTF-8: %q", what, out)
	}
	for _, r := range out {
		if r != '\n' && text.Unsafe(r) {
			t.Errorf("%s: output holds %U:\n%q", what, r, out)
			return
		}
	}
}

// hostileNode is a fake node whose org, machines, members and jobs hold
// hostile text everywhere a member or a machine writes text, as a ledger
// of an older version, or a forged entry, could.
func hostileNode(t *testing.T) *testNode {
	n := startNode(t)
	n.org.Name = hostile
	n.org.Description = "line one\n" + hostile
	m := &n.machines[0]
	m.Name, m.Version, m.Addrs = hostile, hostile, []string{hostile}
	m.Hardware.GPUs = []ledger.GPU{{Index: 0, UUID: hostile, Name: hostile, MemoryMB: 1024}}
	n.machines[1].Name = hostile
	n.members[0].Name = hostile
	j := &n.jobs[0]
	j.Name, j.Image, j.Reason, j.Error = hostile, hostile, hostile, hostile
	j.Cmd = []string{"sh", "-c", hostile}
	j.Instances[0].MachineName = hostile
	n.jobs[1].Name = hostile
	return n
}

// TestHostileTextIsEscaped is issue 16's "Must hold": no human-readable
// listing or view holds a control byte, every table row is one line, and
// --json stays exact.
func TestHostileTextIsEscaped(t *testing.T) {
	n := hostileNode(t)
	for _, c := range []struct {
		args []string
		rows int // lines of a table: its header and one per row (0: a view)
	}{
		{[]string{"job", "ls"}, 1 + len(n.jobs)},
		{[]string{"machine", "ls"}, 1 + len(n.machines)},
		{[]string{"member", "ls"}, 1 + len(n.members)},
		{[]string{"job", "show", jobID}, 0},
		{[]string{"machine", "show", m1ID}, 0},
		{[]string{"org", "show"}, 0},
		{[]string{"machine", "approve", m2ID}, 1},
	} {
		what := strings.Join(c.args, " ")
		r := n.run(c.args...)
		if r.code != 0 {
			t.Errorf("%s: exit %d: %s", what, r.code, r.stderr)
			continue
		}
		safeOutput(t, what, r.stdout)
		lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
		if c.rows > 0 && len(lines) != c.rows {
			t.Errorf("%s: %d lines, want %d (a row split?):\n%s", what, len(lines), c.rows, r.stdout)
		}
		if c.rows == 0 {
			// A view: "key:  value" lines, a blank line, then a table.
			for _, l := range lines {
				if l == "" {
					break
				}
				k, _, ok := strings.Cut(l, ":")
				if !ok || strings.Trim(k, "abcdefghijklmnopqrstuvwxyz_. ") != "" {
					t.Errorf("%s: line %q is not a key: value line (a value split?)", what, l)
				}
			}
		}
		if !strings.Contains(r.stdout, `evil\x1b[2J\x1b[31m\rCR\nLF\x00NUL\x7fDEL\u009b1m\u202eRLO`) {
			t.Errorf("%s: the hostile name is not shown escaped:\n%s", what, r.stdout)
		}
	}

	// --json is the exact text.
	r := n.run("org", "show", "--json")
	var o api.OrgInfo
	if err := json.Unmarshal([]byte(r.stdout), &o); err != nil || o.Name != hostile || o.Description != n.org.Description {
		t.Errorf("org show --json: %+v, %v", o, err)
	}
	r = n.run("job", "ls", "--json")
	var js []api.JobInfo
	if err := json.Unmarshal([]byte(r.stdout), &js); err != nil || len(js) != 2 || js[0].Name != hostile || js[0].Reason != hostile {
		t.Errorf("job ls --json: %+v, %v", js, err)
	}

	// Errors that echo other members' text are escaped too.
	n.fail = api.Errorf(http.StatusConflict, "job %s is ambiguous", hostile)
	r = n.run("job", "show", "abcd")
	safeOutput(t, "error", r.stderr)
	if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, `evil\x1b[2J`) {
		t.Errorf("error: exit %d, %q", r.code, r.stderr)
	}
}

// TestNamesCheckedAtTheFlags: a name the ledger would ignore is refused
// before the node is asked, with one line naming the flag and the limit.
func TestNamesCheckedAtTheFlags(t *testing.T) {
	n := startNode(t)
	long := strings.Repeat("x", 100241)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"job", "submit", "--name", hostile, "--", "true"}, "--name: "},
		{[]string{"job", "submit", "--name", long, "--", "true"}, "--name: 100241 characters; allowed: at most 64, one line of printable text"},
		{[]string{"org", "create", "--name", "a\x1b[31m"}, "--name: "},
		{[]string{"org", "create", "--name", "acme", "--description", strings.Repeat("x", 60000)}, "--description: 60000 bytes; allowed: at most 4096 bytes"},
		{[]string{"org", "set", "name=" + long}, "name: 100241 characters; allowed: at most 64"},
		{[]string{"org", "set", "name=two\nlines"}, "name: "},
		{[]string{"org", "set", "description=" + strings.Repeat("x", 60000)}, "description: 60000 bytes; allowed: at most 4096 bytes of UTF-8 text"},
		{[]string{"node", "join", "--org-key", orgKey, "--name", "a\u202eb"}, "--name: "},
		{[]string{"member", "join", "--invite", invite, "--name", "a\rb"}, "--name: "},
		{[]string{"node", "run", "--name", "a\x00b"}, "--name: "},
	} {
		r := n.run(c.args...)
		oneErrorLine(t, r, 2, c.want)
		safeOutput(t, c.args[0]+" "+c.args[1], r.stderr)
	}
	if calls := n.called(); len(calls) != 0 {
		t.Errorf("the node was asked: %v", calls)
	}

	// Names are trimmed; descriptions are sent as given.
	if r := n.run("job", "submit", "--name", "  render  ", "--", "true"); r.code != 0 || n.submit.Name != "render" {
		t.Errorf("padded name: exit %d, sent %q: %s", r.code, n.submit.Name, r.stderr)
	}
	if r := n.run("org", "set", "name= acme ", "description=two\nlines"); r.code != 0 ||
		n.settings.Set["name"] != "acme" || n.settings.Set["description"] != "two\nlines" {
		t.Errorf("org set: exit %d, sent %q: %s", r.code, n.settings.Set, r.stderr)
	} else if r.stdout != "set description=two\\nlines\nset name=acme\n" {
		t.Errorf("org set echoes %q", r.stdout)
	}
}

func TestJobLogsHelpSaysRaw(t *testing.T) {
	r := runCLI("job", "logs", "--help")
	if !strings.Contains(r.stdout, "not escaped") {
		t.Errorf("job logs --help does not say the output is raw:\n%s", r.stdout)
	}
}
