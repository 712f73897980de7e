package api

import (
	"bytes"
	"context"
	"crypto/subtle"
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
type Mux struct{ *http.ServeMux }

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

// Handler returns the API's http.Handler. token is the bearer token every
// request must carry; extra routes (the dashboard, /metrics) may be added to
// the returned mux by the caller.
func Handler(svc Service, token string) Mux {
	mux := Mux{http.NewServeMux()}
	auth := func(h func(w http.ResponseWriter, r *http.Request) (any, error)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
				writeJSON(w, http.StatusUnauthorized, Error{Error: "missing or wrong API token: the CLI reads it from <data-dir>/api.token"})
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, MaxBodySize)
			v, err := h(w, r)
			if err != nil {
				writeError(w, err)
				return
			}
			if s, ok := v.(streamer); ok {
				s(w)
				return
			}
			if raw, ok := v.([]byte); ok {
				w.Header().Set("Content-Type", "application/octet-stream")
				_, _ = w.Write(raw)
				return
			}
			writeJSON(w, http.StatusOK, v)
		}
	}
	decode := func(r *http.Request, v any) error { return DecodeBody(r.Body, v) }
	ctx := func(r *http.Request) context.Context { return r.Context() }

	mux.HandleFunc("GET /v1/status", auth(func(w http.ResponseWriter, r *http.Request) (any, error) { return svc.Status(ctx(r)) }))
	mux.HandleFunc("POST /v1/node/stop", auth(func(w http.ResponseWriter, r *http.Request) (any, error) {
		return map[string]bool{"stopping": true}, svc.Stop(ctx(r))
	}))
	mux.HandleFunc("POST /v1/org", auth(func(w http.ResponseWriter, r *http.Request) (any, error) {
		var req OrgCreate
		if err := decode(r, &req); err != nil {
			return nil, err
		}
		return svc.CreateOrg(ctx(r), req)
	}))
	mux.HandleFunc("GET /v1/org", auth(func(w http.ResponseWriter, r *http.Request) (any, error) { return svc.Org(ctx(r)) }))
	mux.HandleFunc("GET /v1/org/key", auth(func(w http.ResponseWriter, r *http.Request) (any, error) { return svc.OrgKey(ctx(r), false) }))
	mux.HandleFunc("POST /v1/org/key/rotate", auth(func(w http.ResponseWriter, r *http.Request) (any, error) { return svc.OrgKey(ctx(r), true) }))
	mux.HandleFunc("POST /v1/org/invite", auth(func(w http.ResponseWriter, r *http.Request) (any, error) {
		var req InviteRequest
		if err := decode(r, &req); err != nil {
			return nil, err
		}
		return svc.Invite(ctx(r), req)
	}))
	mux.HandleFunc("POST /v1/org/settings", auth(func(w http.ResponseWriter, r *http.Request) (any, error) {
		var req SettingsRequest
		if err := decode(r, &req); err != nil {
			return nil, err
		}
		return svc.SetSettings(ctx(r), req)
	}))
	mux.HandleFunc("POST /v1/org/transfer", auth(func(w http.ResponseWriter, r *http.Request) (any, error) {
		var req TransferRequest
		if err := decode(r, &req); err != nil {
			return nil, err
		}
		return svc.TransferOrg(ctx(r), req.To)
	}))
	mux.HandleFunc("POST /v1/join", auth(func(w http.ResponseWriter, r *http.Request) (any, error) {
		var req JoinRequest
		if err := decode(r, &req); err != nil {
			return nil, err
		}
		return svc.Join(ctx(r), req)
	}))
	mux.HandleFunc("GET /v1/machines", auth(func(w http.ResponseWriter, r *http.Request) (any, error) {
		return listed(r, func(m MachineInfo) string { return m.ID }, func() ([]MachineInfo, error) { return svc.Machines(ctx(r)) })
	}))
	mux.HandleFunc("GET /v1/machines/{id}", auth(func(w http.ResponseWriter, r *http.Request) (any, error) {
		return svc.Machine(ctx(r), r.PathValue("id"))
	}))
	mux.HandleFunc("POST /v1/machines/{id}/{action}", auth(func(w http.ResponseWriter, r *http.Request) (any, error) {
		a := r.PathValue("action")
		if a != "approve" && a != "reject" && a != "remove" {
			return nil, FieldErrorf(http.StatusNotFound, "action", "unknown machine action %s; allowed: approve, reject, remove", text.Echo(a))
		}
		return svc.MachineAction(ctx(r), r.PathValue("id"), a)
	}))
	mux.HandleFunc("GET /v1/members", auth(func(w http.ResponseWriter, r *http.Request) (any, error) {
		return listed(r, func(m MemberInfo) string { return m.ID }, func() ([]MemberInfo, error) { return svc.Members(ctx(r)) })
	}))
	mux.HandleFunc("POST /v1/members/{id}/role", auth(func(w http.ResponseWriter, r *http.Request) (any, error) {
		var req RoleRequest
		if err := decode(r, &req); err != nil {
			return nil, err
		}
		return svc.SetRole(ctx(r), r.PathValue("id"), req.Role)
	}))
	mux.HandleFunc("POST /v1/members/{id}/remove", auth(func(w http.ResponseWriter, r *http.Request) (any, error) {
		id, err := svc.RemoveMember(ctx(r), r.PathValue("id"))
		return RemoveResult{Removed: err == nil, ID: id}, err
	}))
	mux.HandleFunc("POST /v1/leave", auth(func(w http.ResponseWriter, r *http.Request) (any, error) {
		var req LeaveRequest
		if err := decode(r, &req); err != nil {
			return nil, err
		}
		return svc.Leave(ctx(r), req)
	}))
	mux.HandleFunc("POST /v1/org/delete", auth(func(w http.ResponseWriter, r *http.Request) (any, error) {
		var req OrgDeleteRequest
		if err := decode(r, &req); err != nil {
			return nil, err
		}
		return svc.DeleteOrg(ctx(r), req)
	}))
	mux.HandleFunc("POST /v1/jobs", auth(func(w http.ResponseWriter, r *http.Request) (any, error) {
		var req JobSubmit
		if err := decode(r, &req); err != nil {
			return nil, err
		}
		// Said here, naming the field, not as "entry too large" when the
		// node writes it.
		if err := jobspec.CheckSpecText(req.Cmd, req.Env); err != nil {
			return nil, BadRequest(err)
		}
		return svc.SubmitJob(ctx(r), req)
	}))
	mux.HandleFunc("GET /v1/jobs", auth(func(w http.ResponseWriter, r *http.Request) (any, error) {
		return listing(r, func(p Page, emit func(JobInfo) error) error { return svc.ListJobs(ctx(r), p, emit) })
	}))
	mux.HandleFunc("GET /v1/jobs/{id}", auth(func(w http.ResponseWriter, r *http.Request) (any, error) {
		return svc.Job(ctx(r), r.PathValue("id"))
	}))
	mux.HandleFunc("GET /v1/jobs/{id}/items", auth(func(w http.ResponseWriter, r *http.Request) (any, error) {
		return listing(r, func(p Page, emit func(ItemInfo) error) error {
			if _, _, err := ItemCursor(p.After); err != nil {
				return err
			}
			return svc.ListJobItems(ctx(r), r.PathValue("id"), p, emit)
		})
	}))
	mux.HandleFunc("POST /v1/jobs/{id}/modify", auth(func(w http.ResponseWriter, r *http.Request) (any, error) {
		var req JobModify
		if err := decode(r, &req); err != nil {
			return nil, err
		}
		return svc.ModifyJob(ctx(r), r.PathValue("id"), req)
	}))
	mux.HandleFunc("POST /v1/jobs/{id}/cancel", auth(func(w http.ResponseWriter, r *http.Request) (any, error) {
		return svc.CancelJob(ctx(r), r.PathValue("id"))
	}))
	mux.HandleFunc("GET /v1/jobs/{id}/logs", auth(func(w http.ResponseWriter, r *http.Request) (any, error) {
		item, err := strconv.ParseInt(r.URL.Query().Get("item"), 10, 64)
		if err != nil {
			return nil, FieldErrorf(http.StatusBadRequest, "item", "item: %q is not a number", Ellipsize(r.URL.Query().Get("item")))
		}
		return svc.JobLogs(ctx(r), r.PathValue("id"), item)
	}))
	mux.HandleFunc("POST /v1/offers", auth(func(w http.ResponseWriter, r *http.Request) (any, error) {
		var req OfferCreate
		if err := decode(r, &req); err != nil {
			return nil, err
		}
		return svc.CreateOffer(ctx(r), req)
	}))
	mux.HandleFunc("GET /v1/offers", auth(func(w http.ResponseWriter, r *http.Request) (any, error) {
		return listed(r, func(o OfferInfo) string { return o.ID }, func() ([]OfferInfo, error) {
			return svc.Offers(ctx(r), r.URL.Query().Get("q"), r.URL.Query().Get("o"))
		})
	}))
	mux.HandleFunc("POST /v1/offers/{id}/remove", auth(func(w http.ResponseWriter, r *http.Request) (any, error) {
		return svc.RemoveOffer(ctx(r), r.PathValue("id"))
	}))
	contractRoutes(mux, svc, auth)
	mux.HandleFunc("POST /v1/datasets", auth(func(w http.ResponseWriter, r *http.Request) (any, error) {
		var req DatasetAdd
		if err := decode(r, &req); err != nil {
			return nil, err
		}
		return svc.AddDataset(ctx(r), req)
	}))
	mux.HandleFunc("GET /v1/datasets/progress/{id}", auth(func(w http.ResponseWriter, r *http.Request) (any, error) {
		return svc.DatasetProgress(ctx(r), r.PathValue("id"))
	}))
	mux.HandleFunc("GET /v1/datasets", auth(func(w http.ResponseWriter, r *http.Request) (any, error) {
		return listed(r, func(d DatasetInfo) string { return d.CID }, func() ([]DatasetInfo, error) { return svc.Datasets(ctx(r)) })
	}))
	mux.HandleFunc("GET /v1/datasets/{ref}", auth(func(w http.ResponseWriter, r *http.Request) (any, error) {
		return svc.Dataset(ctx(r), r.PathValue("ref"))
	}))
	mux.HandleFunc("POST /v1/datasets/{ref}/remove", auth(func(w http.ResponseWriter, r *http.Request) (any, error) {
		return svc.RemoveDataset(ctx(r), r.PathValue("ref"))
	}))
	mux.HandleFunc("POST /v1/datasets/{ref}/get", auth(func(w http.ResponseWriter, r *http.Request) (any, error) {
		var req DatasetGet
		if err := decode(r, &req); err != nil {
			return nil, err
		}
		return svc.GetDataset(ctx(r), r.PathValue("ref"), req)
	}))
	mux.HandleFunc("POST /v1/datasets/import", auth(func(w http.ResponseWriter, r *http.Request) (any, error) {
		var req DatasetImport
		if err := decode(r, &req); err != nil {
			return nil, err
		}
		return svc.ImportDataset(ctx(r), req)
	}))
	mux.HandleFunc("POST /v1/datasets/{ref}/export", auth(func(w http.ResponseWriter, r *http.Request) (any, error) {
		var req DatasetExport
		if err := decode(r, &req); err != nil {
			return nil, err
		}
		return svc.ExportDataset(ctx(r), r.PathValue("ref"), req)
	}))
	return mux
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
