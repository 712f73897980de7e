// Package web is the node's dashboard: server-rendered pages
// (html/template, embedded with go:embed) and a little plain JavaScript,
// served by every node at its API address beside the API (/v1/). It calls
// the same services as the API (api.Services) and shows their errors; what
// a person may not do is not offered, and the services refuse it anyway.
//
// Sign-in: `cshare node dashboard` asks the node for a one-time code
// (POST /v1/dashboard/code, with the API token) and prints
// /login?code=CODE; the code opens a session held in an HttpOnly,
// SameSite=Strict cookie. Every page and action needs that session; every
// form carries the session's CSRF token, and a request from another site is
// refused. Sessions expire and are ended by Sign out.
//
// Live: each page subscribes to GET /v1/events (server-sent events) and
// re-fetches the fragments an event touches (?frag=NAME of the same page);
// when the stream fails it polls the fragments every 5 seconds instead. It
// counts its refreshes by cause (window.cshareLive: event, poll), and a
// test may set the polling period first (window.csharePollMs; 0: none).
package web

import (
	"context"
	"embed"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"time"

	"github.com/cshare/cshare/node/api"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Config is what a Dashboard needs. Services and Now are required.
type Config struct {
	Services api.Services
	Now      func() time.Time
	Log      *slog.Logger // nil: discard
	// TLS: the API is served over TLS (the cookie is then Secure).
	TLS bool
	// UploadDir holds dataset uploads until the node has added them
	// (required for uploads; "" refuses them).
	UploadDir string
	// CodeTTL is how long a sign-in code lasts (default 2 minutes);
	// SessionTTL how long a session lasts (default 12 hours).
	CodeTTL, SessionTTL time.Duration
	// Carry is this node's dashboard before it started again (it left its
	// org, on the same API address): its sign-in codes, sessions and busy
	// samples go on, so the browser stays signed in.
	Carry *Dashboard
	// SampleEvery is how often the busy slots are sampled for the chart
	// (default 30 s).
	SampleEvery time.Duration
}

// Dashboard serves the pages.
type Dashboard struct {
	svc   api.Services
	now   func() time.Time
	log   *slog.Logger
	tls   bool
	up    string
	sess  *sessions
	pages map[string]*template.Template
	busy  *busySamples
	every time.Duration
}

// New makes a Dashboard; Register serves it, Run samples the busy slots.
func New(c Config) *Dashboard {
	if c.CodeTTL <= 0 {
		c.CodeTTL = 2 * time.Minute
	}
	if c.SessionTTL <= 0 {
		c.SessionTTL = 12 * time.Hour
	}
	if c.SampleEvery <= 0 {
		c.SampleEvery = 30 * time.Second
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	d := &Dashboard{svc: c.Services, now: c.Now, log: c.Log, tls: c.TLS, up: c.UploadDir,
		sess: newSessions(c.Now, c.CodeTTL, c.SessionTTL), pages: parsePages(), busy: &busySamples{}, every: c.SampleEvery}
	if c.Carry != nil {
		d.sess, d.busy = c.Carry.sess, c.Carry.busy
	}
	return d
}

// SignInCode is a new one-time sign-in code (api.DashboardService).
func (d *Dashboard) SignInCode(context.Context) (api.SignInCode, error) {
	code, exp := d.sess.newCode()
	return api.SignInCode{Code: code, Path: "/login?code=" + code, Expires: api.FormatTime(exp)}, nil
}

// Run samples the org's busy slots every SampleEvery until ctx ends.
func (d *Dashboard) Run(ctx context.Context) {
	t := time.NewTicker(d.every)
	defer t.Stop()
	for {
		d.sample(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sampleIfStale samples when the last sample is older than 5 seconds (a
// page that shows the chart asks: the chart is then current).
func (d *Dashboard) sampleIfStale(ctx context.Context) {
	if s := d.busy.get(); len(s) == 0 || d.now().Sub(s[len(s)-1].at) > 5*time.Second {
		d.sample(ctx)
	}
}

func (d *Dashboard) sample(ctx context.Context) {
	ms, err := d.svc.Org.Machines(ctx)
	if err != nil {
		return // no org yet, or leaving: nothing to count
	}
	busy, total := 0, 0
	for _, m := range ms {
		if m.Usage != nil {
			busy += m.Usage.Instances
		}
		if m.Status == "available" || m.Status == "busy" {
			total += int(m.Limits.MaxConcurrentJobs)
		}
	}
	d.busy.add(d.now(), busy, total)
}

// Register serves the dashboard on mux: its pages, fragments, actions,
// sign-in and static files.
func (d *Dashboard) Register(mux *http.ServeMux) {
	static, _ := fs.Sub(staticFS, "static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", cacheFor(http.FileServerFS(static))))
	mux.HandleFunc("GET /login", d.login)
	mux.HandleFunc("GET /signed-out", func(w http.ResponseWriter, r *http.Request) { d.signedOut(w, http.StatusOK, "You are signed out.") })
	mux.HandleFunc("POST /logout", func(w http.ResponseWriter, r *http.Request) {
		id, _, ok := d.checkPost(w, r)
		if !ok {
			return
		}
		d.sess.end(id)
		http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", HttpOnly: true, Secure: d.tls, SameSite: http.SameSiteStrictMode, MaxAge: -1})
		http.Redirect(w, r, "/signed-out", http.StatusSeeOther)
	})
	for path, p := range d.pageRoutes() {
		mux.HandleFunc("GET "+path, d.page(p))
	}
	for path, a := range d.actionRoutes() {
		mux.HandleFunc("POST "+path, d.action(a))
	}
	mux.HandleFunc("POST /datasets/upload", d.upload)
}

func cacheFor(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "private, max-age=300")
		h.ServeHTTP(w, r)
	})
}

// login spends a one-time code: a session cookie and on to the overview,
// or a page that says the code is no good.
func (d *Dashboard) login(w http.ResponseWriter, r *http.Request) {
	id := d.sess.redeem(r.URL.Query().Get("code"))
	if id == "" {
		d.signedOut(w, http.StatusUnauthorized, "This sign-in link is used, expired or wrong: each works once, for a few minutes.")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: id, Path: "/", HttpOnly: true, Secure: d.tls, SameSite: http.SameSiteStrictMode,
		MaxAge: int(d.sess.ttl / time.Second)})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// signedOut answers a request with no session: what to do to sign in.
func (d *Dashboard) signedOut(w http.ResponseWriter, code int, msg string) {
	header(w)
	w.WriteHeader(code)
	_ = d.pages["signedout"].ExecuteTemplate(w, "signedout", map[string]string{"Msg": msg})
}

// header sets what every page carries: its type, no caching, no framing,
// and scripts and styles from this node alone.
func header(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin") // not no-referrer: a form would send Origin: null
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'")
}
