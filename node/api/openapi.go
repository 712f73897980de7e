package api

import (
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"time"
)

// OpenAPI is the OpenAPI 3.0 document of routes (GET /v1/openapi.json):
// for each route its method and path, its parameters, the schema of its
// body and of its answer (from the Go types the route's answer was built
// with: types.go's JSON tags), and its errors, every one an Error. The
// node's /metrics (Prometheus text) is listed with them.
func OpenAPI(routes []route) map[string]any {
	s := &schemas{defs: map[string]any{}}
	paths := map[string]map[string]any{}
	for _, rt := range routes {
		method, path, _ := strings.Cut(rt.pattern, " ")
		op := map[string]any{
			"operationId": strings.ToLower(method) + strings.NewReplacer("/", "_", "{", "", "}", "", "-", "_", ".", "_").Replace(path),
			"summary":     rt.pattern,
			"x-scope":     RouteScope(rt.pattern).String(),
			"security":    []any{map[string]any{"bearer": []any{}}},
			"responses":   responses(s, rt),
		}
		var params []any
		for _, m := range pathParam.FindAllStringSubmatch(path, -1) {
			params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
		}
		for _, q := range queryParams(rt) {
			params = append(params, map[string]any{"name": q, "in": "query", "schema": map[string]any{"type": "string"}})
		}
		if rt.pattern == "GET /v1/events" {
			params = append(params, map[string]any{"name": "Last-Event-ID", "in": "header", "schema": map[string]any{"type": "string"}})
		}
		if params != nil {
			op["parameters"] = params
		}
		if rt.answer.req != nil {
			op["requestBody"] = map[string]any{"content": map[string]any{"application/json": map[string]any{"schema": s.of(rt.answer.req)}}}
		} else if method == http.MethodPut {
			op["requestBody"] = map[string]any{"content": map[string]any{"application/x-tar": map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}}}}
		}
		if paths[path] == nil {
			paths[path] = map[string]any{}
		}
		paths[path][strings.ToLower(method)] = op
	}
	paths["/metrics"] = map[string]any{"get": map[string]any{"operationId": "get_metrics", "summary": "GET /metrics",
		"responses": map[string]any{"200": map[string]any{"description": "Prometheus text exposition", "content": map[string]any{"text/plain": map[string]any{"schema": map[string]any{"type": "string"}}}}}}}
	s.defs["Error"] = s.of(reflect.TypeFor[Error]())
	return map[string]any{
		"openapi": "3.0.3",
		"info":    map[string]any{"title": "cshare node API", "version": "1"},
		"paths":   paths,
		"components": map[string]any{
			"schemas":         s.defs,
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer", "description": "<data-dir>/api.token (admin), or an access token of cshare node token create (its scope: x-scope)"}},
		},
	}
}

var pathParam = regexp.MustCompile(`\{([a-z]+)\}`)

// queryParams are the query parameters a route reads.
func queryParams(rt route) []string {
	switch {
	case rt.answer.resp != nil && rt.answer.resp.Kind() == reflect.Slice && rt.answer.resp.Elem().Kind() != reflect.Uint8 && strings.HasPrefix(rt.pattern, "GET "):
		q := []string{"limit", "after"}
		if rt.pattern == "GET /v1/offers" {
			q = append(q, "q", "o")
		}
		return q
	case rt.pattern == "GET /v1/events":
		return []string{"topics", "after", "follow"}
	case rt.pattern == "GET /v1/org/usage":
		return []string{"since", "until"}
	case rt.pattern == "GET /v1/contract-usage":
		return []string{"at"}
	case strings.Contains(rt.pattern, "/archive"):
		q := []string{"path"}
		if strings.Contains(rt.pattern, "/jobs/") {
			q = append(q, "item")
		}
		return q
	case rt.pattern == "GET /v1/jobs/{id}/explain":
		return nil
	case strings.HasPrefix(rt.pattern, "GET /v1/jobs/{id}/"):
		return []string{"item"}
	}
	return nil
}

func responses(s *schemas, rt route) map[string]any {
	errRef := map[string]any{"content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Error"}}}}
	withDesc := func(d string) map[string]any {
		out := map[string]any{"description": d}
		for k, v := range errRef {
			out[k] = v
		}
		return out
	}
	ok := map[string]any{"description": "OK"}
	switch t := rt.answer.resp; {
	case rt.pattern == "GET /v1/events":
		ok["content"] = map[string]any{"text/event-stream": map[string]any{"schema": map[string]any{"type": "string",
			"description": "server-sent events: id: N, event: TYPE, data: one line of JSON (node/events.Event)"}}}
	case strings.Contains(rt.pattern, "/archive") && strings.HasPrefix(rt.pattern, "GET"):
		ok["content"] = map[string]any{"application/x-tar": map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}}}
	case t == nil:
	case t == reflect.TypeFor[[]byte]():
		ok["content"] = map[string]any{"application/octet-stream": map[string]any{"schema": map[string]any{"type": "string", "format": "binary"}}}
	default:
		ok["content"] = map[string]any{"application/json": map[string]any{"schema": s.of(t)}}
	}
	return map[string]any{
		"200": ok,
		"400": withDesc("a bad request: error names the field at fault"),
		"401": withDesc("no token, or a wrong or expired one"),
		"403": withDesc("the token's scope is below the route's (x-scope), or the Host is not the API's"),
		"404": withDesc("no such route or thing"),
		"413": withDesc("a body over 1 MiB"),
		"500": withDesc("the node failed"),
	}
}

// schemas builds JSON schemas of Go types, named structs kept once in
// components.
type schemas struct{ defs map[string]any }

func (s *schemas) of(t reflect.Type) map[string]any {
	if t.Kind() == reflect.Pointer {
		return s.of(t.Elem())
	}
	switch {
	case t == reflect.TypeFor[time.Time]():
		return map[string]any{"type": "string", "format": "date-time"}
	case t.Kind() == reflect.Interface:
		return map[string]any{}
	}
	switch t.Kind() {
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return map[string]any{"type": "string", "format": "byte"}
		}
		return map[string]any{"type": "array", "items": s.of(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": s.of(t.Elem())}
	case reflect.Struct:
		name := t.Name()
		if name == "" {
			return s.props(t)
		}
		if strings.Contains(t.PkgPath(), "/") && !strings.HasSuffix(t.PkgPath(), "node/api") {
			name = t.PkgPath()[strings.LastIndex(t.PkgPath(), "/")+1:] + "." + name
		}
		ref := map[string]any{"$ref": "#/components/schemas/" + name}
		if _, ok := s.defs[name]; !ok {
			s.defs[name] = map[string]any{} // against recursion
			s.defs[name] = s.props(t)
		}
		return ref
	}
	return map[string]any{}
}

// props is a struct's object schema, from its JSON tags (embedded structs'
// fields inline).
func (s *schemas) props(t reflect.Type) map[string]any {
	props := map[string]any{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range s.props(ft)["properties"].(map[string]any) {
					props[k] = v
				}
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		props[name] = s.of(f.Type)
	}
	return map[string]any{"type": "object", "properties": props}
}
