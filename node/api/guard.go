package api

import (
	"crypto/subtle"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// CookieName is the cookie through which a browser holds the API token
// after opening the dashboard once with ?token=.
const CookieName = "cshare_token"

// GuardOptions say what Guard admits.
type GuardOptions struct {
	// Token is the API token.
	Token string
	// Addr is the address the API is bound to (host:port, as bound).
	Addr string
	// TLS says the API is served over TLS (the cookie is then Secure).
	TLS bool
	// PublicMetrics opens GET /metrics without the token.
	PublicMetrics bool
}

// Guard wraps the API's handler (the /v1 routes, the dashboard, /metrics)
// with what every request must pass:
//   - its Host header names the API's own address, or localhost,
//     127.0.0.1 or [::1] (any port): a page that reached the API through
//     DNS rebinding carries its own host name and is refused (403);
//   - its body is capped at MaxBodySize (413);
//   - outside /v1 (whose routes check the bearer token themselves) it
//     carries the token: the Authorization bearer or the CookieName cookie
//     (401), except GET /metrics when PublicMetrics. A GET with ?token=T
//     (the right token) sets the cookie (HttpOnly, SameSite=Strict) and
//     redirects to the same URL without the token, so the browser's
//     address bar and history do not keep it.
func Guard(h http.Handler, o GuardOptions) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !HostAllowed(r.Host, o.Addr) {
			writeJSON(w, http.StatusForbidden, Error{Error: sprintf("host %q is not this API's address; use %s or localhost", Ellipsize(r.Host), o.Addr)})
			return
		}
		if !StreamsBody(r) { // an archive streams to its route (gateway.go)
			if r.ContentLength > MaxBodySize {
				writeJSON(w, http.StatusRequestEntityTooLarge, Error{Error: sprintf("request body: larger than %d bytes", MaxBodySize)})
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, MaxBodySize)
		}
		if strings.HasPrefix(r.URL.Path, "/v1/") {
			h.ServeHTTP(w, r)
			return
		}
		if q := r.URL.Query(); q.Has("token") && r.Method == http.MethodGet {
			if !tokenEqual(q.Get("token"), o.Token) {
				writeJSON(w, http.StatusUnauthorized, Error{Error: "token: wrong API token; the node's token is in <data-dir>/api.token (cshare node dashboard prints the URL)"})
				return
			}
			http.SetCookie(w, &http.Cookie{Name: CookieName, Value: o.Token, Path: "/", HttpOnly: true, Secure: o.TLS, SameSite: http.SameSiteStrictMode})
			q.Del("token")
			clean := url.URL{Path: r.URL.Path, RawQuery: q.Encode()}
			http.Redirect(w, r, clean.String(), http.StatusSeeOther)
			return
		}
		if !(o.PublicMetrics && r.URL.Path == "/metrics") && !authorized(r, o.Token) {
			writeJSON(w, http.StatusUnauthorized, Error{Error: "missing or wrong API token: open the URL that cshare node dashboard prints, or send Authorization: Bearer <data-dir>/api.token"})
			return
		}
		h.ServeHTTP(w, r)
	})
}

// authorized says whether r carries the token as a bearer or the cookie.
func authorized(r *http.Request, token string) bool {
	if got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return tokenEqual(got, token)
	}
	c, err := r.Cookie(CookieName)
	return err == nil && tokenEqual(c.Value, token)
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
