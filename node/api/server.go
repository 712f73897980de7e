package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/ledger/jobspec"
)

func sprintf(format string, a ...any) string { return fmt.Sprintf(format, a...) }

// MaxBodySize caps request bodies.
const MaxBodySize = 1 << 20

// Mux is the API's router: a stdlib ServeMux whose own answers to an
// unknown route (404) or method (405, with Allow) are JSON Errors like
// every other, not plain text.
type Mux struct {
	*http.ServeMux
	routes *[]route // the routes, in the order they were added
}

// Patterns are the patterns of the API's routes (not the dashboard's or
// /metrics, which the caller adds).
func (m Mux) Patterns() []string {
	out := make([]string, len(*m.routes))
	for i, rt := range *m.routes {
		out[i] = rt.pattern
	}
	return out
}

// ServeHTTP implements http.Handler.
func (m Mux) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h, pattern := m.Handler(r)
	if pattern != "" {
		m.ServeMux.ServeHTTP(w, r)
		return
	}
	// No route: let the mux say which answer (404 or 405 with Allow) and
	// write it as JSON.
	rec := &headerRecorder{h: http.Header{}, code: http.StatusNotFound}
	h.ServeHTTP(rec, r)
	if allow := rec.h.Get("Allow"); allow != "" {
		w.Header().Set("Allow", allow)
	}
	switch rec.code {
	case http.StatusMethodNotAllowed:
		writeJSON(w, rec.code, Error{Error: sprintf("method %s is not allowed for %s; allowed: %s", r.Method, Ellipsize(r.URL.Path), rec.h.Get("Allow"))})
	case http.StatusNotFound:
		writeJSON(w, rec.code, Error{Error: sprintf("no such API route: %s %s", r.Method, Ellipsize(r.URL.Path))})
	default:
		writeJSON(w, rec.code, Error{Error: http.StatusText(rec.code)})
	}
}

// headerRecorder keeps the status and headers a handler writes, and drops
// its body.
type headerRecorder struct {
	h    http.Header
	code int
}

func (r *headerRecorder) Header() http.Header         { return r.h }
func (r *headerRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (r *headerRecorder) WriteHeader(code int)        { r.code = code }

// MaxEcho is how many characters of a user's reference or path an error
// echoes back.
const MaxEcho = text.MaxEcho

// Ellipsize cuts s to MaxEcho characters, with an ellipsis, so an error
// does not echo a 100 KB ID back (text.Clip).
func Ellipsize(s string) string { return text.Clip(s) }

// Handler returns the API's http.Handler, each route served by its
// service in svc. token is the bearer token every request must carry;
// extra routes (the dashboard, /metrics) may be added to the returned mux
// by the caller.
func Handler(svc Services, token string) Mux { return HandlerAuth(svc, Auth{Token: token}) }

// HandlerAuth is Handler admitting auth's tokens, each to the routes of
// its scope.
func HandlerAuth(svc Services, token Auth) Mux {
	mux := Mux{http.NewServeMux(), new([]route)}
	for _, part := range [][]route{nodeRoutes(svc.Node), orgRoutes(svc.Org, svc.Leave), jobRoutes(svc.Jobs),
		offerRoutes(svc.Market), contractRoutes(svc.Market), datasetRoutes(svc.Datasets)} {
		mux.handle(token, part...)
	}
	if svc.Usage != nil {
		mux.handle(token, usageRoutes(svc.Usage)...)
	}
	if svc.History != nil {
		mux.handle(token, historyRoutes(svc.History)...)
	}
	if svc.Gateway != nil {
		mux.handle(token, gatewayRoutes(svc.Gateway)...)
	}
	if svc.Dashboard != nil {
		mux.handle(token, dashboardRoutes(svc.Dashboard)...)
	}
	if svc.Events != nil {
		mux.handle(token, eventRoutes(svc.Events)...)
	}
	if svc.Tokens != nil {
		mux.handle(token, tokenRoutes(svc.Tokens)...)
	}
	mux.handle(token, route{"GET /v1/openapi.json", noBody(func(context.Context, *http.Request) (map[string]any, error) {
		return OpenAPI(*mux.routes), nil
	})})
	return mux
}

// The API's table (see route.go), one part for each service.

func nodeRoutes(svc NodeAPI) []route {
	return []route{
		{"GET /v1/status", call(svc.Status)},
		{"POST /v1/node/stop", call(func(ctx context.Context) (map[string]bool, error) {
			return map[string]bool{"stopping": true}, svc.Stop(ctx)
		})},
	}
}

func orgRoutes(svc OrgAPI, leave LeaveAPI) []route {
	machineID := func(m MachineInfo) string { return m.ID }
	memberID := func(m MemberInfo) string { return m.ID }
	return []route{
		{"POST /v1/org", decoded(svc.CreateOrg)},
		{"GET /v1/org", call(svc.Org)},
		{"GET /v1/org/key", call(func(ctx context.Context) (KeyResult, error) { return svc.OrgKey(ctx, false) })},
		{"POST /v1/org/key/rotate", call(func(ctx context.Context) (KeyResult, error) { return svc.OrgKey(ctx, true) })},
		{"POST /v1/org/invite", decoded(svc.Invite)},
		{"POST /v1/org/settings", decoded(svc.SetSettings)},
		{"POST /v1/org/transfer", decoded(func(ctx context.Context, req TransferRequest) (OrgInfo, error) { return svc.TransferOrg(ctx, req.To) })},
		{"POST /v1/join", decoded(svc.Join)},
		{"GET /v1/machines", whole(machineID, svc.Machines)},
		{"GET /v1/machines/{id}", onPath("id", svc.Machine)},
		{"POST /v1/machines/{id}/{action}", noBody(func(ctx context.Context, r *http.Request) (MachineInfo, error) {
			a := r.PathValue("action")
			if a != "approve" && a != "reject" && a != "remove" {
				return MachineInfo{}, FieldErrorf(http.StatusNotFound, "action", "unknown machine action %s; allowed: approve, reject, remove", text.Echo(a))
			}
			return svc.MachineAction(ctx, r.PathValue("id"), a)
		})},
		{"GET /v1/members", whole(memberID, svc.Members)},
		{"POST /v1/members/{id}/role", onPathBody("id", func(ctx context.Context, id string, req RoleRequest) (MemberInfo, error) {
			return svc.SetRole(ctx, id, req.Role)
		})},
		{"POST /v1/members/{id}/remove", onPath("id", func(ctx context.Context, id string) (RemoveResult, error) {
			id, err := svc.RemoveMember(ctx, id)
			return RemoveResult{Removed: err == nil, ID: id}, err
		})},
		{"POST /v1/leave", decoded(leave.Leave)},
		{"POST /v1/org/delete", decoded(leave.DeleteOrg)},
	}
}

func jobRoutes(svc JobsAPI) []route {
	return []route{
		{"POST /v1/jobs", decoded(func(ctx context.Context, req JobSubmit) (JobSubmitted, error) {
			// Said here, naming the field, not as "entry too large" when
			// the node writes it.
			if err := jobspec.CheckSpecText(req.Cmd, req.Env); err != nil {
				return JobSubmitted{}, BadRequest(err)
			}
			return svc.SubmitJob(ctx, req)
		})},
		{"GET /v1/jobs", listing(func(ctx context.Context, _ *http.Request, p Page, emit func(JobInfo) error) error {
			return svc.ListJobs(ctx, p, emit)
		})},
		{"GET /v1/jobs/{id}", onPath("id", svc.Job)},
		{"GET /v1/jobs/{id}/explain", onPath("id", svc.ExplainJob)},
		{"GET /v1/jobs/{id}/items", listing(func(ctx context.Context, r *http.Request, p Page, emit func(ItemInfo) error) error {
			if _, _, err := ItemCursor(p.After); err != nil {
				return err
			}
			return svc.ListJobItems(ctx, r.PathValue("id"), p, emit)
		})},
		{"POST /v1/jobs/{id}/modify", onPathBody("id", svc.ModifyJob)},
		{"POST /v1/jobs/{id}/cancel", onPath("id", svc.CancelJob)},
		{"GET /v1/jobs/{id}/logs", noBody(func(ctx context.Context, r *http.Request) ([]byte, error) {
			item, err := strconv.ParseInt(r.URL.Query().Get("item"), 10, 64)
			if err != nil {
				return nil, FieldErrorf(http.StatusBadRequest, "item", "item: %q is not a number", Ellipsize(r.URL.Query().Get("item")))
			}
			return svc.JobLogs(ctx, r.PathValue("id"), item)
		})},
	}
}

// offerRoutes is the offers' part of the market's routes (contractRoutes:
// the contracts').
func offerRoutes(svc MarketAPI) []route {
	return []route{
		{"POST /v1/offers", decoded(svc.CreateOffer)},
		{"GET /v1/offers", listed(func(o OfferInfo) string { return o.ID }, func(ctx context.Context, r *http.Request) ([]OfferInfo, error) {
			return svc.Offers(ctx, r.URL.Query().Get("q"), r.URL.Query().Get("o"))
		})},
		{"POST /v1/offers/{id}/remove", onPath("id", svc.RemoveOffer)},
	}
}

func datasetRoutes(svc DatasetsAPI) []route {
	return []route{
		{"POST /v1/datasets", decoded(svc.AddDataset)},
		{"GET /v1/datasets/progress/{id}", onPath("id", svc.DatasetProgress)},
		{"GET /v1/datasets", whole(func(d DatasetInfo) string { return d.CID }, svc.Datasets)},
		{"GET /v1/datasets/{ref}", onPath("ref", svc.Dataset)},
		{"POST /v1/datasets/{ref}/remove", onPath("ref", svc.RemoveDataset)},
		{"POST /v1/datasets/{ref}/access", onPathBody("ref", svc.SetDatasetAccess)},
		{"POST /v1/datasets/{ref}/get", onPathBody("ref", svc.GetDataset)},
		{"POST /v1/datasets/import", decoded(svc.ImportDataset)},
		{"POST /v1/datasets/{ref}/export", onPathBody("ref", svc.ExportDataset)},
	}
}

// DecodeBody decodes a request body strictly into v: one JSON value, no
// unknown fields, nothing after it but white space, and text that is UTF-8
// as sent (encoding/json would turn a bad byte into U+FFFD: see badText).
// An empty body leaves v as it is. Errors are *StatusError 400 (413 for a
// body over MaxBodySize), with the field at fault.
func DecodeBody(r io.Reader, v any) error {
	body, err := io.ReadAll(r)
	if isTooBig(err) {
		var tooBig *http.MaxBytesError
		errors.As(err, &tooBig)
		return Errorf(http.StatusRequestEntityTooLarge, "request body: larger than %d bytes", tooBig.Limit)
	}
	if err != nil {
		return Errorf(http.StatusBadRequest, "request body: %v", err)
	}
	if field, problem, ok := badText(body); !ok {
		return FieldErrorf(http.StatusBadRequest, field, "%s: %s; allowed: UTF-8 text", field, problem)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err = dec.Decode(v)
	if errors.Is(err, io.EOF) {
		return nil // no body
	}
	if err == nil {
		at := dec.InputOffset()
		var extra json.RawMessage
		if err = dec.Decode(&extra); errors.Is(err, io.EOF) {
			return nil
		}
		if !isTooBig(err) {
			return Errorf(http.StatusBadRequest, "request body: unexpected data after the JSON value at byte %d; send one JSON object", at)
		}
	}
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return Errorf(http.StatusRequestEntityTooLarge, "request body: larger than %d bytes", tooBig.Limit)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return FieldErrorf(http.StatusBadRequest, te.Field, "%s: %s is not %s", te.Field, Ellipsize(te.Value), typeName(te.Type))
	}
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		f, _ = strconv.Unquote(f)
		return FieldErrorf(http.StatusBadRequest, f, "request body: unknown field %q", Ellipsize(f))
	}
	return Errorf(http.StatusBadRequest, "request body: %v", err)
}

// typeName says what a JSON value of a request should have been.
func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number in the 64-bit range"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice:
		return "a list of " + t.Elem().Kind().String() + " values"
	case reflect.Map:
		return "an object of " + t.Elem().Kind().String() + " values"
	case reflect.Pointer:
		return typeName(t.Elem())
	case reflect.Struct:
		return "an object"
	}
	return "a " + t.String()
}

func isTooBig(err error) bool {
	var tooBig *http.MaxBytesError
	return errors.As(err, &tooBig)
}

// writeError answers err: a *StatusError with its status and field, any
// other error as a 500.
func writeError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	var se *StatusError
	if errors.As(err, &se) {
		code = se.Code
	}
	var field string
	if se != nil {
		field = se.Field
	}
	writeJSON(w, code, Error{Error: err.Error(), Field: field})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v)
}
