package api

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// guarded serves a stand-in of the node's mux (a /v1 route that checks the
// bearer, the dashboard and /metrics) behind Guard on a real listener.
func guarded(t *testing.T, publicMetrics bool) (*httptest.Server, string) {
	t.Helper()
	const token = "s3cret"
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "dashboard") })
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "metrics") })
	mux.HandleFunc("POST /v1/echo", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var v map[string]any
		if err := DecodeBody(r.Body, &v); err != nil {
			writeJSON(w, err.(*StatusError).Code, Error{Error: err.Error()})
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	srv := httptest.NewUnstartedServer(nil)
	srv.Config.Handler = Guard(mux, GuardOptions{Token: token, Addr: srv.Listener.Addr().String(), PublicMetrics: publicMetrics})
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, token
}

func send(t *testing.T, c *http.Client, method, url, host, bearer, cookie string, body io.Reader) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if cookie != "" {
		req.AddCookie(&http.Cookie{Name: CookieName, Value: cookie})
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func TestGuardRefusesWithoutTokenOrWithForeignHost(t *testing.T) {
	srv, token := guarded(t, false)
	c := srv.Client()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	for _, path := range []string{"/", "/metrics"} {
		if code, _, _ := send(t, c, "GET", srv.URL+path, "", "", "", nil); code != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: %d, want 401", path, code)
		}
		if code, _, _ := send(t, c, "GET", srv.URL+path, "", "wrong", "", nil); code != http.StatusUnauthorized {
			t.Errorf("GET %s with a wrong token: %d, want 401", path, code)
		}
		if code, _, _ := send(t, c, "GET", srv.URL+path, "", "", "wrong", nil); code != http.StatusUnauthorized {
			t.Errorf("GET %s with a wrong cookie: %d, want 401", path, code)
		}
		// DNS rebinding: the browser sends the attacker's host name, with
		// or without the token (a cookie would be the attacker's site's).
		for _, host := range []string{"evil.example:" + port, "evil.example", "localhost.evil.example", "127.0.0.1.nip.io"} {
			if code, _, body := send(t, c, "GET", srv.URL+path, host, token, "", nil); code != http.StatusForbidden || strings.Count(body, "\n") != 1 {
				t.Errorf("GET %s with Host %s: %d %q, want 403 and one line", path, host, code, body)
			}
		}
		for _, host := range []string{"", "localhost", "localhost:1", "127.0.0.1:9", "[::1]:7480", srv.Listener.Addr().String()} {
			if code, _, _ := send(t, c, "GET", srv.URL+path, host, token, "", nil); code != http.StatusOK {
				t.Errorf("GET %s with Host %q and the token: %d, want 200", path, host, code)
			}
		}
	}
	if code, _, _ := send(t, c, "POST", srv.URL+"/v1/echo", "evil.example", token, "", strings.NewReader("{}")); code != http.StatusForbidden {
		t.Errorf("POST /v1/echo with a foreign Host: %d, want 403", code)
	}
}

func TestGuardTokenURLSetsCookieAndRedirects(t *testing.T) {
	srv, token := guarded(t, false)
	c := srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if code, _, _ := send(t, c, "GET", srv.URL+"/?token=nope", "", "", "", nil); code != http.StatusUnauthorized {
		t.Errorf("?token= with a wrong token: %d, want 401", code)
	}
	code, h, _ := send(t, c, "GET", srv.URL+"/?token="+url.QueryEscape(token), "", "", "", nil)
	if code != http.StatusSeeOther || h.Get("Location") != "/" {
		t.Fatalf("?token=: %d to %q, want 303 to /", code, h.Get("Location"))
	}
	cookies := (&http.Response{Header: h}).Cookies()
	if len(cookies) != 1 || cookies[0].Name != CookieName || cookies[0].Value != token || !cookies[0].HttpOnly || cookies[0].SameSite != http.SameSiteStrictMode {
		t.Fatalf("cookie: %+v, want %s HttpOnly SameSite=Strict", cookies, CookieName)
	}
	if code, _, body := send(t, c, "GET", srv.URL+"/", "", "", cookies[0].Value, nil); code != http.StatusOK || body != "dashboard" {
		t.Errorf("dashboard with the cookie: %d %q", code, body)
	}
	if code, _, _ := send(t, c, "GET", srv.URL+"/metrics", "", "", cookies[0].Value, nil); code != http.StatusOK {
		t.Errorf("metrics with the cookie: %d", code)
	}
	// The cookie is not the API's credential: /v1 wants the bearer.
	if code, _, _ := send(t, c, "POST", srv.URL+"/v1/echo", "", "", cookies[0].Value, strings.NewReader("{}")); code != http.StatusUnauthorized {
		t.Errorf("/v1 with the cookie only: %d, want 401", code)
	}
}

func TestGuardPublicMetricsOpensMetricsAlone(t *testing.T) {
	srv, _ := guarded(t, true)
	c := srv.Client()
	if code, _, body := send(t, c, "GET", srv.URL+"/metrics", "", "", "", nil); code != http.StatusOK || body != "metrics" {
		t.Errorf("public /metrics: %d %q, want 200", code, body)
	}
	if code, _, _ := send(t, c, "GET", srv.URL+"/", "", "", "", nil); code != http.StatusUnauthorized {
		t.Errorf("dashboard with public metrics: %d, want 401", code)
	}
	if code, _, _ := send(t, c, "GET", srv.URL+"/metrics", "evil.example", "", "", nil); code != http.StatusForbidden {
		t.Errorf("public /metrics with a foreign Host: %d, want 403", code)
	}
}

func TestGuardCapsBodies(t *testing.T) {
	srv, token := guarded(t, false)
	c := srv.Client()
	big := `{"a":"` + strings.Repeat("x", MaxBodySize) + `"}`
	// With a Content-Length: refused before the handler.
	code, _, body := send(t, c, "POST", srv.URL+"/v1/echo", "", token, "", strings.NewReader(big))
	if code != http.StatusRequestEntityTooLarge || strings.Count(body, "\n") != 1 || !strings.Contains(body, "larger than") {
		t.Errorf("big body: %d %q, want 413 and one line", code, body)
	}
	// Chunked (no Content-Length): the reader stops at the cap.
	code, _, body = send(t, c, "POST", srv.URL+"/v1/echo", "", token, "", io.MultiReader(strings.NewReader(big)))
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "larger than") {
		t.Errorf("big chunked body: %d %q, want 413", code, body)
	}
	// Outside /v1 too.
	if code, _, _ := send(t, c, "GET", srv.URL+"/", "", token, "", strings.NewReader(big)); code != http.StatusRequestEntityTooLarge {
		t.Errorf("big body to the dashboard: %d, want 413", code)
	}
	if code, _, body := send(t, c, "POST", srv.URL+"/v1/echo", "", token, "", strings.NewReader(`{"a":1}`)); code != http.StatusOK {
		t.Errorf("small body: %d %q", code, body)
	}
}

func TestHostAllowed(t *testing.T) {
	for _, tc := range []struct {
		host, addr string
		want       bool
	}{
		{"127.0.0.1:7480", "127.0.0.1:7480", true},
		{"localhost", "127.0.0.1:7480", true},
		{"LOCALHOST:8080", "127.0.0.1:7480", true},
		{"[::1]", "127.0.0.1:7480", true},
		{"10.0.0.5:7480", "0.0.0.0:7480", true},
		{"10.0.0.5:7481", "0.0.0.0:7480", false},
		{"10.0.0.5:7480", "10.0.0.5:7480", true},
		{"10.0.0.6:7480", "10.0.0.5:7480", false},
		{"evil.example:7480", "0.0.0.0:7480", false},
		{"localhost:99999", "127.0.0.1:7480", false},
		{"localhost:x", "127.0.0.1:7480", false},
		{"", "127.0.0.1:7480", false},
		{"localhost.", "127.0.0.1:7480", false},
	} {
		if got := HostAllowed(tc.host, tc.addr); got != tc.want {
			t.Errorf("HostAllowed(%q, %q) = %v, want %v", tc.host, tc.addr, got, tc.want)
		}
	}
}

func FuzzHostAllowed(f *testing.F) {
	f.Add("localhost:7480", "127.0.0.1:7480")
	f.Add("[::1", "0.0.0.0:1")
	f.Fuzz(func(t *testing.T, host, addr string) {
		_ = HostAllowed(host, addr)
	})
}
