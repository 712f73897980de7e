//go:build e2e

package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

type person struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

type ownedMachine struct {
	ID      string `json:"id"`
	Owner   string `json:"owner"`
	Status  string `json:"status"`
	History []struct {
		Status string `json:"status"`
	} `json:"history"`
}

// oneLineErr runs a command that must fail with exactly one line on stderr
// containing want.
func (p *proc) oneLineErr(want string, args ...string) {
	p.t.Helper()
	_, errs, code := p.cli(args...)
	errs = strings.TrimSpace(errs)
	if code == 0 || strings.Contains(errs, "\n") || !strings.Contains(errs, want) {
		p.t.Fatalf("cshare %s: exit %d, stderr %q; want one line containing %q", strings.Join(args, " "), code, errs, want)
	}
}

func (p *proc) person() person {
	p.t.Helper()
	var u person
	p.json(&u, "user", "show")
	return u
}

// TestPeopleThroughTheCLI: members are persons. One person on two machines
// is one member; a member sees only their own jobs; only the owner changes
// admins; the owner hands the org over; a removed person comes back pending
// with the machine's history.
func TestPeopleThroughTheCLI(t *testing.T) {
	conf := execConf(t, 2)
	owner := startNode(t, "owner", "--config", conf)
	ada := startNode(t, "ada", "--config", conf)
	mo1 := startNode(t, "mo1", "--config", conf)
	mo2 := startNode(t, "mo2", "--config", conf)

	// The owner's person key is created by org create, named as asked.
	key := lastLine(owner.must("org", "create", "--name", "people", "--user-name", "olive"))
	olive := owner.person()
	if olive.Name != "olive" || olive.ID == "" {
		t.Fatalf("owner's person: %+v", olive)
	}
	// ada joins with an admin invite (approved at once, witnessed).
	inv := lastLine(owner.must("org", "invite", "--role", "admin", "--uses", "1"))
	ada.must("member", "join", "--invite", inv, "--user-name", "ada")
	// mo makes a key first, carries it to a second machine, joins both.
	moID := lastLine(mo1.must("user", "init", "--name", "mo"))
	export := filepath.Join(t.TempDir(), "mo.person")
	mo1.must("user", "export", "--out", export)
	if got := lastLine(mo2.must("user", "import", export)); got != moID {
		t.Fatalf("imported person %q, want %q", got, moID)
	}
	for _, p := range []*proc{mo1, mo2} {
		p.must("node", "join", "--org-key", key)
		owner.must("machine", "approve", machineID(t, p))
	}
	eventually(t, 30*time.Second, "mo is one member with two machines, on every node", func() bool {
		for _, p := range []*proc{owner, ada, mo1, mo2} {
			m := findMember(p.members(), moID)
			if m == nil || len(m.Machines) != 2 || m.Role != "member" || m.Name != "mo" {
				return false
			}
		}
		return true
	})
	if n := len(owner.members()); n != 3 {
		t.Fatalf("%d members, want 3 (olive, ada, mo)", n)
	}
	var ms []ownedMachine
	owner.json(&ms, "machine", "ls")
	for _, m := range ms {
		if (m.ID == machineID(t, mo1) || m.ID == machineID(t, mo2)) && m.Owner != moID {
			t.Fatalf("machine %s owner %q, want mo %s", m.ID, m.Owner, moID)
		}
	}
	adaID := ada.person().ID

	// Visibility: mo's job is not ada's to see? ada is an admin: she sees
	// it. A member (mo) does not see olive's job.
	oj := lastLine(owner.must("job", "submit", "--driver", "exec", "--cpus", "1", "--", "sh", "-c", "echo secret-olive"))
	mj := lastLine(mo1.must("job", "submit", "--driver", "exec", "--cpus", "1", "--", "sh", "-c", "echo mo-out"))
	eventually(t, 30*time.Second, "both jobs done", func() bool {
		var js []job
		owner.json(&js, "job", "ls")
		done := 0
		for _, j := range js {
			if (j.ID == oj || j.ID == mj) && j.State == "done" {
				done++
			}
		}
		return done == 2
	})
	for _, p := range []*proc{mo1, mo2} {
		var js []job
		p.json(&js, "job", "ls")
		ids := []string{}
		for _, j := range js {
			ids = append(ids, j.ID)
		}
		if slices.Contains(ids, oj) || !slices.Contains(ids, mj) {
			t.Fatalf("member's job ls %v: want %s and not %s", ids, mj, oj)
		}
		p.oneLineErr("", "job", "logs", oj)
		p.oneLineErr("", "job", "show", oj)
	}
	// The dashboard shows the member the same.
	if page := dashboardOf(t, mo1); strings.Contains(page, oj) || !strings.Contains(page, mj) {
		t.Fatalf("member's dashboard: want %s and not %s", mj, oj)
	}
	if page := dashboardOf(t, owner); !strings.Contains(page, oj) || !strings.Contains(page, mj) {
		t.Fatalf("owner's dashboard lacks a job")
	}
	// Each node answers logs from its own ledger: a job done on the
	// owner's node may still be pending on another (the item's result not
	// yet received), and "no output here yet" is then right. Ask a node
	// once it has the job done itself.
	waitJobDone(t, mo2, mj, 30*time.Second)
	if out := mo2.must("job", "logs", mj); !strings.Contains(out, "mo-out") {
		t.Fatalf("mo's own logs from the other machine: %q", out)
	}
	var all []job
	ada.json(&all, "job", "ls")
	if len(all) != 2 {
		t.Fatalf("admin sees %d jobs, want 2", len(all))
	}
	waitJobDone(t, ada, oj, 30*time.Second)
	if out := ada.must("job", "logs", oj); !strings.Contains(out, "secret-olive") {
		t.Fatalf("admin's logs of the owner's job: %q", out)
	}

	// Roles: a second admin; admins cannot demote or remove each other, on
	// any node; the owner can.
	owner.must("member", "set-role", moID, "admin")
	eventually(t, 20*time.Second, "mo is an admin on ada's node", func() bool {
		m := findMember(ada.members(), moID)
		return m != nil && m.Role == "admin"
	})
	ada.oneLineErr("owner", "member", "set-role", moID, "member")
	ada.oneLineErr("owner", "member", "remove", moID)
	mo2.oneLineErr("owner", "member", "remove", adaID)
	mo1.oneLineErr("owner", "member", "remove", olive.ID)
	owner.oneLineErr("transfer", "member", "leave")
	owner.must("member", "set-role", moID, "member")

	// Transfer: the org goes to ada; olive, now an admin, may leave.
	owner.oneLineErr("admin", "org", "transfer", "--to", moID)
	owner.must("org", "transfer", "--to", adaID)
	eventually(t, 20*time.Second, "ada owns the org on every node", func() bool {
		for _, p := range []*proc{owner, ada, mo1} {
			var o struct {
				Owner string `json:"owner"`
			}
			p.json(&o, "org", "show")
			if o.Owner != adaID {
				return false
			}
		}
		return true
	})

	// A removed person's machine that joins again is pending, with history.
	ada.must("member", "remove", moID)
	eventually(t, 30*time.Second, "mo1 out of the org", func() bool {
		return orgOf(mo1) == "-"
	})
	key2 := lastLine(ada.must("org", "key"))
	mo1.must("node", "join", "--org-key", key2)
	var again ownedMachine
	eventually(t, 20*time.Second, "mo1 pending again on ada's node, with its history", func() bool {
		out := ada.must("machine", "show", machineID(t, mo1), "--json")
		if json.Unmarshal([]byte(out), &again) != nil || again.Status != "pending" {
			return false
		}
		var hist []string
		for _, h := range again.History {
			hist = append(hist, h.Status)
		}
		return slices.Contains(hist, "removed") && hist[len(hist)-1] == "pending"
	})
	if findMember(ada.members(), moID) != nil {
		t.Fatal("a removed person is a member again before approval")
	}
}

// TestOrgDeleteEveryNode: the owner deletes the org; every node reports no
// org within 3 heartbeat intervals (500 ms here, with slack for process
// scheduling on a busy runner), and each can create a new org.
func TestOrgDeleteEveryNode(t *testing.T) {
	conf := execConf(t, 2)
	ps := mesh(t, 3, "--config", conf)
	id := lastLine(ps[1].must("job", "submit", "--driver", "exec", "--cpus", "2", "--range", "1-50", "--", "sh", "-c", "sleep 30"))
	_ = id
	ps[1].oneLineErr("owner", "org", "delete", "--confirm", "e2e")
	ps[0].oneLineErr("confirm", "org", "delete", "--confirm", "e2f")
	ps[0].must("org", "delete", "--confirm", "e2e")
	eventually(t, 10*time.Second, "no org on any node", func() bool {
		for _, p := range ps {
			if orgOf(p) != "-" {
				return false
			}
		}
		return true
	})
	for i, p := range ps {
		p.must("org", "create", "--name", "fresh"+string(rune('a'+i)))
	}
}

// orgOf is the org p's node reports ("-" for none, "" while its API is
// down: a node that leaves its org starts again).
func orgOf(p *proc) string {
	out, _, code := p.cli("node", "status", "--json")
	var st status
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
		return ""
	}
	if st.Org == "" {
		return "-"
	}
	return st.Org
}

// dashboardOf fetches p's dashboard page.
func dashboardOf(t *testing.T, p *proc) string {
	t.Helper()
	// Sign in as a person would: the URL `node dashboard` prints opens a
	// session once; then the jobs page, with the session's cookie.
	var url string
	for _, f := range strings.Fields(p.must("node", "dashboard")) {
		if strings.HasPrefix(f, "http://") || strings.HasPrefix(f, "https://") {
			url = f
		}
	}
	if url == "" {
		t.Fatal("node dashboard printed no URL")
	}
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	get := func(u string) string {
		t.Helper()
		resp, err := c.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("dashboard %s: %d %v", u, resp.StatusCode, err)
		}
		return string(b)
	}
	get(url)
	base := url[:strings.Index(url, "/login")]
	return get(base + "/jobs")
}
