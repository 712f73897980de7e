package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The stubs answer every call with zero values, one for each service's
// API (the market's in contracts_test.go and market_test.go, the
// datasets' in dataset_stub_test.go).
type (
	nodeStub     struct{}
	orgStub      struct{} // OrgAPI and LeaveAPI
	jobsStub     struct{}
	marketStub   struct{}
	datasetsStub struct{}
	usageStub    struct{}
)

// stubs serves every route from a stub.
func stubs() Services {
	return Services{Node: nodeStub{}, Org: orgStub{}, Leave: orgStub{}, Jobs: jobsStub{}, Market: marketStub{}, Datasets: datasetsStub{}, Usage: usageStub{}, History: orgStub{}}
}

func (nodeStub) Status(context.Context) (NodeStatus, error)                   { return NodeStatus{}, nil }
func (nodeStub) Stop(context.Context) error                                   { return nil }
func (orgStub) CreateOrg(context.Context, OrgCreate) (KeyResult, error)       { return KeyResult{}, nil }
func (orgStub) Org(context.Context) (OrgInfo, error)                          { return OrgInfo{}, nil }
func (orgStub) OrgKey(context.Context, bool) (KeyResult, error)               { return KeyResult{}, nil }
func (orgStub) Invite(context.Context, InviteRequest) (KeyResult, error)      { return KeyResult{}, nil }
func (orgStub) SetSettings(context.Context, SettingsRequest) (OrgInfo, error) { return OrgInfo{}, nil }
func (orgStub) Join(context.Context, JoinRequest) (JoinResult, error)         { return JoinResult{}, nil }
func (orgStub) Machines(context.Context) ([]MachineInfo, error)               { return nil, nil }
func (orgStub) Machine(context.Context, string) (MachineInfo, error)          { return MachineInfo{}, nil }
func (orgStub) MachineAction(context.Context, string, string) (MachineInfo, error) {
	return MachineInfo{}, nil
}
func (orgStub) Members(context.Context) ([]MemberInfo, error)                { return nil, nil }
func (orgStub) SetRole(context.Context, string, string) (MemberInfo, error)  { return MemberInfo{}, nil }
func (orgStub) RemoveMember(context.Context, string) (string, error)         { return "", nil }
func (orgStub) Leave(context.Context, LeaveRequest) (LeftOrg, error)         { return LeftOrg{}, nil }
func (orgStub) DeleteOrg(context.Context, OrgDeleteRequest) (LeftOrg, error) { return LeftOrg{}, nil }
func (orgStub) TransferOrg(context.Context, string) (OrgInfo, error)         { return OrgInfo{}, nil }
func (orgStub) ExportHistory(context.Context, HistoryExport) (HistoryExported, error) {
	return HistoryExported{}, nil
}
func (jobsStub) SubmitJob(context.Context, JobSubmit) (JobSubmitted, error) {
	return JobSubmitted{}, nil
}
func (jobsStub) ListJobs(context.Context, Page, func(JobInfo) error) error     { return nil }
func (jobsStub) Job(context.Context, string) (JobInfo, error)                  { return JobInfo{}, nil }
func (jobsStub) ModifyJob(context.Context, string, JobModify) (JobInfo, error) { return JobInfo{}, nil }
func (jobsStub) CancelJob(context.Context, string) (JobInfo, error)            { return JobInfo{}, nil }
func (jobsStub) JobLogs(context.Context, string, int64) ([]byte, error)        { return nil, nil }
func (jobsStub) ExplainJob(context.Context, string) (JobExplain, error)        { return JobExplain{}, nil }
func (jobsStub) ListJobItems(context.Context, string, Page, func(ItemInfo) error) error {
	return nil
}

var postRoutes = []string{"/v1/org", "/v1/org/invite", "/v1/org/settings", "/v1/join", "/v1/jobs",
	"/v1/jobs/x/modify", "/v1/members/x/role", "/v1/machines/x/approve", "/v1/leave", "/v1/org/delete",
	"/v1/org/transfer", "/v1/org/history/export", "/v1/datasets", "/v1/datasets/x/get", "/v1/datasets/import", "/v1/datasets/x/export",
	"/v1/contracts", "/v1/contracts/x/extend", "/v1/datasets/x/access"}

// FuzzAPIBodies sends arbitrary bodies to every POST route: the handlers
// answer 200 or 400, never panic and never 500.
func FuzzAPIBodies(f *testing.F) {
	f.Add(0, []byte(`{"name":"acme"}`))
	f.Add(4, []byte(`{"cmd":["true"],"range_start":1,"range_end":10,"max_cpus":-1,"cores_milli":500,"memory_mb":64}`))
	f.Add(4, []byte(`{"cmd":["true"]}{"x":1}`))
	f.Add(5, []byte(`{"max_cpus":3,"priority":2}`))
	f.Add(5, []byte(`{"max_cpus":"*"}`))
	f.Add(2, []byte(`{"set":{"smartshare.mode":"jobs"}}`))
	f.Add(3, []byte(`{"org_key":"cshare1"}`))
	f.Add(1, []byte(`{"role":"admin","uses":-1}`))
	f.Add(4, []byte(`{"cmd":[1,2]}`))
	f.Add(4, []byte(`[]`))
	f.Add(8, []byte(`{"purge":true}`))
	f.Add(9, []byte(`{"confirm":"acme","purge":"yes"}`))
	f.Add(10, []byte(`{"to":"alice"}`))
	f.Add(10, []byte(`{"to":7}`))
	f.Add(17, []byte(`{"access":"private"}`))
	h := Handler(stubs(), "tok")
	f.Fuzz(func(t *testing.T, route int, body []byte) {
		if route < 0 {
			route = -route
		}
		path := postRoutes[route%len(postRoutes)]
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer tok")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK && rec.Code != http.StatusBadRequest && rec.Code != http.StatusRequestEntityTooLarge {
			t.Fatalf("%s %q: status %d: %s", path, body, rec.Code, rec.Body)
		}
	})
}

// TestStrictBodies: a body is one JSON value of known fields; anything
// after it, or an unknown field, is a 400 that says so.
func TestStrictBodies(t *testing.T) {
	h := Handler(stubs(), "tok")
	for _, c := range []struct {
		path, body string
		code       int
		want       string
	}{
		{"/v1/jobs", `{"cmd":["true"],"range_start":1,"range_end":2}`, 200, ""},
		{"/v1/jobs", `{"cmd":["true"]}` + "\n\t ", 200, ""},
		{"/v1/jobs", ``, 200, ""},
		{"/v1/jobs", `{"cmd":["true"]}{"x":1}`, 400, "unexpected data after the JSON value at byte 16"},
		{"/v1/jobs", `{"cmd":["true"]} x`, 400, "unexpected data after the JSON value"},
		{"/v1/jobs", `{"cmd":["true"]}]`, 400, "unexpected data after the JSON value"},
		{"/v1/jobs", `{"cmd":["true"],"range":"1-10"}`, 400, `unknown field \"range\"`},
		{"/v1/jobs", `{"cmd":["true"],"cores_milli":"0.5"}`, 400, "cores_milli"},
		{"/v1/jobs/x/modify", `{"max_cpus":"*"}`, 400, "max_cpus"},
		{"/v1/jobs", `{"cmd":["true"],"name":"` + strings.Repeat("x", MaxBodySize) + `"}`, 413, "larger than"},
	} {
		req := httptest.NewRequest(http.MethodPost, c.path, strings.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer tok")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.code || !strings.Contains(rec.Body.String(), c.want) || strings.Count(rec.Body.String(), "\n") != 1 {
			t.Errorf("%s %.60q: %d %s; want %d with %q", c.path, c.body, rec.Code, rec.Body, c.code, c.want)
		}
	}
}

// FuzzDecodeBody: DecodeBody never panics; it accepts a body exactly when
// it is one JSON value for the type, with white space around it.
func FuzzDecodeBody(f *testing.F) {
	for _, s := range []string{`{"cmd":["x"]}`, `{"cmd":["x"]} {}`, ``, ` `, `{"max_cpus":-1}`, `null`, `{"cmd":null}x`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var v JobSubmit
		err := DecodeBody(bytes.NewReader(body), &v)
		if err == nil {
			if len(bytes.TrimSpace(body)) > 0 && !json.Valid(body) {
				t.Fatalf("%q accepted but is not one JSON value", body)
			}
			return
		}
		var se *StatusError
		if !errors.As(err, &se) || se.Code != http.StatusBadRequest {
			t.Fatalf("%q: %v is not a 400", body, err)
		}
	})
}

func TestAuthRequired(t *testing.T) {
	h := Handler(stubs(), "tok")
	for _, tok := range []string{"", "Bearer nope", "tok"} {
		req := httptest.NewRequest(http.MethodGet, "/v1/status", nil)
		if tok != "" {
			req.Header.Set("Authorization", tok)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized {
			t.Fatalf("token %q: status %d, want 401", tok, rec.Code)
		}
	}
}

// TestRouteErrorsAreJSON: the mux's own 404 and 405 are JSON Errors, and a
// long path is not echoed whole.
func TestRouteErrorsAreJSON(t *testing.T) {
	h := Handler(stubs(), "tok")
	long := strings.Repeat("x", 100<<10)
	for _, c := range []struct {
		method, path string
		code         int
		want, allow  string
	}{
		{http.MethodGet, "/v1/nope", 404, "no such API route: GET /v1/nope", ""},
		{http.MethodGet, "/v2/" + long, 404, "no such API route", ""},
		{http.MethodDelete, "/v1/jobs", 405, "method DELETE is not allowed for /v1/jobs", "GET, HEAD, POST"},
		{http.MethodPut, "/v1/status", 405, "allowed: GET, HEAD", "GET, HEAD"},
	} {
		req := httptest.NewRequest(c.method, c.path, nil)
		req.Header.Set("Authorization", "Bearer tok")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var e Error
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || rec.Code != c.code || !strings.Contains(e.Error, c.want) {
			t.Errorf("%s %.40s: %d %.200s (%v); want %d JSON with %q", c.method, c.path, rec.Code, rec.Body, err, c.code, c.want)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s %.40s: Content-Type %q", c.method, c.path, ct)
		}
		if got := rec.Header().Get("Allow"); got != c.allow {
			t.Errorf("%s %.40s: Allow %q, want %q", c.method, c.path, got, c.allow)
		}
		if len(e.Error) > 200 {
			t.Errorf("%s: the error echoes %d bytes", c.method, len(e.Error))
		}
	}
}

// TestTypeErrorsNameTheField: a value of the wrong JSON type names its key.
func TestTypeErrorsNameTheField(t *testing.T) {
	h := Handler(stubs(), "tok")
	for body, field := range map[string]string{
		`{"cmd":["true"],"priority":1e9}`:                   "priority",
		`{"cmd":["true"],"range_end":99999999999999999999}`: "range_end",
		`{"cmd":["true"],"bogus":1}`:                        "bogus",
	} {
		req := httptest.NewRequest(http.MethodPost, "/v1/jobs", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer tok")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var e Error
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || rec.Code != 400 || e.Field != field || !strings.HasPrefix(e.Error, field+": ") && !strings.Contains(e.Error, field) {
			t.Errorf("%s: %d %s; want 400 with field %q", body, rec.Code, rec.Body, field)
		}
	}
}
