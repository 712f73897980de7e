package api

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

// stub answers every call with zero values.
type stub struct{}

func (stub) Status(context.Context) (NodeStatus, error)                    { return NodeStatus{}, nil }
func (stub) Stop(context.Context) error                                    { return nil }
func (stub) CreateOrg(context.Context, OrgCreate) (KeyResult, error)       { return KeyResult{}, nil }
func (stub) Org(context.Context) (OrgInfo, error)                          { return OrgInfo{}, nil }
func (stub) OrgKey(context.Context, bool) (KeyResult, error)               { return KeyResult{}, nil }
func (stub) Invite(context.Context, InviteRequest) (KeyResult, error)      { return KeyResult{}, nil }
func (stub) SetSettings(context.Context, SettingsRequest) (OrgInfo, error) { return OrgInfo{}, nil }
func (stub) Join(context.Context, JoinRequest) (JoinResult, error)         { return JoinResult{}, nil }
func (stub) Machines(context.Context) ([]MachineInfo, error)               { return nil, nil }
func (stub) Machine(context.Context, string) (MachineInfo, error)          { return MachineInfo{}, nil }
func (stub) MachineAction(context.Context, string, string) (MachineInfo, error) {
	return MachineInfo{}, nil
}
func (stub) Members(context.Context) ([]MemberInfo, error)                 { return nil, nil }
func (stub) SetRole(context.Context, string, string) (MemberInfo, error)   { return MemberInfo{}, nil }
func (stub) RemoveMember(context.Context, string) error                    { return nil }
func (stub) Leave(context.Context) error                                   { return nil }
func (stub) SubmitJob(context.Context, JobSubmit) (JobInfo, error)         { return JobInfo{}, nil }
func (stub) Jobs(context.Context) ([]JobInfo, error)                       { return nil, nil }
func (stub) Job(context.Context, string) (JobInfo, error)                  { return JobInfo{}, nil }
func (stub) ModifyJob(context.Context, string, JobModify) (JobInfo, error) { return JobInfo{}, nil }
func (stub) CancelJob(context.Context, string) (JobInfo, error)            { return JobInfo{}, nil }
func (stub) JobLogs(context.Context, string, int64) ([]byte, error)        { return nil, nil }
func (stub) JobItems(context.Context, string) ([]ItemInfo, error)          { return nil, nil }

var postRoutes = []string{"/v1/org", "/v1/org/invite", "/v1/org/settings", "/v1/join", "/v1/jobs",
	"/v1/jobs/x/modify", "/v1/members/x/role", "/v1/machines/x/approve"}

// FuzzAPIBodies sends arbitrary bodies to every POST route: the handlers
// answer 200 or 400, never panic and never 500.
func FuzzAPIBodies(f *testing.F) {
	f.Add(0, []byte(`{"name":"acme"}`))
	f.Add(4, []byte(`{"cmd":["true"],"range":"1-10","max_cpus":"*"}`))
	f.Add(2, []byte(`{"set":{"smartshare.mode":"jobs"}}`))
	f.Add(3, []byte(`{"org_key":"cshare1"}`))
	f.Add(1, []byte(`{"role":"admin","uses":-1}`))
	f.Add(4, []byte(`{"cmd":[1,2]}`))
	f.Add(4, []byte(`[]`))
	h := Handler(stub{}, "tok")
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

func TestAuthRequired(t *testing.T) {
	h := Handler(stub{}, "tok")
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
