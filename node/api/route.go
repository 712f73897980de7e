package api

import (
	"context"
	"net/http"
	"reflect"
)

// The API's routes are one table (Handler's, one part for each service): a
// ServeMux pattern and the answer that serves it, built by one of the
// typed helpers below. Every route is served the same way (serveRoute): the
// bearer token is checked, the body capped, the answer computed, and then
// written as JSON (200), as raw bytes ([]byte), as a streamed listing
// (listing, listed) or as the error's {"error","field"} with its status
// (writeError). A route with a body decodes it strictly first (DecodeBody:
// one JSON value, no unknown field, UTF-8 as sent, at most MaxBodySize).

// A route is one row of the API's table.
type route struct {
	pattern string
	answer  answer
}

// answer computes a route's answer to r: a value written as JSON, []byte
// written as application/octet-stream, a streamer that writes itself, or
// an error.
type answer struct {
	serve func(r *http.Request) (any, error)
	// req and resp are the types of the request's body (nil: none) and of
	// the answer (a listing's is a slice of its rows), for the OpenAPI
	// document (openapi.go).
	req, resp reflect.Type
}

// withBody is a route whose request is a JSON body: it is decoded strictly
// into a Req, then fn answers.
func withBody[Req, Resp any](fn func(ctx context.Context, r *http.Request, req Req) (Resp, error)) answer {
	return answer{serve: func(r *http.Request) (any, error) {
		var req Req
		if err := DecodeBody(r.Body, &req); err != nil {
			return nil, err
		}
		return fn(r.Context(), r, req)
	}, req: reflect.TypeFor[Req](), resp: reflect.TypeFor[Resp]()}
}

// noBody is a route that reads no body (a GET, or a POST whose path says
// it all): what it sends is left unread.
func noBody[Resp any](fn func(ctx context.Context, r *http.Request) (Resp, error)) answer {
	return answer{serve: func(r *http.Request) (any, error) { return fn(r.Context(), r) }, resp: reflect.TypeFor[Resp]()}
}

// call is noBody for a service's method that needs nothing of the request.
func call[Resp any](fn func(ctx context.Context) (Resp, error)) answer {
	return noBody(func(ctx context.Context, _ *http.Request) (Resp, error) { return fn(ctx) })
}

// decoded is withBody for a service's method that takes the body alone.
func decoded[Req, Resp any](fn func(ctx context.Context, req Req) (Resp, error)) answer {
	return withBody(func(ctx context.Context, _ *http.Request, req Req) (Resp, error) { return fn(ctx, req) })
}

// onPath is noBody for a service's method that takes the path's wildcard
// name (an ID or reference).
func onPath[Resp any](name string, fn func(ctx context.Context, id string) (Resp, error)) answer {
	return noBody(func(ctx context.Context, r *http.Request) (Resp, error) { return fn(ctx, r.PathValue(name)) })
}

// onPathBody is withBody for a service's method that takes the path's
// wildcard name and the body.
func onPathBody[Req, Resp any](name string, fn func(ctx context.Context, id string, req Req) (Resp, error)) answer {
	return withBody(func(ctx context.Context, r *http.Request, req Req) (Resp, error) {
		return fn(ctx, r.PathValue(name), req)
	})
}

// handle registers routes on m, each served by serveRoute with auth and
// the scope its pattern needs (RouteScope).
func (m Mux) handle(auth Auth, routes ...route) {
	for _, rt := range routes {
		m.HandleFunc(rt.pattern, serveRoute(auth, rt.pattern, rt.answer))
		*m.routes = append(*m.routes, rt)
	}
}

// serveRoute is how every route answers: the bearer token (401 without a
// valid one, 403 when its scope is less than need), the body capped at
// MaxBodySize, then a's answer or error. A dashboard session reads the
// event stream alone (Auth.Session).
func serveRoute(auth Auth, pattern string, a answer) http.HandlerFunc {
	need := RouteScope(pattern)
	return func(w http.ResponseWriter, r *http.Request) {
		has := auth.scopeOf(r)
		if has == ScopeNone && pattern == EventsRoute && auth.Session != nil && auth.Session(r) {
			has = ScopeRead
		}
		if has == ScopeNone {
			closeStream(w, r)
			writeJSON(w, http.StatusUnauthorized, Error{Error: "missing or wrong API token: the CLI reads it from <data-dir>/api.token"})
			return
		}
		if has < need {
			closeStream(w, r)
			writeJSON(w, http.StatusForbidden, Error{Error: sprintf("this token's scope is %s; %s %s needs %s", has, r.Method, Ellipsize(r.URL.Path), need)})
			return
		}
		if !StreamsBody(r) {
			r.Body = http.MaxBytesReader(w, r.Body, MaxBodySize)
		}
		v, err := a.serve(r)
		if err != nil {
			closeStream(w, r)
			writeError(w, err)
			return
		}
		switch v := v.(type) {
		case streamer:
			v(w)
		case []byte:
			w.Header().Set("Content-Type", "application/octet-stream")
			_, _ = w.Write(v)
		default:
			writeJSON(w, http.StatusOK, v)
		}
	}
}
