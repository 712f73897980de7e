package jupyter

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/market"
)

// FuzzProxyRequest: whatever path, query, cookie and Authorization
// header a request brings, the proxy answers without a panic, with one of
// its own statuses, and reaches the upstream only with the contract's
// token.
func FuzzProxyRequest(f *testing.F) {
	host, hostID := testKey(f)
	renter, renterID := testKey(f)
	tok, err := Token(renter, hostID, "c1")
	if err != nil {
		f.Fatal(err)
	}
	now := time.Now().UnixMilli()
	st := ledger.NewState()
	st.Contracts["c1"] = &ledger.Contract{Contract: market.Contract{ID: "c1", Seq: 1, Renter: renterID, Host: "h",
		Offer: market.Offer{Machine: testMachine, Until: now + market.Hour}, Accepted: true, Start: now - 1000, End: now + market.Hour,
		Running: true, Since: now - 1000}, Spec: ledger.ContractSpec{Image: "x", Mode: ledger.ModeJupyter}}
	dialled := 0
	s, err := New(Deps{Ledger: &book{st: st}, Machine: testMachine, Key: host, Now: time.Now, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Dial: func(context.Context, string, int) (net.Conn, error) { dialled++; return nil, errors.New("no upstream") }})
	if err != nil {
		f.Fatal(err)
	}
	f.Add("/contract/c1/", "token="+tok, "", "")
	f.Add("/contract/c1/api", "", CookiePrefix+"c1="+tok, "")
	f.Add("/contract/c1/x", "", "", "token "+tok)
	f.Add("/contract/c1", "token=x", "a=b; c", "Bearer y")
	f.Add("/contract//", "token=%zz", "", "")
	f.Add("/contract/../c1/", "", "", "token ")
	f.Fuzz(func(t *testing.T, path, query, cookie, auth string) {
		r := &http.Request{Method: http.MethodGet, URL: &url.URL{Path: path, RawQuery: query}, Header: http.Header{}, Host: "h:1"}
		r = r.WithContext(context.Background())
		if cookie != "" {
			r.Header.Set("Cookie", cookie)
		}
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		before := dialled
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		switch w.Code {
		case http.StatusFound, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound:
		case http.StatusBadGateway:
			if dialled == before {
				t.Fatalf("502 without a dial")
			}
		default:
			t.Fatalf("%q %q: status %d", path, query, w.Code)
		}
		if dialled > before {
			q, _ := url.ParseQuery(query)
			c, _ := r.Cookie(CookiePrefix + "c1")
			a, isToken := strings.CutPrefix(auth, "token ")
			if q.Get("token") != tok && (c == nil || c.Value != tok) && (!isToken || strings.TrimSpace(a) != tok) {
				t.Fatalf("reached the upstream without the token: %q %q %q %q", path, query, cookie, auth)
			}
		}
	})
}
