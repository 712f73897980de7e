package api

import (
	"crypto/subtle"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// GuardOptions say what Guard admits.
type GuardOptions struct {
	// Token is the API token.
	Token string
	// Addr is the address the API is bound to (host:port, as bound).
	Addr string
	// TLS says the API is served over TLS.
	TLS bool
	// PublicMetrics opens GET /metrics without the token.
	PublicMetrics bool
}

// Guard wraps the API's handler (the /v1 routes, the dashboard, /metrics)
// with what every request must pass:
//   - its Host header names the API's own address, or localhost,
//     127.0.0.1 or [::1] (any port): a page that reached the API through
//     DNS rebinding carries its own host name and is refused (403);
//   - its body is capped at MaxBodySize (413), but for the archives that
//     stream to their routes and the dashboard's dataset upload;
//   - GET /metrics carries the bearer token (401), unless PublicMetrics.
//
// The /v1 routes check the bearer token themselves; the dashboard (every
// other path, node/web) wants its own session, opened with a one-time
// code, never the token.
func Guard(h http.Handler, o GuardOptions) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !HostAllowed(r.Host, o.Addr) {
			writeJSON(w, http.StatusForbidden, Error{Error: sprintf("host %q is not this API's address; use %s or localhost", Ellipsize(r.Host), o.Addr)})
			return
		}
		if !StreamsBody(r) && !(r.Method == http.MethodPost && r.URL.Path == DashboardUploadPath) {
			if r.ContentLength > MaxBodySize {
				writeJSON(w, http.StatusRequestEntityTooLarge, Error{Error: sprintf("request body: larger than %d bytes", MaxBodySize)})
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, MaxBodySize)
		}
		if r.URL.Path == "/metrics" && !o.PublicMetrics && !authorized(r, o.Token) {
			writeJSON(w, http.StatusUnauthorized, Error{Error: "missing or wrong API token: send Authorization: Bearer <data-dir>/api.token, or set metrics: {public: true} in node.yaml"})
			return
		}
		h.ServeHTTP(w, r)
	})
}

// DashboardUploadPath is the dashboard's dataset upload (node/web), whose
// body streams to a file: Guard does not cap it.
const DashboardUploadPath = "/datasets/upload"

// authorized says whether r carries the token as a bearer.
func authorized(r *http.Request, token string) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && tokenEqual(got, token)
}

func tokenEqual(got, token string) bool {
	return token != "" && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}

// HostAllowed says whether a request's Host header names the API bound at
// addr: addr itself, or localhost, 127.0.0.1 or [::1] with any port or
// none. When addr's host is unspecified (0.0.0.0, ::), an IP literal with
// addr's port is allowed too: an IP literal cannot be a rebound DNS name.
func HostAllowed(host, addr string) bool {
	if host == "" {
		return false
	}
	if strings.EqualFold(host, addr) {
		return true
	}
	h, port, err := net.SplitHostPort(host)
	if err != nil {
		h, port = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"), ""
	}
	if port != "" {
		if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
			return false
		}
	}
	if strings.EqualFold(h, "localhost") || h == "127.0.0.1" || h == "::1" {
		return true
	}
	bh, bport, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if ip := net.ParseIP(bh); ip != nil && ip.IsUnspecified() {
		return net.ParseIP(h) != nil && port == bport
	}
	return false
}
