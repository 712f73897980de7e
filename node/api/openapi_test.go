package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cshare/cshare/node/events"
)

// GET /v1/openapi.json describes every route the server holds (its mux's
// patterns): method, path parameters, the body and answer schemas, and
// the errors; a route it lacks fails the test.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	svc := stubs()
	svc.Gateway = &gwStub{}
	svc.Events = events.NewBus(time.Now)
	toks, _ := OpenTokens(filepath.Join(t.TempDir(), TokensFile), time.Now)
	svc.Tokens = toks
	mux := HandlerAuth(svc, Auth{Token: "tok"})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/openapi.json", nil)
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		OpenAPI    string                               `json:"openapi"`
		Paths      map[string]map[string]map[string]any `json:"paths"`
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || resp.StatusCode != 200 || doc.OpenAPI != "3.0.3" {
		t.Fatalf("openapi.json: %d %v", resp.StatusCode, err)
	}
	patterns := mux.Patterns()
	if len(patterns) < 57 {
		t.Fatalf("%d routes", len(patterns))
	}
	for _, p := range patterns {
		method, path, _ := strings.Cut(p, " ")
		op := doc.Paths[path][strings.ToLower(method)]
		if op == nil {
			t.Errorf("the document lacks %s", p)
			continue
		}
		rs, _ := op["responses"].(map[string]any)
		for _, code := range []string{"200", "400", "401", "403", "404", "500"} {
			if rs[code] == nil {
				t.Errorf("%s: no %s answer", p, code)
			}
		}
		if n := strings.Count(path, "{"); n > 0 {
			if ps, _ := op["parameters"].([]any); len(ps) < n {
				t.Errorf("%s: %d parameters for %d in the path", p, len(ps), n)
			}
		}
		if method == http.MethodPost && strings.Contains(p, "/v1/jobs") && p == "POST /v1/jobs" && op["requestBody"] == nil {
			t.Errorf("%s: no request body", p)
		}
	}
	for _, name := range []string{"JobSubmit", "JobInfo", "Error", "TokenCreate", "MachineInfo"} {
		if doc.Components.Schemas[name] == nil {
			t.Errorf("no schema %s", name)
		}
	}
	submit, _ := json.Marshal(doc.Components.Schemas["JobSubmit"])
	if !strings.Contains(string(submit), `"cmd":{"items":{"type":"string"},"type":"array"}`) {
		t.Errorf("JobSubmit schema: %s", submit)
	}
}
