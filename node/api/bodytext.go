package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/cshare/cshare/internal/text"
)

// Go's encoding/json turns bytes that are not UTF-8, and \uD800-\uDFFF
// escapes that pair with nothing, into U+FFFD as it decodes: a command or
// an env value would be stored changed, without a word. So a request body
// is checked as it came, before it is decoded, and such text is refused
// naming the top-level field that holds it ("body" when none does).

// badText finds the first string of body that holds bytes that are not
// UTF-8 or an unpaired surrogate escape: ok is false then, with the
// top-level field holding it (or "body") and what is wrong. A body that is
// not JSON is left to the decoder, unless its bad byte lies outside any
// string it could read.
func badText(body []byte) (field, problem string, ok bool) {
	if utf8.Valid(body) && !bytes.Contains(body, []byte(`\u`)) {
		return "", "", true
	}
	type frame struct {
		obj     bool
		wantKey bool
	}
	var stack []frame
	top := "" // the top-level key whose value is being read
	dec := json.NewDecoder(bytes.NewReader(body))
	prev := int64(0)
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		end := dec.InputOffset()
		raw := body[prev:end]
		at := prev
		prev = end
		isKey := len(stack) > 0 && stack[len(stack)-1].obj && stack[len(stack)-1].wantKey
		if s, isStr := tok.(string); isStr {
			if p := rawProblem(raw, at); p != "" {
				if isKey && len(stack) == 1 || top == "" {
					return "body", p, false
				}
				return top, p, false
			}
			if isKey {
				if len(stack) == 1 {
					top = s
				}
				stack[len(stack)-1].wantKey = false
				continue
			}
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			stack = append(stack, frame{obj: tok == json.Delim('{'), wantKey: true})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		// A value ended: its object wants a key next.
		if len(stack) > 0 && stack[len(stack)-1].obj {
			stack[len(stack)-1].wantKey = true
		}
		if len(stack) == 1 && stack[0].obj {
			top = ""
		}
	}
	if !utf8.Valid(body) {
		return "body", fmt.Sprintf("holds bytes that are not valid UTF-8 (at byte %d)", invalidAt(body, 0)), false
	}
	return "", "", true
}

// rawProblem says what is wrong with the raw JSON text of one string
// token (with the white space and punctuation before it), which starts at
// byte off of the body: "" when nothing is.
func rawProblem(raw []byte, off int64) string {
	if !utf8.Valid(raw) {
		return fmt.Sprintf("holds bytes that are not valid UTF-8 (at byte %d of the request body)", invalidAt(raw, off))
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' || i+1 >= len(raw) {
			continue
		}
		if raw[i+1] != 'u' {
			i++ // \\, \", \n ...
			continue
		}
		r, ok := hex4(raw, i+2)
		switch {
		case !ok:
			i++
		case r >= 0xd800 && r <= 0xdbff:
			if i+7 < len(raw) && raw[i+6] == '\\' && raw[i+7] == 'u' {
				if lo, ok := hex4(raw, i+8); ok && lo >= 0xdc00 && lo <= 0xdfff {
					i += 11
					continue
				}
			}
			return fmt.Sprintf("holds %s, a UTF-16 surrogate escape without its pair (at byte %d of the request body)", raw[i:i+6], off+int64(i))
		case r >= 0xdc00 && r <= 0xdfff:
			return fmt.Sprintf("holds %s, a UTF-16 surrogate escape without its pair (at byte %d of the request body)", raw[i:i+6], off+int64(i))
		default:
			i += 5
		}
	}
	return ""
}

// hex4 reads four hex digits at b[i:].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// invalidAt is the offset (plus off) of b's first byte that is not UTF-8.
func invalidAt(b []byte, off int64) int64 { return off + int64(text.InvalidAt(string(b))) }
