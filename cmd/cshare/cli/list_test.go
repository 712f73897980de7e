package cli

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/cshare/cshare/node/api"
)

// TestListJSONShape: a listing's --json, printed row by row as the rows
// come, is byte for byte what printing the whole slice gave: scripts that
// read it see no change. None is [].
func TestListJSONShape(t *testing.T) {
	n := startNode(t)
	for _, c := range []struct {
		args []string
		rows any
	}{
		{[]string{"job", "items", jobID, "--json"}, n.items},
		{[]string{"machine", "ls", "--json"}, n.machines},
		{[]string{"member", "ls", "--json"}, n.members},
		{[]string{"job", "ls", "--json"}, n.jobs},
		{[]string{"job", "items", jobID, "--json", "--after", "3"}, []api.ItemInfo{}},
	} {
		var want bytes.Buffer
		if err := printJSON(&want, c.rows); err != nil {
			t.Fatal(err)
		}
		r := n.run(c.args...)
		if r.code != 0 || r.stdout != want.String() {
			t.Errorf("%v: exit %d, stdout\n%s\nwant\n%s (stderr %q)", c.args, r.code, r.stdout, want.String(), r.stderr)
		}
	}
}

// TestListPages: --limit and --after page a listing; a full page of a
// table ends with the command for the next on stderr.
func TestListPages(t *testing.T) {
	n := startNode(t)
	r := n.run("job", "items", jobID, "--limit", "2")
	if r.code != 0 || strings.Count(r.stdout, "\n") != 3 || !strings.Contains(r.stdout, "failed") || strings.Contains(r.stdout, "pending") {
		t.Errorf("--limit 2: %+v", r)
	}
	if want := "more may follow: cshare job items " + jobID + " --after 2 --limit 2\n"; r.stderr != want {
		t.Errorf("--limit 2: stderr %q, want %q", r.stderr, want)
	}
	r = n.run("job", "items", jobID, "--after", "2", "--limit", "2")
	if r.code != 0 || strings.Count(r.stdout, "\n") != 2 || !strings.Contains(r.stdout, "pending") || r.stderr != "" {
		t.Errorf("--after 2: %+v", r)
	}
	r = n.run("machine", "ls", "--after", short(m1ID), "--limit", "1", "--json")
	if r.code != 0 || !strings.Contains(r.stdout, m2ID) || strings.Contains(r.stdout, m1ID) || strings.Contains(r.stdout, m3ID) || r.stderr != "" {
		t.Errorf("machine ls --after: %+v", r)
	}
}

// TestListFlagsRefused: a bad --limit or --after is a usage error naming
// the flag, from the CLI or from the node.
func TestListFlagsRefused(t *testing.T) {
	n := startNode(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"job", "items", jobID, "--limit", "0"}, "--limit: \"0\"; allowed: a whole number from 1 to 1000000000"},
		{[]string{"job", "items", jobID, "--limit", "ten"}, "--limit: \"ten\""},
		{[]string{"job", "ls", "--limit", strings.Repeat("9", 100)}, "--limit: \"" + strings.Repeat("9", 64) + "…\""},
		{[]string{"job", "items", jobID, "--after", "x"}, "--after: \"x\" is not an item number"},
		{[]string{"job", "items", jobID, "--after", ""}, "--after: empty"},
		{[]string{"machine", "ls", "--after", "nosuchmachine"}, "--after: \"nosuchmachine\" is no row of this listing"},
		{[]string{"dataset", "ls", "--after", strings.Repeat("c", 300)}, "--after: \"" + strings.Repeat("c", 64) + "…\" is 300 bytes"},
	} {
		oneErrorLine(t, n.run(c.args...), 2, c.want)
	}
}

// TestStreamTable: a table of up to streamHead rows prints as table does;
// a longer one keeps the widths of its first rows, a wider cell later
// pushing its own line only.
func TestStreamTable(t *testing.T) {
	for _, rows := range []int{0, 5, streamHead - 1, streamHead, streamHead + 3} {
		var whole table
		var got bytes.Buffer
		s := streamTable{w: &got}
		add := func(cells ...string) {
			whole.row(cells...)
			if err := s.row(cells...); err != nil {
				t.Fatal(err)
			}
		}
		add("ITEM", "STATUS", "MACHINE")
		for i := range rows {
			add(fmt.Sprint(i), "done\x1b[2J", "m")
		}
		if rows > streamHead-2 {
			add("99999999", "a-wider-status", "m")
		}
		if err := s.close(); err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		_ = whole.write(&want)
		lines := strings.Split(got.String(), "\n")
		switch {
		case rows+2 <= streamHead && got.String() != want.String():
			t.Errorf("%d rows: %q, want %q", rows, got.String(), want.String())
		case rows+2 > streamHead:
			if len(lines) != len(strings.Split(want.String(), "\n")) || lines[1] != "0     done\\x1b[2J  m" {
				t.Errorf("%d rows: line 2 %q", rows, lines[1])
			}
			if last := lines[len(lines)-2]; last != "99999999  a-wider-status  m" {
				t.Errorf("%d rows: last line %q", rows, last)
			}
		}
	}
}
