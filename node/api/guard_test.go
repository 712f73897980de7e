package api

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
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
	mux.HandleFunc("POST /datasets/upload", func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			w.WriteHeader(http.StatusRequestEntityTooLarge)
		}
		_, _ = io.WriteString(w, strconv.FormatInt(n, 10))
	})
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
		req.AddCookie(&http.Cookie{Name: "cshare_token", Value: cookie})
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
	for _, bad := range [][2]string{{"", ""}, {"wrong", ""}, {"", "wrong"}, {"", token}} {
		if code, _, _ := send(t, c, "GET", srv.URL+"/metrics", "", bad[0], bad[1], nil); code != http.StatusUnauthorized {
			t.Errorf("GET /metrics with bearer %q, cookie %q: %d, want 401", bad[0], bad[1], code)
		}
	}
	for _, path := range []string{"/", "/metrics"} {
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

// TestGuardLeavesTheDashboardItsSession: the token opens no dashboard (it
// checks its own session, node/web), and ?token= sets no cookie.
func TestGuardLeavesTheDashboardItsSession(t *testing.T) {
	srv, token := guarded(t, false)
	c := srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	code, h, body := send(t, c, "GET", srv.URL+"/?token="+token, "", "", "", nil)
	if code != http.StatusOK || body != "dashboard" || h.Get("Set-Cookie") != "" {
		t.Errorf("?token=: %d %q Set-Cookie %q, want the dashboard's own answer and no cookie", code, body, h.Get("Set-Cookie"))
	}
}

func TestGuardPublicMetricsOpensMetricsAlone(t *testing.T) {
	srv, _ := guarded(t, true)
	c := srv.Client()
	if code, _, body := send(t, c, "GET", srv.URL+"/metrics", "", "", "", nil); code != http.StatusOK || body != "metrics" {
		t.Errorf("public /metrics: %d %q, want 200", code, body)
	}
	if code, _, _ := send(t, c, "POST", srv.URL+"/v1/echo", "", "", "", strings.NewReader("{}")); code != http.StatusUnauthorized {
		t.Errorf("/v1 with public metrics: %d, want 401", code)
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
	// The dashboard's upload streams to a file: not capped here.
	if code, _, body := send(t, c, "POST", srv.URL+"/datasets/upload", "", "", "", strings.NewReader(big)); code != http.StatusOK || body != strconv.Itoa(len(big)) {
		t.Errorf("big upload: %d %q, want 200 and every byte", code, body)
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
