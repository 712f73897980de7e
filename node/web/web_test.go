package web

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestSessionsCodesAndExpiry: a code opens one session, once, before it
// expires; a session ends at its expiry or when ended.
func TestSessionsCodesAndExpiry(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := newSessions(c.now, 2*time.Minute, time.Hour)
	withCookie := func(id string) *http.Request {
		r := httptest.NewRequest("GET", "/", nil)
		r.AddCookie(&http.Cookie{Name: CookieName, Value: id})
		return r
	}
	code, exp := s.newCode()
	if !exp.Equal(c.now().Add(2 * time.Minute)) {
		t.Errorf("code expires %v", exp)
	}
	if s.redeem("nope") != "" || s.redeem("") != "" {
		t.Error("a wrong code opened a session")
	}
	id := s.redeem(code)
	if id == "" {
		t.Fatal("the code opened no session")
	}
	if s.redeem(code) != "" {
		t.Error("a code opened a second session")
	}
	if _, se := s.get(withCookie(id)); se == nil {
		t.Fatal("the new session is not live")
	}
	late, _ := s.newCode()
	c.add(2 * time.Minute)
	if s.redeem(late) != "" {
		t.Error("an expired code opened a session")
	}
	c.add(58*time.Minute - time.Second)
	if _, se := s.get(withCookie(id)); se == nil {
		t.Error("the session ended before its hour")
	}
	c.add(time.Second)
	if _, se := s.get(withCookie(id)); se != nil {
		t.Error("the session outlived its hour")
	}
	code, _ = s.newCode()
	id = s.redeem(code)
	s.end(id)
	if _, se := s.get(withCookie(id)); se != nil {
		t.Error("an ended session is live")
	}
	// Bounded: many codes and sessions keep at most the bounds.
	for range 3 * maxSessions {
		code, _ := s.newCode()
		s.redeem(code)
	}
	if len(s.codes) > maxCodes || len(s.sessions) > maxSessions {
		t.Errorf("%d codes, %d sessions kept", len(s.codes), len(s.sessions))
	}
}

// hostile holds ESC, CR, LF, NUL, DEL and a bidi override.
const hostile = "evil\x1b[2J\x1b[31m\rCR\nLF\x00NUL\x7fDEL\u202eRLO"

// TestPagesEscapeHostileText: names that another member wrote (as an older
// node's ledger might hold them) reach no page, fragment or picture raw.
func TestPagesEscapeHostileText(t *testing.T) {
	d := New(Config{Services: api.Services{}, Now: time.Now})
	ms := []api.MachineInfo{{ID: "m1", Name: hostile, OwnerName: hostile, Status: "available"}}
	js := []api.JobInfo{{ID: "j1", Name: hostile, SubmitterName: hostile, State: "running", Cmd: []string{hostile}, Items: api.Items{Total: 4, Done: 1, Running: 1, Failed: 1, Pending: 1}}}
	st := api.NodeStatus{Org: "o", OrgName: hostile, PersonName: hostile, Role: ledger.RoleOwner}
	for name, data := range map[string]any{
		"machines": ms,
		"jobs":     jobsData{Jobs: js},
		"job": jobData{Job: js[0], Explain: &api.JobExplain{Job: "j1", Machines: []api.MachineWaits{{Machine: "m1", Name: hostile, Status: "approved",
			Reasons: []api.WaitReason{{Code: "busy_higher_priority", Text: hostile}}}}}},
		"members":  []api.MemberInfo{{ID: "p", Name: hostile, Role: "member"}},
		"dataset":  api.DatasetInfo{Name: hostile, CID: "bafy", Access: "org", Owner: "o", OwnerName: hostile},
		"overview": overview{Org: api.OrgInfo{Name: hostile, OwnerName: hostile}, Machines: ms, Jobs: js, Events: []event{{"", hostile}}, Busy: busyChart(nil, time.Now())},
		"settings": settingsData{Org: api.OrgInfo{Name: hostile}, Fields: settingsForm(api.OrgInfo{Name: hostile, Description: hostile})},
	} {
		var b strings.Builder
		v := &view{Page: name, Title: hostile, Status: st, InOrg: true, Admin: true, Owner: true, Now: time.Now(), Data: data}
		if err := d.pages[name].ExecuteTemplate(&b, "layout", v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		page := b.String()
		if name == "settings" {
			// The form's fields hold the exact text, as --json does, so
			// that saving the form does not rewrite it.
			page = formFields.ReplaceAllString(page, "")
		}
		for _, line := range strings.Split(page, "\n") {
			if text.Escape(line) != line {
				t.Errorf("%s: a line holds a control character: %q", name, line)
			}
		}
		if !strings.Contains(page, `evil\x1b[2J`) {
			t.Errorf("%s does not show the escaped name", name)
		}
	}
}

var formFields = regexp.MustCompile(`(?s)value="[^"]*"|<textarea[^>]*>.*?</textarea>`)

// TestPictures: the job bar's parts add up to the whole, the grid has a
// cell per machine in its status's colour, the chart draws its samples.
func TestPictures(t *testing.T) {
	bar := string(jobBar(api.Items{Total: 10, Done: 5, Running: 2, Failed: 1, Pending: 2}))
	for _, want := range []string{`class="i-done" x="0.00" width="100.00"`, `class="i-running" x="100.00" width="40.00"`, `class="i-failed" x="140.00" width="20.00"`, `class="i-pending" x="160.00" width="40.00"`} {
		if !strings.Contains(bar, want) {
			t.Errorf("job bar lacks %s:\n%s", want, bar)
		}
	}
	grid := string(machineGrid([]api.MachineInfo{{ID: "a", Status: "available"}, {ID: "b", Status: "busy"}, {ID: "c", Status: "offline"}, {ID: "d", Status: "pending"}, {ID: "e", Status: "busy", DiskFull: true}}))
	for _, want := range []string{"st-available", "st-busy", "st-offline", "st-pending", "st-diskfull"} {
		if strings.Count(grid, `class="`+want+`"`) != 1 {
			t.Errorf("grid: want one %s cell:\n%s", want, grid)
		}
	}
	now := time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)
	var b busySamples
	b.add(now.Add(-2*time.Hour), 9, 9) // older than the hour: dropped
	b.add(now.Add(-30*time.Minute), 2, 8)
	b.add(now, 4, 8)
	if got := b.get(); len(got) != 2 {
		t.Fatalf("kept %d samples, want the hour's 2", len(got))
	}
	chart := string(busyChart(b.get(), now))
	if !strings.Contains(chart, "4 of 8 slots busy") || !strings.Contains(chart, `class="c-busy"`) {
		t.Errorf("chart:\n%s", chart)
	}
}

// TestSignInCodeIsAPath: the code's path signs in; the sampler stops with
// its context.
func TestSignInCodeIsAPath(t *testing.T) {
	d := New(Config{Services: api.Services{}, Now: time.Now})
	c, err := d.SignInCode(context.Background())
	if err != nil || c.Path != "/login?code="+c.Code || len(c.Code) != 40 {
		t.Fatalf("%+v %v", c, err)
	}
	mux := http.NewServeMux()
	d.Register(mux)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", c.Path, nil))
	if rec.Code != http.StatusSeeOther || !strings.Contains(rec.Header().Get("Set-Cookie"), "SameSite=Strict") || !strings.Contains(rec.Header().Get("Set-Cookie"), "HttpOnly") {
		t.Errorf("sign in: %d %q", rec.Code, rec.Header().Get("Set-Cookie"))
	}
	req := httptest.NewRequest("GET", "/", nil)
	for _, ck := range rec.Result().Cookies() {
		req.AddCookie(ck)
	}
	if !d.SessionOK(req) || d.SessionOK(httptest.NewRequest("GET", "/", nil)) {
		t.Error("SessionOK does not tell a signed-in request from another")
	}
}

// TestDatasetPermissionsOffered: the access form is offered to the
// dataset's owner and to admins, and to no other member.
func TestDatasetPermissionsOffered(t *testing.T) {
	d := New(Config{Services: api.Services{}, Now: time.Now})
	ds := api.DatasetInfo{Name: "frames", CID: "bafy", Access: "org", Owner: "ann", OwnerName: "ann"}
	for _, c := range []struct {
		person string
		admin  bool
		offer  bool
	}{{"ann", false, true}, {"bob", true, true}, {"bob", false, false}} {
		var b strings.Builder
		v := &view{Page: "dataset", Status: api.NodeStatus{Org: "o", Person: c.person}, InOrg: true, Admin: c.admin, Now: time.Now(), Data: ds}
		if err := d.pages["dataset"].ExecuteTemplate(&b, "layout", v); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(b.String(), `id="access-form"`); got != c.offer {
			t.Errorf("%s (admin %v): access form offered %v, want %v", c.person, c.admin, got, c.offer)
		}
		if !strings.Contains(b.String(), "every member of the org reads it") {
			t.Errorf("%s: the page does not say who reads it", c.person)
		}
	}
}
