package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/market"
)

// post sends body to path through the handler and returns the status and
// the decoded error (if any).
func postRaw(t *testing.T, path, body string) (int, Error) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer tok")
	rec := httptest.NewRecorder()
	Handler(stubs(), "tok").ServeHTTP(rec, req)
	var e Error
	if rec.Code != http.StatusOK {
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
			t.Fatalf("%s: %d %q: %v", path, rec.Code, rec.Body, err)
		}
	}
	return rec.Code, e
}

// TestBodyRefusesInvalidUTF8: text that is not UTF-8 as sent (a bad byte,
// or a \uD800-\uDFFF escape without its pair), which encoding/json would
// silently turn into U+FFFD, is refused with a 400 naming the top-level
// field that holds it, for jobs and contracts; good text passes.
func TestBodyRefusesInvalidUTF8(t *testing.T) {
	for _, c := range []struct {
		path, body, field string
	}{
		{"/v1/jobs", "{\"cmd\":[\"echo\",\"a\xffb\"]}", "cmd"},
		{"/v1/jobs", "{\"cmd\":[\"true\"],\"env\":{\"A\":\"\xc3\"}}", "env"},
		{"/v1/jobs", "{\"cmd\":[\"true\"],\"env\":{\"A\xfe\":\"x\"}}", "env"},
		{"/v1/jobs", `{"cmd":["echo","\ud800"]}`, "cmd"},
		{"/v1/jobs", `{"cmd":["echo","\udc00\ud83d"]}`, "cmd"},
		{"/v1/jobs", `{"name":"x\uDBFF!","cmd":["true"]}`, "name"},
		{"/v1/jobs", "{\"cmd\":[\"true\"],\"image\":\"busybox\",\"env\":{\"A\":\"1\"},\"name\":\"ok\xff\"}", "name"},
		{"/v1/jobs", "{\"c\xffmd\":[\"true\"]}", "body"},
		{"/v1/contracts", "{\"offer\":\"o1\",\"image\":\"busybox\",\"env\":{\"K\":[\"\xff\"]}}", "env"},
		{"/v1/contracts", "{\"offer\":\"o1\",\"onstart\":\"echo \xe2\x82\"}", "onstart"},
		{"/v1/org", "\xff", "body"},
	} {
		code, e := postRaw(t, c.path, c.body)
		if code != http.StatusBadRequest || e.Field != c.field || !strings.HasPrefix(e.Error, c.field+": ") || strings.Contains(e.Error, "\n") {
			t.Errorf("%s %q: %d %+v; want a 400 about %s", c.path, c.body, code, e, c.field)
		}
	}
	for _, body := range []string{
		`{"cmd":["echo","\ud83d\ude00 工作 \u00e9 \\ud800"],"env":{"A":"\ufffd"}}`,
		`{"cmd":["true"]}`,
		``,
	} {
		if code, e := postRaw(t, "/v1/jobs", body); code != http.StatusOK {
			t.Errorf("%q: %d %+v; want 200", body, code, e)
		}
	}
}

// TestSpecTooLargeNamesTheField: a command and env too large for a ledger
// entry are refused at the API's door naming the field and the flags, not
// later as "entry too large: N bytes, limit 65536".
func TestSpecTooLargeNamesTheField(t *testing.T) {
	big, _ := json.Marshal(map[string]any{"cmd": []string{"true"}, "env": map[string]string{"A": strings.Repeat("x", 100000)}})
	for _, path := range []string{"/v1/jobs", "/v1/contracts"} {
		code, e := postRaw(t, path, string(big))
		if code != http.StatusBadRequest || e.Field != "env" || !strings.Contains(e.Error, "shorten --env") || len(e.Error) > 300 {
			t.Errorf("%s: %d %+v", path, code, e)
		}
	}
}

// TestBadRequestNamesTheField: errors about one value carry its field: a
// job's name (text.CheckName), an offer's min_duration_ms and for_ms, and
// the market's own checks mapped to the request's JSON keys.
func TestBadRequestNamesTheField(t *testing.T) {
	field := func(err error) string {
		var se *StatusError
		if !errors.As(err, &se) {
			return "(not a StatusError)"
		}
		return se.Field
	}
	if f := field(BadRequest(text.CheckName("name", "a\x1bb"))); f != "name" {
		t.Errorf("job name: field %q", f)
	}
	if f := field(BadRequest(market.Offer{}.Check())); f != "" && f != "machine" {
		t.Errorf("market error without a request field: %q", f)
	}
	hw := market.Hardware{CPUs: 16, MemoryMB: 65536, DiskMB: 1 << 20}
	const now = 1_700_000_000_000
	i := func(v int64) *int64 { return &v }
	for _, c := range []struct {
		req   OfferCreate
		field string
		want  string
	}{
		{OfferCreate{Price: "1", MinDurationMS: 30 * market.Day}, "min_duration_ms", "min_duration_ms: 720h; allowed: 0 to 168h"},
		{OfferCreate{Price: "1", MinDurationMS: -5}, "min_duration_ms", "min_duration_ms: -5 ms"},
		{OfferCreate{Price: "1", ForMS: 1 << 62}, "for_ms", "for_ms: "},
		{OfferCreate{Price: "1", ForMS: -1}, "for_ms", "for_ms: "},
		{OfferCreate{Price: "1", MemoryMB: i(10 << 20)}, "memory_mb", "memory_mb: 10 TiB; this machine has 64 GiB"},
	} {
		_, err := c.req.Offer("m1", hw, now)
		if f := field(err); f != c.field || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%+v: %v (field %q); want field %s, %q...", c.req, err, f, c.field, c.want)
		}
	}
}
