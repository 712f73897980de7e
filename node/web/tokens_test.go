package web

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
)

// fakeNode, fakeOrg and fakeMarket answer what the Settings and Market
// pages read; every other method is the nil interface's (unused).
type fakeNode struct {
	api.NodeAPI
	role string
}

func (f fakeNode) Status(context.Context) (api.NodeStatus, error) {
	return api.NodeStatus{Org: "o1", OrgName: "acme", Person: "p1", PersonName: "ann", Role: f.role}, nil
}

type fakeOrg struct{ api.OrgAPI }

func (fakeOrg) Org(context.Context) (api.OrgInfo, error) { return api.OrgInfo{Name: "acme"}, nil }

type fakeMarket struct {
	api.MarketAPI
	cs []api.ContractInfo
}

func (fakeMarket) Offers(context.Context, string, string) ([]api.OfferInfo, error) { return nil, nil }
func (f fakeMarket) Contracts(context.Context) ([]api.ContractInfo, error)         { return f.cs, nil }

// signedIn serves d and signs in: the mux and the session's cookies.
func signedIn(t *testing.T, d *Dashboard) (*http.ServeMux, []*http.Cookie) {
	t.Helper()
	mux := http.NewServeMux()
	d.Register(mux)
	c, err := d.SignInCode(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", c.Path, nil))
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("sign in: %d", rec.Code)
	}
	return mux, rec.Result().Cookies()
}

// serve is one request with the session's cookies: its status, Location
// and body.
func serve(mux *http.ServeMux, cookies []*http.Cookie, method, path string, form url.Values) (int, string, string) {
	var req *http.Request
	if method == "POST" {
		req = httptest.NewRequest("POST", path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		req = httptest.NewRequest(method, path, nil)
	}
	for _, c := range cookies {
		req.AddCookie(c)
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	return rec.Code, rec.Header().Get("Location"), rec.Body.String()
}

var (
	csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)
	newToken  = regexp.MustCompile(`<code id="new-token">(cst_[0-9a-f]+)</code>`)
	tokenRow  = regexp.MustCompile(`<tr id="token-([0-9a-f]+)">`)
)

// TestSettingsTokens: an admin creates a token from the Settings form and
// sees its secret once; the list shows it; its Revoke form removes it. A
// form without the CSRF token is refused, and a member is offered nothing
// and refused.
func TestSettingsTokens(t *testing.T) {
	now := func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
	toks, err := api.OpenTokens(filepath.Join(t.TempDir(), api.TokensFile), now)
	if err != nil {
		t.Fatal(err)
	}
	d := New(Config{Services: api.Services{Node: fakeNode{role: ledger.RoleAdmin}, Org: fakeOrg{}, Tokens: toks}, Now: now})
	mux, ck := signedIn(t, d)
	st, _, page := serve(mux, ck, "GET", "/settings", nil)
	if st != http.StatusOK || !strings.Contains(page, `id="token-form"`) || !strings.Contains(page, "No token.") {
		t.Fatalf("settings: %d, want the token form and no token:\n%s", st, page)
	}
	csrf := csrfField.FindStringSubmatch(page)[1]

	form := url.Values{"scope": {"submit"}, "expires": {"30d"}, "name": {"ci-bot"}}
	if st, _, _ := serve(mux, ck, "POST", "/tokens", form); st != http.StatusForbidden {
		t.Errorf("create without CSRF: %d, want 403", st)
	}
	form.Set("csrf", csrf)
	if st, to, _ := serve(mux, ck, "POST", "/tokens", form); st != http.StatusSeeOther || to != "/settings" {
		t.Fatalf("create: %d to %q", st, to)
	}
	_, _, page = serve(mux, ck, "GET", "/settings", nil)
	m := newToken.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the new token's secret is not shown:\n%s", page)
	}
	if scope, ok := toks.Lookup(m[1]); !ok || scope.String() != "submit" {
		t.Errorf("the shown secret is not a submit token: %v %v", scope, ok)
	}
	rows := tokenRow.FindAllStringSubmatch(page, -1)
	if len(rows) != 1 || !strings.Contains(page, "ci-bot") || !strings.Contains(page, "2026-01-31T00:00:00Z") {
		t.Fatalf("token list: %v\n%s", rows, page)
	}
	_, _, again := serve(mux, ck, "GET", "/settings", nil)
	if strings.Contains(again, m[1]) {
		t.Error("the secret is shown a second time")
	}

	// A bad scope is named, and makes nothing.
	serve(mux, ck, "POST", "/tokens", url.Values{"scope": {"root"}, "expires": {"30d"}, "csrf": {csrf}})
	if _, _, p := serve(mux, ck, "GET", "/settings", nil); !strings.Contains(p, `role="alert">scope: `) || len(tokenRow.FindAllString(p, -1)) != 1 {
		t.Errorf("a bad scope: no error naming it, or a token made:\n%s", p)
	}

	id := rows[0][1]
	if st, _, _ := serve(mux, ck, "POST", "/tokens/"+id+"/revoke", nil); st != http.StatusForbidden {
		t.Errorf("revoke without CSRF: %d, want 403", st)
	}
	if st, to, _ := serve(mux, ck, "POST", "/tokens/"+id+"/revoke", url.Values{"csrf": {csrf}}); st != http.StatusSeeOther || to != "/settings" {
		t.Fatalf("revoke: %d to %q", st, to)
	}
	_, _, page = serve(mux, ck, "GET", "/settings", nil)
	if tokenRow.MatchString(page) || !strings.Contains(page, "Revoked token "+id) {
		t.Errorf("the revoked token is still listed:\n%s", page)
	}
	if _, ok := toks.Lookup(m[1]); ok {
		t.Error("the revoked token still works")
	}

	// A member: the page is refused, and so are its forms.
	dm := New(Config{Services: api.Services{Node: fakeNode{role: ledger.RoleMember}, Org: fakeOrg{}, Tokens: toks}, Now: now})
	mux, ck = signedIn(t, dm)
	st, _, page = serve(mux, ck, "GET", "/settings", nil)
	if st != http.StatusForbidden || strings.Contains(page, "token-form") {
		t.Errorf("a member's settings: %d\n%s", st, page)
	}
	csrf = csrfField.FindStringSubmatch(page)[1]
	serve(mux, ck, "POST", "/tokens", url.Values{"scope": {"admin"}, "expires": {"1d"}, "csrf": {csrf}})
	if ts, _ := toks.ListTokens(context.Background()); len(ts) != 0 {
		t.Errorf("a member created a token: %+v", ts)
	}
}

// TestMarketJupyterLink: a contract with a Jupyter URL shows it as a
// link; one without shows none.
func TestMarketJupyterLink(t *testing.T) {
	const u = "https://10.0.0.7:8443/c/abc123/?token=s3cret"
	cs := []api.ContractInfo{{ID: "c-jupyter", State: "running", Renter: "p1", JupyterURL: u}, {ID: "c-plain", State: "running", Renter: "p1"}}
	d := New(Config{Services: api.Services{Node: fakeNode{role: ledger.RoleMember}, Org: fakeOrg{}, Market: fakeMarket{cs: cs}}, Now: time.Now})
	mux, ck := signedIn(t, d)
	st, _, page := serve(mux, ck, "GET", "/market?frag=frag-contracts", nil)
	if st != http.StatusOK {
		t.Fatalf("contracts: %d\n%s", st, page)
	}
	link := `<a href="https://10.0.0.7:8443/c/abc123/?token=s3cret" class="jupyter"`
	if strings.Count(page, link) != 1 || strings.Count(page, `class="jupyter"`) != 1 {
		t.Errorf("want one Jupyter link %s:\n%s", link, page)
	}
}
