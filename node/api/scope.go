package api

import (
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"
)

// Scope is what an API access token may do (cshare node token create
// --scope): read (GET routes), submit (read, and creating jobs, datasets
// and contracts and changing one's own), admin (everything). The node's
// own api.token is admin. A token acts for this machine's person: the
// services' role checks apply on top of its scope.
type Scope int

// Scopes, from least to most.
const (
	ScopeNone Scope = iota
	ScopeRead
	ScopeSubmit
	ScopeAdmin
)

// ScopeNames are the scopes as flags and JSON spell them.
var ScopeNames = []string{"read", "submit", "admin"}

func (s Scope) String() string {
	if s < ScopeRead || s > ScopeAdmin {
		return "none"
	}
	return ScopeNames[s-1]
}

// ParseScope reads a scope's name.
func ParseScope(s string) (Scope, error) {
	for i, n := range ScopeNames {
		if s == n {
			return Scope(i + 1), nil
		}
	}
	return ScopeNone, fmt.Errorf("scope: %q is not a scope; allowed: %s", Ellipsize(s), strings.Join(ScopeNames, ", "))
}

// submitRoutes are the routes beyond GET that a submit token may call:
// creating jobs, datasets and contracts, and changing one's own (the
// services refuse what the person may not do). Every other POST and PUT
// is admin; every other GET is read.
var submitRoutes = map[string]bool{
	"POST /v1/jobs": true, "POST /v1/jobs/{id}/modify": true, "POST /v1/jobs/{id}/cancel": true,
	"POST /v1/datasets": true, "POST /v1/datasets/{ref}/remove": true, "POST /v1/datasets/{ref}/access": true, "POST /v1/datasets/{ref}/get": true,
	"POST /v1/datasets/import": true, "POST /v1/datasets/{ref}/export": true,
	"POST /v1/contracts": true, "POST /v1/contracts/{id}/extend": true, "POST /v1/contracts/{id}/{action}": true,
	"POST /v1/user/ssh-keys": true, "POST /v1/user/ssh-keys/remove": true,
	// Into a running container: a shell's address, files in and out.
	"GET /v1/jobs/{id}/ssh": true, "GET /v1/contracts/{id}/ssh": true,
	"PUT /v1/jobs/{id}/archive": true, "GET /v1/jobs/{id}/archive": true,
	"PUT /v1/contracts/{id}/archive": true, "GET /v1/contracts/{id}/archive": true,
}

// adminGets are the GET routes only admin tokens may call.
var adminGets = map[string]bool{
	"GET /v1/org/key": true, // the org key admits machines
	"GET /v1/tokens":  true,
}

// RouteScope is the scope a route's pattern needs.
func RouteScope(pattern string) Scope {
	switch {
	case submitRoutes[pattern]:
		return ScopeSubmit
	case adminGets[pattern]:
		return ScopeAdmin
	case strings.HasPrefix(pattern, "GET "):
		return ScopeRead
	}
	return ScopeAdmin
}

// Auth is who the API's routes admit: the node's own token (admin), and
// the access tokens Lookup knows (nil: none), and for the event stream
// alone, a browser's dashboard session (Session; nil: none).
type Auth struct {
	Token   string
	Lookup  func(secret string) (Scope, bool)
	Session func(r *http.Request) bool
}

// EventsRoute is the event stream's route, which a dashboard session may
// read (the dashboard's pages follow it with EventSource, which sends
// cookies but no Authorization header).
const EventsRoute = "GET /v1/events"

// scopeOf is the scope r's bearer token has (ScopeNone: no valid token).
func (a Auth) scopeOf(r *http.Request) Scope {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || got == "" {
		return ScopeNone
	}
	if a.Token != "" && subtle.ConstantTimeCompare([]byte(got), []byte(a.Token)) == 1 {
		return ScopeAdmin
	}
	if a.Lookup != nil {
		if s, ok := a.Lookup(got); ok {
			return s
		}
	}
	return ScopeNone
}
