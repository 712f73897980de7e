package api

import "context"

// DashboardService hands out the dashboard's one-time sign-in codes
// (node/web); a Services with it serves POST /v1/dashboard/code.
type DashboardService interface {
	SignInCode(ctx context.Context) (SignInCode, error)
}

// SignInCode is the answer of POST /v1/dashboard/code: a code that opens
// one dashboard session, once, until Expires (RFC 3339); Path is the
// dashboard's sign-in path with the code (/login?code=CODE), to append to
// the API's address.
type SignInCode struct {
	Code    string `json:"code"`
	Path    string `json:"path"`
	Expires string `json:"expires"`
}

func dashboardRoutes(svc DashboardService) []route {
	return []route{{"POST /v1/dashboard/code", call(svc.SignInCode)}}
}

// DashboardCode asks the node for a one-time dashboard sign-in code.
func (c *Client) DashboardCode(ctx context.Context) (SignInCode, error) {
	return post[SignInCode](c, ctx, "/v1/dashboard/code", nil)
}
