package jupyter

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/market"
)

// CookiePrefix names the cookie the proxy sets once a request brings a
// contract's token in its query (one a contract, for its path), as
// Jupyter does, so that the pages and websockets it opens need no token.
const CookiePrefix = "cshare-jupyter-"

// ServeHTTP serves /contract/ID/...: it checks that ID is a running,
// proxied jupyter-mode contract of this machine and that the request holds
// its token (?token=, then the cookie, then an "Authorization: token T"
// header, as Jupyter takes it), and passes the request, path and query
// unchanged, to the container's Jupyter. Without a token: 401; with a
// wrong one: 403.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/contract/")
	id, _, slash := strings.Cut(rest, "/")
	if !ok || !contractID(id) {
		http.Error(w, "cshare: not found; open the URL `cshare contract show ID` prints", http.StatusNotFound)
		return
	}
	if !slash {
		u := *r.URL
		u.Path += "/"
		http.Redirect(w, r, u.RequestURI(), http.StatusFound)
		return
	}
	renter, port, err := s.contract(id)
	if err != nil {
		http.Error(w, "cshare: "+err.Error(), statusOf(err))
		return
	}
	want, err := Token(s.d.Key, renter, id)
	if err != nil {
		http.Error(w, "cshare: "+err.Error(), http.StatusInternalServerError)
		return
	}
	got, fromQuery := r.URL.Query().Get("token"), true
	if got == "" {
		fromQuery = false
		if c, err := r.Cookie(CookiePrefix + id); err == nil {
			got = c.Value
		} else if a, ok := strings.CutPrefix(r.Header.Get("Authorization"), "token "); ok {
			got = strings.TrimSpace(a)
		}
	}
	switch {
	case got == "":
		s.d.Log.Debug("jupyter proxy: no token", "contract", id, "from", r.RemoteAddr)
		http.Error(w, "cshare: contract "+id+"'s Jupyter needs its token: open the URL `cshare contract show "+id+"` prints", http.StatusUnauthorized)
		return
	case subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1:
		s.d.Log.Info("jupyter proxy: wrong token", "contract", id, "from", r.RemoteAddr)
		http.Error(w, "cshare: a wrong token for contract "+id, http.StatusForbidden)
		return
	}
	if fromQuery {
		http.SetCookie(w, &http.Cookie{Name: CookiePrefix + id, Value: want, Path: "/contract/" + id + "/",
			HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode})
	}
	r = r.WithContext(context.WithValue(r.Context(), targetKey{}, target{id, port}))
	s.proxy.ServeHTTP(w, r)
}

type targetKey struct{}

type target struct {
	contract string
	port     int
}

// newProxy is the reverse proxy to a container's Jupyter: the request's
// host, path and query unchanged (Jupyter checks a websocket's Origin
// against its Host), the proxy's cookie taken out, connections through
// Deps.Dial. httputil.ReverseProxy carries websocket upgrades.
func (s *Service) newProxy() *httputil.ReverseProxy {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			host, p, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			port, err := strconv.Atoi(p)
			if err != nil {
				return nil, err
			}
			return s.d.Dial(ctx, strings.TrimSuffix(host, ".contract"), port)
		},
		MaxIdleConnsPerHost: 4, IdleConnTimeout: time.Minute, ResponseHeaderTimeout: 5 * time.Minute,
	}
	return &httputil.ReverseProxy{
		Transport: tr,
		Rewrite: func(pr *httputil.ProxyRequest) {
			t, _ := pr.In.Context().Value(targetKey{}).(target)
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = net.JoinHostPort(t.contract+".contract", strconv.Itoa(t.port))
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded()
			dropCookie(pr.Out.Header, CookiePrefix+t.contract)
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			t, _ := r.Context().Value(targetKey{}).(target)
			s.d.Log.Debug("jupyter proxy: upstream", "contract", t.contract, "err", err)
			http.Error(w, fmt.Sprintf("cshare: contract %s's Jupyter on port %d does not answer: %v", t.contract, t.port, err), http.StatusBadGateway)
		},
	}
}

// dropCookie takes the cookie name out of h's Cookie headers.
func dropCookie(h http.Header, name string) {
	var keep []string
	for _, line := range h.Values("Cookie") {
		var parts []string
		for _, c := range strings.Split(line, ";") {
			if k, _, _ := strings.Cut(strings.TrimSpace(c), "="); k != name {
				parts = append(parts, strings.TrimSpace(c))
			}
		}
		if len(parts) > 0 {
			keep = append(keep, strings.Join(parts, "; "))
		}
	}
	h.Del("Cookie")
	for _, v := range keep {
		h.Add("Cookie", v)
	}
}

var (
	errNotHere = errors.New("not found")
	errState   = errors.New("not running")
)

func statusOf(err error) int {
	if errors.Is(err, errState) {
		return http.StatusConflict
	}
	return http.StatusNotFound
}

// contract is id's renter and Jupyter port, if id is a jupyter-mode
// contract this machine hosts, proxied (not direct), and running now.
func (s *Service) contract(id string) (renter string, port int, err error) {
	now := s.d.Now().UnixMilli()
	s.d.Ledger.View(func(st *ledger.State) {
		c := st.Contracts[id]
		switch {
		case c == nil || c.Offer.Machine != s.d.Machine || c.Spec.Mode != ledger.ModeJupyter:
			err = fmt.Errorf("no jupyter contract %s on this machine: %w", id, errNotHere)
		case c.Spec.Direct:
			err = fmt.Errorf("contract %s publishes its Jupyter directly (--direct), not through this proxy: %w", id, errNotHere)
		default:
			if state := c.State(now, st.MarketPolicy()); state != market.StateRunning {
				err = fmt.Errorf("contract %s is %s: %w", id, state, errState)
			}
			renter, port = c.Renter, ledger.JupyterPort
		}
	})
	return renter, port, err
}

// contractID says whether s looks like a contract ID (letters and digits,
// 1 to 64).
func contractID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}
