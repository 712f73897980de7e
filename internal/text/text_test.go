package text

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// hostile holds every kind of unsafe text the issue names.
var hostile = []string{
	"\x1b[2J", "\x1b[31mred\x1b[0m", "a\rb", "a\nb", "a\x00b", "a\x7fb",
	"a\u202eb", "a\u2066b\u2069", "a\u200eb", "a\u061cb", "\u009b31m", "a\u2028b",
	"a\u200bb", "\ufeffacme", "\xff\xfe", "ok\xc3",
}

func TestEscape(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"demo-1", "demo-1"},
		{"工作 🟢 ok", "工作 🟢 ok"},
		{"👩‍💻", "👩‍💻"}, // ZWJ sequence kept
		{"\x1b[2J", `\x1b[2J`},
		{"a\nb\r\tc", `a\nb\r\tc`},
		{"a\x00\x7f", `a\x00\x7f`},
		{"\u009b", `\u009b`},
		{"x\u202ey", `x\u202ey`},
		{"\u2066\u2069\u200e\u200f\u061c", `\u2066\u2069\u200e\u200f\u061c`},
		{"a\xffb\xc3", `a\xffb\xc3`},
		{"\ufffd", "\ufffd"}, // a real U+FFFD is text
	} {
		if got := Escape(c.in); got != c.want {
			t.Errorf("Escape(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestCheckName(t *testing.T) {
	for _, ok := range []string{"demo-1", "acme", "seed", "office-gpu-1", "Ünïcode 名前", "🟢", "a  b", strings.Repeat("é", 64)} {
		if err := CheckName("name", ok); err != nil {
			t.Errorf("CheckName(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range append([]string{"", " acme", "acme ", "acme\u3000", "\u00a0x", strings.Repeat("x", 65)}, hostile...) {
		err := CheckName("name", bad)
		if err == nil {
			t.Errorf("CheckName(%q) = nil, want an error", bad)
			continue
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "name: ") || !strings.Contains(msg, "allowed: ") || Escape(msg) != msg {
			t.Errorf("CheckName(%q) = %q: want one safe line naming the field and what is allowed", bad, msg)
		}
	}
	long := strings.Repeat("x", 100241)
	if got, want := CheckName("name", long).Error(), "name: 100241 characters; allowed: at most 64, one line of printable text"; got != want {
		t.Errorf("long name: %q, want %q", got, want)
	}
}

func TestCheckDescription(t *testing.T) {
	if err := CheckDescription("description", "line one\nline two \x1b[31m"); err != nil {
		t.Errorf("multi-line description refused: %v", err)
	}
	if err := CheckDescription("description", strings.Repeat("x", MaxDescription)); err != nil {
		t.Errorf("4096 bytes refused: %v", err)
	}
	if got, want := CheckDescription("description", strings.Repeat("x", 60000)).Error(), "description: 60000 bytes; allowed: at most 4096 bytes of UTF-8 text"; got != want {
		t.Errorf("60 KB: %q, want %q", got, want)
	}
	if CheckDescription("description", "a\xff") == nil {
		t.Error("invalid UTF-8 accepted")
	}
}

// safe reports whether s is valid UTF-8 without an unsafe rune.
func safe(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if Unsafe(r) {
			return false
		}
	}
	return true
}

func FuzzEscape(f *testing.F) {
	for _, s := range append(hostile, "", "demo-1", "工作 🟢", "👩‍💻", "\\x1b") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e := Escape(s)
		if !safe(e) {
			t.Fatalf("Escape(%q) = %q holds an unsafe rune or invalid UTF-8", s, e)
		}
		for i := 0; i < len(e); i++ {
			if c := e[i]; c < 0x20 || c == 0x7f {
				t.Fatalf("Escape(%q) = %q holds control byte %#x", s, e, c)
			}
		}
		if (e == s) != safe(s) {
			t.Fatalf("Escape(%q) = %q: unchanged must mean safe, and safe unchanged", s, e)
		}
		if Escape(e) != e {
			t.Fatalf("Escape is not idempotent on %q: %q then %q", s, e, Escape(e))
		}
	})
}

func FuzzCheckName(f *testing.F) {
	for _, s := range append(hostile, "", "demo-1", " x", "工作 🟢", strings.Repeat("y", 70)) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := CheckName("name", s)
		if err != nil {
			if msg := err.Error(); Escape(msg) != msg || len(msg) > 1024 {
				t.Fatalf("CheckName(%q) error %q is not one short safe line", s, msg)
			}
			return
		}
		if Escape(s) != s {
			t.Fatalf("accepted name %q escapes to %q", s, Escape(s))
		}
		if n := utf8.RuneCountInString(s); n < 1 || n > MaxName || strings.TrimSpace(s) != s {
			t.Fatalf("accepted name %q: %d characters, or spaces at an end", s, n)
		}
	})
}

// TestEcho: an echoed value is escaped, quoted and at most MaxEcho
// characters of the value, with its length when cut.
func TestEcho(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"busybox", `"busybox"`},
		{"a\x1bb", `"a\x1bb"`},
		{strings.Repeat("x", MaxEcho), `"` + strings.Repeat("x", MaxEcho) + `"`},
		{strings.Repeat("x", 10240), `"` + strings.Repeat("x", MaxEcho) + `…" (10240 bytes)`},
		{strings.Repeat("é", 65), `"` + strings.Repeat("é", MaxEcho) + `…" (130 bytes)`},
		{strings.Repeat("\xff", 70), `"` + strings.Repeat(`\xff`, MaxEcho) + `…" (70 bytes)`},
	} {
		if got := Echo(c.in); got != c.want {
			t.Errorf("Echo(%.20q) = %q, want %q", c.in, got, c.want)
		}
	}
	for _, s := range append(hostile, strings.Repeat("\u202e", 1000)) {
		e := Echo(s)
		if !utf8.ValidString(e) || Escape(e) != e {
			t.Errorf("Echo(%q) = %q: not safe text", s, e)
		}
	}
}
