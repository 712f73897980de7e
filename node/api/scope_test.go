package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cshare/cshare/node/events"
)

// Every route of the API, called with a token of each scope: a token whose
// scope is below the route's is refused (403, naming both), one at or
// above it is let through, and no token or a wrong one is a 401.
func TestScopesOnEveryRoute(t *testing.T) {
	svc := stubs()
	svc.Gateway = &gwStub{}
	bus := events.NewBus(time.Now)
	svc.Events = bus
	toks, err := OpenTokens(filepath.Join(t.TempDir(), TokensFile), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	svc.Tokens = toks
	ctx := context.Background()
	secrets := map[Scope]string{}
	for _, s := range []Scope{ScopeRead, ScopeSubmit, ScopeAdmin} {
		c, err := toks.CreateToken(ctx, TokenCreate{Scope: s.String(), Expires: "1h", Name: "t " + s.String()})
		if err != nil {
			t.Fatal(err)
		}
		secrets[s] = c.Token
	}
	expired := &Tokens{path: filepath.Join(t.TempDir(), TokensFile), now: func() time.Time { return time.Now().Add(-2 * time.Hour) }}
	old, _ := expired.CreateToken(ctx, TokenCreate{Scope: "admin", Expires: "1h"})
	toks.recs = append(toks.recs, expired.recs...)
	mux := HandlerAuth(svc, Auth{Token: "tok", Lookup: toks.Lookup})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	wild := regexp.MustCompile(`\{[a-z]+\}`)
	counts := map[Scope]int{}
	patterns := mux.Patterns()
	if len(patterns) < 56 {
		t.Fatalf("only %d routes: %v", len(patterns), patterns)
	}
	for _, p := range patterns {
		method, path, _ := strings.Cut(p, " ")
		path = wild.ReplaceAllString(path, "x1")
		if strings.HasSuffix(path, "/{action}") || strings.Contains(p, "{action}") {
			path = strings.TrimSuffix(path, "x1") + "stop"
		}
		need := RouteScope(p)
		counts[need]++
		if method == http.MethodGet && need > ScopeSubmit && !adminGets[p] {
			t.Errorf("%s needs %s", p, need)
		}
		for _, c := range []struct {
			token string
			has   Scope
		}{{"", ScopeNone}, {"wrong", ScopeNone}, {old.Token, ScopeNone}, {secrets[ScopeRead], ScopeRead},
			{secrets[ScopeSubmit], ScopeSubmit}, {secrets[ScopeAdmin], ScopeAdmin}, {"tok", ScopeAdmin}} {
			req, _ := http.NewRequest(method, srv.URL+path+"?follow=false&item=1&path=/x", strings.NewReader(""))
			if c.token != "" {
				req.Header.Set("Authorization", "Bearer "+c.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			switch {
			case c.has == ScopeNone && resp.StatusCode != http.StatusUnauthorized:
				t.Errorf("%s with a bad token: %d, want 401", p, resp.StatusCode)
			case c.has != ScopeNone && c.has < need && resp.StatusCode != http.StatusForbidden:
				t.Errorf("%s with a %s token: %d, want 403 (it needs %s)", p, c.has, resp.StatusCode, need)
			case c.has >= need && (resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusUnauthorized):
				t.Errorf("%s with a %s token: %d, want it let through", p, c.has, resp.StatusCode)
			}
		}
	}
	t.Logf("routes by scope: read %d, submit %d, admin %d", counts[ScopeRead], counts[ScopeSubmit], counts[ScopeAdmin])
	// A revoked token is refused at once.
	list, _ := toks.ListTokens(ctx)
	if len(list) != 4 || !list[3].Expired || list[0].Expired {
		t.Fatalf("tokens: %+v", list)
	}
	if _, err := toks.RevokeToken(ctx, list[0].ID); err != nil {
		t.Fatal(err)
	}
	if _, ok := toks.Lookup(secrets[ScopeRead]); ok {
		t.Fatal("a revoked token still admitted")
	}
	// Kept hashed: the file holds no secret, and a node reading it again
	// knows the same tokens.
	again, err := OpenTokens(toks.path, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := again.Lookup(secrets[ScopeSubmit]); !ok || s != ScopeSubmit {
		t.Fatalf("after reopening: %v %v", s, ok)
	}
	b, _ := os.ReadFile(toks.path)
	for _, sec := range secrets {
		if strings.Contains(string(b), strings.TrimPrefix(sec, tokenPrefix)) {
			t.Fatal("the tokens file holds a secret")
		}
	}
	for _, c := range []struct {
		req  TokenCreate
		want string
	}{
		{TokenCreate{Scope: "root", Expires: "1h"}, "scope: \"root\" is not a scope; allowed: read, submit, admin"},
		{TokenCreate{Scope: "read", Expires: "soon"}, "expires: \"soon\" is not a lifetime"},
		{TokenCreate{Scope: "read", Expires: "30s"}, "expires:"},
		{TokenCreate{Scope: "read", Expires: "99999d"}, "expires:"},
		{TokenCreate{Scope: "read", Expires: "1h", Name: "a\x1bb"}, "name"},
	} {
		if _, err := toks.CreateToken(ctx, c.req); err == nil || !strings.HasPrefix(err.Error(), strings.SplitN(c.want, ":", 2)[0]) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("create %+v: %v, want %q", c.req, err, c.want)
		}
	}
}

// TestSessionReadsEventsAlone: a dashboard session (Auth.Session) opens
// the event stream, and nothing else: every other route still wants a
// token.
func TestSessionReadsEventsAlone(t *testing.T) {
	svc := stubs()
	svc.Gateway = &gwStub{}
	svc.Events = events.NewBus(time.Now)
	signedIn := func(r *http.Request) bool {
		c, err := r.Cookie("session")
		return err == nil && c.Value == "good"
	}
	mux := HandlerAuth(svc, Auth{Token: "tok", Session: signedIn})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	get := func(path, cookie string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if cookie != "" {
			req.AddCookie(&http.Cookie{Name: "session", Value: cookie})
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := get("/v1/events?follow=false", "good"); c != http.StatusOK {
		t.Fatalf("events with a session: %d, want 200", c)
	}
	if c := get("/v1/events?follow=false", "bad"); c != http.StatusUnauthorized {
		t.Fatalf("events with a bad session: %d, want 401", c)
	}
	for _, p := range []string{"/v1/status", "/v1/jobs", "/v1/org/key"} {
		if c := get(p, "good"); c != http.StatusUnauthorized {
			t.Errorf("%s with a session: %d, want 401", p, c)
		}
	}
}
