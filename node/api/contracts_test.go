package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func (marketStub) CreateContract(context.Context, ContractCreate) (ContractInfo, error) {
	return ContractInfo{}, nil
}
func (marketStub) Contracts(context.Context) ([]ContractInfo, error)      { return nil, nil }
func (marketStub) Contract(context.Context, string) (ContractInfo, error) { return ContractInfo{}, nil }
func (marketStub) ContractUsage(context.Context, int64) (ContractUsage, error) {
	return ContractUsage{}, nil
}
func (marketStub) ContractAction(_ context.Context, _, action string) (ContractInfo, error) {
	return ContractInfo{State: action}, nil
}
func (marketStub) ExtendContract(context.Context, string, ContractExtendRequest) (ContractInfo, error) {
	return ContractInfo{}, nil
}

// TestContractRoutes: the actions route to the service, an unknown action
// and a bad usage time are one-line errors naming the field.
func TestContractRoutes(t *testing.T) {
	h := Handler(stubs(), "tok")
	for _, c := range []struct {
		method, path string
		code         int
		want         string
	}{
		{http.MethodPost, "/v1/contracts/c1/stop", 200, `"state":"stop"`},
		{http.MethodPost, "/v1/contracts/c1/start", 200, `"state":"start"`},
		{http.MethodPost, "/v1/contracts/c1/rm", 200, `"state":"rm"`},
		{http.MethodPost, "/v1/contracts/c1/pause", 404, `contract action \"pause\"; allowed: stop, start, rm, extend`},
		{http.MethodGet, "/v1/contract-usage?at=x", 400, `"field":"at"`},
		{http.MethodGet, "/v1/contract-usage?at=5", 200, `"renters"`},
		{http.MethodGet, "/v1/contracts/c1", 200, `"id"`},
	} {
		req := httptest.NewRequest(c.method, c.path, nil)
		req.Header.Set("Authorization", "Bearer tok")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.code || !strings.Contains(rec.Body.String(), c.want) || strings.Count(rec.Body.String(), "\n") != 1 {
			t.Errorf("%s %s: %d %s; want %d with %s", c.method, c.path, rec.Code, rec.Body, c.code, c.want)
		}
	}
}
