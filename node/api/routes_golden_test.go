package api

import (
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/routes.golden from the API's answers")

// TestRoutesGolden pins the answer (status, Content-Type, body) of every
// route to requests with no token, no body, an unknown field, a body that
// is not JSON, bad query parameters and a wrong method, byte for byte.
func TestRoutesGolden(t *testing.T) {
	srv := httptest.NewServer(Handler(stubs(), "tok"))
	defer srv.Close()
	var b strings.Builder
	do := func(method, path, body string, token bool) {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if token {
			req.Header.Set("Authorization", "Bearer tok")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var got strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			got.Write(buf[:n])
			if err != nil {
				break
			}
		}
		shown := fmt.Sprintf("%q", body)
		if len(body) > 100 {
			shown = fmt.Sprintf("(%d bytes)", len(body))
		}
		fmt.Fprintf(&b, "%s %s %s token=%v\n%d %s allow=%q\n%s\n", method, path, shown, token, resp.StatusCode,
			resp.Header.Get("Content-Type"), resp.Header.Get("Allow"), got.String())
	}
	for _, route := range []string{
		"GET /v1/status", "POST /v1/node/stop", "POST /v1/org", "GET /v1/org", "GET /v1/org/key", "POST /v1/org/key/rotate",
		"POST /v1/org/invite", "POST /v1/org/settings", "POST /v1/org/transfer", "POST /v1/org/history/export", "POST /v1/join",
		"GET /v1/machines", "GET /v1/machines/m1", "POST /v1/machines/m1/approve", "POST /v1/machines/m1/fly",
		"GET /v1/members", "POST /v1/members/p1/role", "POST /v1/members/p1/remove", "POST /v1/leave", "POST /v1/org/delete",
		"POST /v1/jobs", "GET /v1/jobs", "GET /v1/jobs/j1", "GET /v1/jobs/j1/explain", "GET /v1/jobs/j1/items", "POST /v1/jobs/j1/modify",
		"POST /v1/jobs/j1/cancel", "GET /v1/jobs/j1/logs", "GET /v1/jobs/j1/logs?item=3", "GET /v1/jobs/j1/logs?item=x",
		"POST /v1/offers", "GET /v1/offers", "GET /v1/offers?q=gpus>1&o=price", "POST /v1/offers/o1/remove",
		"POST /v1/contracts", "GET /v1/contracts", "GET /v1/contract-usage", "GET /v1/contract-usage?at=5",
		"GET /v1/contract-usage?at=-1", "GET /v1/contracts/c1", "POST /v1/contracts/c1/extend", "POST /v1/contracts/c1/stop",
		"POST /v1/contracts/c1/fly",
		"POST /v1/datasets", "GET /v1/datasets/progress/p1", "GET /v1/datasets", "GET /v1/datasets/d1", "POST /v1/datasets/d1/access",
		"POST /v1/datasets/d1/remove", "POST /v1/datasets/d1/get", "POST /v1/datasets/import", "POST /v1/datasets/d1/export",
		"GET /v1/nothing", "DELETE /v1/org",
		"GET /v1/jobs?limit=0", "GET /v1/jobs/j1/items?after=x", "GET /v1/machines?limit=2&after=zz",
		"GET /v1/org/usage", "GET /v1/org/usage?since=5&until=4", "GET /v1/org/usage?since=x", "GET /v1/org/usage?until=999999999999999999",
		"POST /v1/org/usage",
	} {
		method, path, _ := strings.Cut(route, " ")
		do(method, path, "", false)
		do(method, path, "", true)
		do(method, path, `{"zz":1}`, true)
		do(method, path, `{"cmd":["a"],"env":{"A":"b"}}`, true)
		do(method, path, `x`, true)
		do(method, path, "{\"name\":\"\xff\"}", true)
		do(method, path, `{} {}`, true)
		do(method, path, `{"to":5,"role":[1]}`, true)
		do(method, path, `{"cmd":["`+strings.Repeat("a", 300000)+`"]}`, true)
	}
	file := filepath.Join("testdata", "routes.golden")
	if *updateGolden {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run go test -run TestRoutesGolden -update to write it)", err)
	}
	if got := b.String(); got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := 0; i < min(len(gl), len(wl)); i++ {
			if gl[i] != wl[i] {
				t.Fatalf("answers differ from %s at line %d:\ngot  %q\nwant %q", file, i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("answers differ from %s in length: %d lines, want %d", file, len(gl), len(wl))
	}
}
