package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// OrgUsage makes the stub a UsageService: it echoes the window it was
// given.
func (usageStub) OrgUsage(_ context.Context, since, until int64) (OrgUsage, error) {
	return OrgUsage{Since: sprintf("%d", since), Until: sprintf("%d", until), Persons: []PersonUsage{}, Machines: []MachineUsage{}}, nil
}

// FuzzUsageQuery: any since and until give a 200 or a 400 that names the
// field, never a panic or a 500.
func FuzzUsageQuery(f *testing.F) {
	f.Add("5", "4")
	f.Add("", "1700000000000")
	f.Add("-1", "x")
	f.Add("253402300800000", "")
	h := Handler(stubs(), "tok")
	f.Fuzz(func(t *testing.T, since, until string) {
		q := url.Values{"since": {since}, "until": {until}}
		req := httptest.NewRequest(http.MethodGet, "/v1/org/usage?"+q.Encode(), nil)
		req.Header.Set("Authorization", "Bearer tok")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK:
		case http.StatusBadRequest:
			if !strings.Contains(rec.Body.String(), `"field":"since"`) && !strings.Contains(rec.Body.String(), `"field":"until"`) {
				t.Fatalf("%q %q: 400 naming no field: %s", since, until, rec.Body)
			}
		default:
			t.Fatalf("%q %q: status %d: %s", since, until, rec.Code, rec.Body)
		}
	})
}
