package node

import (
	"bytes"
	"context"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/node/web"
)

// dashClient is a browser's side of the dashboard over plain HTTP: a
// cookie jar, no redirects followed.
type dashClient struct {
	c    *http.Client
	base string
}

// dashboardSession signs in to n's dashboard with a one-time code, as the
// URL of `cshare node dashboard` does.
func dashboardSession(t *testing.T, n *Node) *dashClient {
	t.Helper()
	d := newDashClient(t, n)
	code, err := n.web.SignInCode(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st, h := d.do(t, "GET", code.Path, "", nil); st != http.StatusSeeOther || h.Get("Location") != "/" {
		t.Fatalf("sign in: %d to %q, want 303 to /", st, h.Get("Location"))
	}
	return d
}

func newDashClient(t *testing.T, n *Node) *dashClient {
	jar, _ := cookiejar.New(nil)
	return &dashClient{c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}, base: "http://" + n.APIAddr()}
}

func (d *dashClient) do(t *testing.T, method, path, body string, hdr map[string]string) (int, http.Header) {
	t.Helper()
	st, h, _ := d.doBody(t, method, path, body, hdr)
	return st, h
}

func (d *dashClient) doBody(t *testing.T, method, path, body string, hdr map[string]string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, d.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if method == "POST" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
		}
		req.Header.Set(k, v)
	}
	resp, err := d.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func (d *dashClient) get(t *testing.T, path string) (int, string) {
	t.Helper()
	st, _, b := d.doBody(t, "GET", path, "", nil)
	return st, b
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// csrf is the CSRF token of the session's pages.
func (d *dashClient) csrf(t *testing.T) string {
	t.Helper()
	_, page := d.get(t, "/")
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token on the overview:\n%s", page)
	}
	return m[1]
}

// TestDashboardNeedsItsSession is the must-hold over HTTP on a real
// node: no page, fragment or action without a session; the API token is no
// session; a code opens one session once; a form without the CSRF token,
// or sent from another site, is refused; Sign out ends the session.
func TestDashboardNeedsItsSession(t *testing.T) {
	m := newMesh(t, meshConfig{n: 1, interval: 200 * time.Millisecond, slots: 1})
	m.formOrg()
	n := m.nodes[0].Node
	anon := newDashClient(t, n)
	pages := []string{"/", "/machines", "/jobs", "/members", "/datasets", "/market", "/usage", "/settings", "/machines?frag=frag-machines"}
	for _, p := range pages {
		if st, body := anon.get(t, p); st != http.StatusUnauthorized || strings.Contains(body, "acme") {
			t.Errorf("GET %s without a session: %d, want 401 and nothing of the org", p, st)
		}
	}
	// The API token is not a session.
	if st, _ := anon.do(t, "GET", "/", "", map[string]string{"Authorization": "Bearer " + n.Token()}); st != http.StatusUnauthorized {
		t.Errorf("GET / with the API token: %d, want 401", st)
	}
	if st, _ := anon.do(t, "POST", "/settings", "name=x", nil); st != http.StatusUnauthorized {
		t.Errorf("POST /settings without a session: %d, want 401", st)
	}
	// The CLI's way to a code: the API, with the token.
	cl := api.NewClient(n.APIAddr(), n.Token())
	code, err := cl.DashboardCode(ctxT(t))
	if err != nil || !strings.HasPrefix(code.Path, "/login?code=") {
		t.Fatalf("POST /v1/dashboard/code: %+v, %v", code, err)
	}
	if _, err := api.NewClient(n.APIAddr(), "wrong").DashboardCode(ctxT(t)); statusCode(err) != http.StatusUnauthorized {
		t.Errorf("a code without the token: %v, want 401", err)
	}
	d := newDashClient(t, n)
	if st, h := d.do(t, "GET", code.Path, "", nil); st != http.StatusSeeOther {
		t.Fatalf("sign in: %d", st)
	} else if c := (&http.Response{Header: h}).Cookies(); len(c) != 1 || c[0].Name != web.CookieName || !c[0].HttpOnly || c[0].SameSite != http.SameSiteStrictMode {
		t.Errorf("session cookie: %+v, want HttpOnly SameSite=Strict", c)
	}
	if st, _ := newDashClient(t, n).do(t, "GET", code.Path, "", nil); st != http.StatusUnauthorized {
		t.Errorf("the same code again: %d, want 401 (single use)", st)
	}
	for _, p := range pages {
		if st, _ := d.get(t, p); st != http.StatusOK {
			t.Errorf("GET %s signed in: %d, want 200", p, st)
		}
	}
	tok := d.csrf(t)
	form := url.Values{"csrf": {tok}, "name": {"acme2"}, "old.name": {"acme"}}.Encode()
	for what, hdr := range map[string]map[string]string{
		"no CSRF token":   nil,
		"cross-site":      {"Sec-Fetch-Site": "cross-site"},
		"foreign Origin":  {"Origin": "http://evil.example"},
		"a rebound Host?": {"Host": "evil.example"},
	} {
		body := form
		if hdr == nil {
			body = "name=acme2&old.name=acme"
		}
		if st, _ := d.do(t, "POST", "/settings", body, hdr); st != http.StatusForbidden {
			t.Errorf("POST /settings with %s: %d, want 403", what, st)
		}
	}
	if o, _ := cl.Org(ctxT(t)); o.Name != "acme" {
		t.Fatalf("a refused form changed the org's name to %q", o.Name)
	}
	if st, h := d.do(t, "POST", "/settings", form, map[string]string{"Origin": d.base, "Sec-Fetch-Site": "same-origin"}); st != http.StatusSeeOther || h.Get("Location") != "/settings" {
		t.Errorf("POST /settings from the page: %d to %q, want 303 to /settings", st, h.Get("Location"))
	}
	eventually(t, 10*time.Second, "the name set from the dashboard", func() string {
		if o, _ := cl.Org(ctxT(t)); o.Name != "acme2" {
			return "name " + o.Name
		}
		return ""
	})
	// Upload a dataset as the page's script does (multipart, the CSRF
	// token in a header): refused without the token, added with it.
	var mp bytes.Buffer
	mw := multipart.NewWriter(&mp)
	_ = mw.WriteField("name", "frames")
	fw, _ := mw.CreateFormFile("file", "frames.txt")
	_, _ = fw.Write([]byte("frame 1\nframe 2\n"))
	_ = mw.Close()
	upload := func(csrf string) (int, string) {
		st, _, body := d.doBody(t, "POST", "/datasets/upload", mp.String(), map[string]string{"Content-Type": mw.FormDataContentType(), "X-CSRF-Token": csrf})
		return st, body
	}
	if st, _ := upload("wrong"); st != http.StatusForbidden {
		t.Errorf("upload with a wrong CSRF token: %d, want 403", st)
	}
	if st, body := upload(tok); st != http.StatusOK || !strings.Contains(body, `"name":"frames"`) {
		t.Errorf("upload: %d %s", st, body)
	}
	if ds, err := cl.Dataset(ctxT(t), "frames"); err != nil || ds.Size != 16 {
		t.Errorf("the uploaded dataset: %+v %v", ds, err)
	}
	if st, page := d.get(t, "/datasets"); st != http.StatusOK || !strings.Contains(page, "frames") {
		t.Errorf("GET /datasets after the upload: %d, lists frames: %v", st, strings.Contains(page, "frames"))
	}
	// Its permissions on its page: shown, and changed by the form (the
	// API's service call), not without the CSRF token.
	if st, page := d.get(t, "/datasets/frames"); st != http.StatusOK || !strings.Contains(page, `id="access-form"`) || !strings.Contains(page, "<b>org</b>") {
		t.Errorf("GET /datasets/frames: %d, offers the access form and says org: %v", st, strings.Contains(page, `id="access-form"`))
	}
	if st, _ := d.do(t, "POST", "/datasets/frames/access", "access=private", nil); st != http.StatusForbidden {
		t.Errorf("access without the CSRF token: %d, want 403", st)
	}
	if st, h := d.do(t, "POST", "/datasets/frames/access", url.Values{"csrf": {tok}, "access": {"private"}}.Encode(), nil); st != http.StatusSeeOther || h.Get("Location") != "/datasets/frames" {
		t.Errorf("access private from the page: %d to %q", st, h.Get("Location"))
	}
	if ds, err := cl.Dataset(ctxT(t), "frames"); err != nil || ds.Access != "private" {
		t.Errorf("after the page made it private: %+v %v", ds, err)
	}
	if _, page := d.get(t, "/datasets/frames"); !strings.Contains(page, "<b>private</b>") || !strings.Contains(page, "is now private") {
		t.Errorf("the page after the change does not say private")
	}
	// An API access token from the Settings form: shown once, works on
	// the API, listed, and gone once its Revoke form is sent.
	if st, h := d.do(t, "POST", "/tokens", url.Values{"csrf": {tok}, "scope": {"read"}, "expires": {"1d"}, "name": {"ci"}}.Encode(), nil); st != http.StatusSeeOther || h.Get("Location") != "/settings" {
		t.Fatalf("create a token: %d to %q", st, h.Get("Location"))
	}
	_, page := d.get(t, "/settings")
	secret, row := regexp.MustCompile(`id="new-token">(cst_[0-9a-f]+)<`).FindStringSubmatch(page), regexp.MustCompile(`<tr id="token-([0-9a-f]+)">`).FindStringSubmatch(page)
	if secret == nil || row == nil {
		t.Fatalf("the new token is not shown and listed:\n%s", page)
	}
	if _, err := api.NewClient(n.APIAddr(), secret[1]).Org(ctxT(t)); err != nil {
		t.Errorf("the page's read token on GET /v1/org: %v", err)
	}
	if st, _ := d.do(t, "POST", "/tokens/"+row[1]+"/revoke", url.Values{"csrf": {tok}}.Encode(), nil); st != http.StatusSeeOther {
		t.Errorf("revoke: %d", st)
	}
	if ts, err := cl.Tokens(ctxT(t)); err != nil || len(ts) != 0 {
		t.Errorf("tokens after the page revoked its one: %+v %v", ts, err)
	}
	if _, page := d.get(t, "/settings"); strings.Contains(page, `id="token-`+row[1]) {
		t.Error("the revoked token is still listed")
	}
	if st, _ := d.do(t, "POST", "/logout", url.Values{"csrf": {tok}}.Encode(), nil); st != http.StatusSeeOther {
		t.Errorf("sign out: %d", st)
	}
	if st, _ := d.get(t, "/"); st != http.StatusUnauthorized {
		t.Errorf("GET / after signing out: %d, want 401", st)
	}
}
