package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
)

// Listings that grow with a job or with the org (a job's items, jobs,
// machines, members, contracts, datasets, offers) are streamed and paged.
//
// A listing's answer is one JSON array, as it always was, but written
// row by row as the node reads them (one row a line), so that neither
// the node nor the client holds the whole of it: a job of a million items
// is a 100 MB answer. A request may page it with two query parameters:
//
//	limit  at most this many rows (1 to MaxLimit; none: every row)
//	after  the cursor of the last row already read: the listing goes on
//	       with the row after it (none: from the first row)
//
// The cursor of a row is its item number in a job's items, and its ID in
// every other listing (a dataset's CID); in those, the last 12 or more
// characters of an ID (what the CLI's tables show) do too when they name
// one row. A page of limit rows may be followed by more: ask again with
// after set to the last row's cursor; a shorter page is the last.

// Page asks for part of a listing (see above): at most Limit rows (0: all
// of them) after the row whose cursor is After ("": from the first).
type Page struct {
	Limit int64
	After string
}

// MaxLimit is the largest limit a listing takes.
const MaxLimit = 1_000_000_000

// maxCursor caps an after cursor: an ID, an item number or a job's name.
const maxCursor = 256

// query is p as query parameters, "" for the whole listing.
func (p Page) query() url.Values {
	v := url.Values{}
	if p.Limit > 0 {
		v.Set("limit", strconv.FormatInt(p.Limit, 10))
	}
	if p.After != "" {
		v.Set("after", p.After)
	}
	return v
}

// ParsePage reads and checks a listing's limit and after parameters. Its
// errors are 400s naming the parameter.
func ParsePage(q url.Values) (Page, error) {
	var p Page
	if q.Has("limit") {
		s := q.Get("limit")
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 1 || n > MaxLimit {
			return p, FieldErrorf(http.StatusBadRequest, "limit", "limit: %q; allowed: a whole number from 1 to %d", Ellipsize(s), MaxLimit)
		}
		p.Limit = n
	}
	p.After = q.Get("after")
	if len(p.After) > maxCursor {
		return p, FieldErrorf(http.StatusBadRequest, "after", "after: %q is %d bytes; a cursor (the last ID or item number of a page) is at most %d", Ellipsize(p.After), len(p.After), maxCursor)
	}
	return p, nil
}

// ItemCursor reads the after cursor of a job's items: the last item number
// read, or "" for none (ok false).
func ItemCursor(after string) (item int64, ok bool, err error) {
	if after == "" {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(after, 10, 64)
	if err != nil {
		return 0, false, FieldErrorf(http.StatusBadRequest, "after", "after: %q is not an item number; give the last item of the page before", Ellipsize(after))
	}
	return n, true, nil
}

// EmitRows emits the rows of a listing held whole (one bounded by the
// org's size) paged by p: key is a row's cursor.
func EmitRows[T any](rows []T, p Page, key func(T) string, emit func(T) error) error {
	start := 0
	if p.After != "" {
		k, err := cursorRow(rows, p.After, key)
		if err != nil {
			return err
		}
		start = k + 1
	}
	for i := start; i < len(rows); i++ {
		if p.Limit > 0 && int64(i-start) >= p.Limit {
			break
		}
		if err := emit(rows[i]); err != nil {
			return err
		}
	}
	return nil
}

// minShortCursor is the shortest end of an ID that names a row: the CLI's
// tables show the last 12 characters.
const minShortCursor = 12

// cursorRow is the index of the row whose key is after, or whose key ends
// in it when exactly one does.
func cursorRow[T any](rows []T, after string, key func(T) string) (int, error) {
	hit, hits := -1, 0
	for i, r := range rows {
		k := key(r)
		if k == after {
			return i, nil
		}
		if len(after) >= minShortCursor && strings.HasSuffix(k, after) {
			hit = i
			hits++
		}
	}
	if hits == 1 {
		return hit, nil
	}
	return 0, FieldErrorf(http.StatusBadRequest, "after", "after: %q is no row of this listing; give the ID of the last row of the page before", Ellipsize(after))
}

// flushEvery is how many rows a listing writes between flushes.
const flushEvery = 512

// streamRows answers a listing: list calls emit for each row in order, and
// each is written at once as one element of a JSON array (one a line),
// flushed now and then. An error of list before its first row is the
// answer, a JSON Error with its status; after it (the client went away,
// the job was voided) the connection is cut, so that the client sees a
// broken answer, never a short one.
func streamRows[T any](w http.ResponseWriter, list func(emit func(T) error) error) {
	var (
		buf  bytes.Buffer
		enc  = json.NewEncoder(&buf)
		row  T // one value for every row: Encode(&row) does not allocate it again
		rows int
	)
	rc := http.NewResponseController(w)
	err := list(func(v T) error {
		buf.Reset()
		if rows == 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			buf.WriteString("[\n")
		} else {
			buf.WriteString(",\n")
		}
		row = v
		if err := enc.Encode(&row); err != nil {
			return err
		}
		buf.Truncate(buf.Len() - 1) // Encode's newline: the separator comes first
		rows++
		if _, err := w.Write(buf.Bytes()); err != nil {
			return err
		}
		if rows%flushEvery == 0 {
			_ = rc.Flush() // a writer that cannot flush sends when it will; a broken one fails the next Write
		}
		return nil
	})
	switch {
	case err != nil && rows == 0:
		writeError(w, err)
	case err != nil:
		// Send what was written, then cut the connection (quietly, for
		// net/http) before the array's end.
		_ = rc.Flush()
		panic(http.ErrAbortHandler)
	case rows == 0:
		writeJSON(w, http.StatusOK, []T{})
	default:
		_, _ = w.Write([]byte("\n]\n"))
	}
}

// streamer is what a route's answer is to stream itself (see listing);
// serveRoute calls it in place of writing a value.
type streamer func(w http.ResponseWriter)

// listing is the answer of a listing route: it checks the page parameters
// of r, then streams the rows list emits. The parameters' error, or list's
// before its first row, is the answer.
func listing[T any](list func(ctx context.Context, r *http.Request, p Page, emit func(T) error) error) answer {
	return answer{serve: func(r *http.Request) (any, error) {
		p, err := ParsePage(r.URL.Query())
		if err != nil {
			return nil, err
		}
		return streamer(func(w http.ResponseWriter) {
			streamRows(w, func(emit func(T) error) error { return list(r.Context(), r, p, emit) })
		}), nil
	}, resp: reflect.TypeFor[[]T]()}
}

// listed is listing for a listing held whole (bounded by the org's size):
// the rows of r, paged by EmitRows with key as a row's cursor.
func listed[T any](key func(T) string, rows func(ctx context.Context, r *http.Request) ([]T, error)) answer {
	return listing(func(ctx context.Context, r *http.Request, p Page, emit func(T) error) error {
		all, err := rows(ctx, r)
		if err != nil {
			return err
		}
		return EmitRows(all, p, key, emit)
	})
}

// whole is listed for a service's method that lists the rows from nothing
// of the request.
func whole[T any](key func(T) string, rows func(ctx context.Context) ([]T, error)) answer {
	return listed(key, func(ctx context.Context, _ *http.Request) ([]T, error) { return rows(ctx) })
}
