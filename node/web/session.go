package web

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// CookieName is the dashboard's session cookie.
const CookieName = "cshare_session"

// Bounds on what a node keeps for sign-in: codes not yet used and live
// sessions (the oldest goes when a new one would pass the bound).
const (
	maxCodes    = 64
	maxSessions = 256
)

// sessions holds the one-time sign-in codes and the sessions they opened.
// A code is single use and short lived; a session expires ttl after it
// began, or when signed out.
type sessions struct {
	mu       sync.Mutex
	now      func() time.Time
	codeTTL  time.Duration
	ttl      time.Duration
	codes    map[string]time.Time // code -> expiry
	sessions map[string]*session  // id -> session
}

type session struct {
	expires time.Time
	csrf    string
	flash   *flash // shown once, by the next page
}

// flash is the outcome of an action, shown on the page it leads to.
type flash struct {
	Error string
	OK    string
	Code  string // an invite code
	Link  string // its link
	Token string // a new API access token's secret, shown this once
}

func newSessions(now func() time.Time, codeTTL, ttl time.Duration) *sessions {
	return &sessions{now: now, codeTTL: codeTTL, ttl: ttl, codes: map[string]time.Time{}, sessions: map[string]*session{}}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24)
	return hex.EncodeToString(b)
}

// newCode makes a one-time sign-in code and says when it expires.
func (s *sessions) newCode() (string, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for c, exp := range s.codes {
		if !now.Before(exp) || len(s.codes) >= maxCodes {
			delete(s.codes, c)
		}
	}
	c := randomHex(20)
	s.codes[c] = now.Add(s.codeTTL)
	return c, s.codes[c]
}

// redeem spends a code and opens a session: its ID, or "" for a code that
// is unknown, used or expired.
func (s *sessions) redeem(code string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var hit string
	for c, exp := range s.codes { // constant time in the code's bytes
		if subtle.ConstantTimeCompare([]byte(c), []byte(code)) == 1 && now.Before(exp) {
			hit = c
		}
	}
	if hit == "" {
		return ""
	}
	delete(s.codes, hit)
	var oldest string
	for id, se := range s.sessions {
		if !now.Before(se.expires) {
			delete(s.sessions, id)
		} else if oldest == "" || se.expires.Before(s.sessions[oldest].expires) {
			oldest = id
		}
	}
	if len(s.sessions) >= maxSessions {
		delete(s.sessions, oldest)
	}
	id := randomHex(32)
	s.sessions[id] = &session{expires: now.Add(s.ttl), csrf: randomHex(24)}
	return id
}

// get is r's live session (by its cookie), or nil.
func (s *sessions) get(r *http.Request) (string, *session) {
	c, err := r.Cookie(CookieName)
	if err != nil || c.Value == "" {
		return "", nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.sessions[c.Value]
	if se == nil {
		return "", nil
	}
	if !s.now().Before(se.expires) {
		delete(s.sessions, c.Value)
		return "", nil
	}
	return c.Value, se
}

func (s *sessions) end(id string) {
	s.mu.Lock()
	delete(s.sessions, id)
	s.mu.Unlock()
}

func (s *sessions) setFlash(id string, f flash) {
	s.mu.Lock()
	if se := s.sessions[id]; se != nil {
		se.flash = &f
	}
	s.mu.Unlock()
}

func (s *sessions) takeFlash(id string) *flash {
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.sessions[id]
	if se == nil {
		return nil
	}
	f := se.flash
	se.flash = nil
	return f
}

// SessionOK says whether r carries a live dashboard session: the hook by
// which routes outside the dashboard (GET /v1/events) admit the browser
// that signed in, as they admit the bearer token.
func (d *Dashboard) SessionOK(r *http.Request) bool {
	_, se := d.sess.get(r)
	return se != nil
}

// sameOrigin refuses what a browser sends from another site: a
// Sec-Fetch-Site of cross-site or same-site, or an Origin whose host is not
// the request's. (The cookie is SameSite=Strict, so such a request has no
// session either; this says so plainly.)
func sameOrigin(r *http.Request) bool {
	if s := r.Header.Get("Sec-Fetch-Site"); s == "cross-site" || s == "same-site" {
		return false
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			return false
		}
	}
	return true
}

// csrfOK says whether a form (or the X-CSRF-Token header) carries se's
// token.
func csrfOK(r *http.Request, se *session) bool {
	got := r.Header.Get("X-CSRF-Token")
	if got == "" {
		got = r.PostFormValue("csrf")
	}
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(se.csrf)) == 1
}
