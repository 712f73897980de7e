package cli

import (
	"net/http"
	"strings"
	"testing"

	"github.com/cshare/cshare/node/api"
)

// TestNodeDashboardURL: the printed URL carries the token once; through
// the API's guard it leaves the cookie and sends the browser on to a
// clean URL.
func TestNodeDashboardURL(t *testing.T) {
	n := startNode(t)
	r := n.run("node", "dashboard")
	want := n.srv.URL + "/?token=test-token\n"
	if r.code != 0 || r.stdout != want {
		t.Fatalf("node dashboard: exit %d, %q (stderr %q), want %q", r.code, r.stdout, r.stderr, want)
	}
	n.srv.Config.Handler = api.Guard(n.srv.Config.Handler, api.GuardOptions{Token: "test-token", Addr: n.srv.Listener.Addr().String()})
	c := n.srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Get(strings.TrimSpace(r.stdout))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" || len(resp.Cookies()) != 1 {
		t.Errorf("opening the URL: %d to %q with %d cookies; want 303 to / with the cookie", resp.StatusCode, resp.Header.Get("Location"), len(resp.Cookies()))
	}
	if r := runCLI("--data-dir", t.TempDir(), "node", "dashboard"); r.code == 0 || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("without a node: exit %d, %q; want one line and a failure", r.code, r.stderr)
	}
}

func TestBrowserBase(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:7480": "http://127.0.0.1:7480",
		"https://[::]:7480":     "https://localhost:7480",
		"http://0.0.0.0:9":      "http://localhost:9",
		"https://10.0.0.5:7480": "https://10.0.0.5:7480",
	} {
		if got := browserBase(in); got != want {
			t.Errorf("browserBase(%q) = %q, want %q", in, got, want)
		}
	}
}
