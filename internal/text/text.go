// Package text owns the rules for text that one member writes and another
// reads: names (of the org, machines and jobs), descriptions, and how any
// such string is printed for a person.
//
// kubectl learnt this as CVE-2021-25743: names and messages carried ANSI
// sequences and carriage returns into other users' terminals. So cshare has
// one validator for names at the input edge (CLI flags, node.yaml, the
// node's API), the same validator in the ledger fold (an entry with a bad
// name has no effect), and one escaper at the printing edge (tables and
// detail views; --json stays exact).
//
// The rules use fixed tables, not the Unicode tables of the Go release that
// built the binary: the fold runs them, and every node must refuse exactly
// the same names whatever Go built it.
//
// Unsafe runes, which Escape replaces and names may not hold:
//   - C0 controls U+0000–U+001F (\t, \n, \r, ESC, ...), DEL U+007F and the
//     C1 controls U+0080–U+009F (a terminal reads U+009B as CSI);
//   - bidirectional controls: U+061C, U+200E, U+200F, U+202A–U+202E,
//     U+2066–U+2069 (they reorder what follows: "Trojan Source");
//   - the line and paragraph separators U+2028 and U+2029;
//   - invisible characters that make one name look like another: U+200B
//     (zero-width space), U+2060–U+2064, U+FEFF (BOM) and U+FFF9–U+FFFB.
//
// The zero-width joiner and non-joiner (U+200D, U+200C) are not unsafe:
// emoji sequences and several scripts need them.
package text

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Limits.
const (
	MaxName        = 64   // characters (runes) of a name
	MaxDescription = 4096 // bytes of a description
	MaxEcho        = 64   // characters of a bad value an error message echoes
)

// Error is a refused name or description: one line naming the field, what
// is wrong, and what is allowed.
type Error struct {
	Field   string // "name", "machine name", or a CLI flag such as "--name"
	Problem string // e.g. `100241 characters`, `"a\x1bb" holds a control character (U+001B)`
	Allowed string // e.g. "allowed: at most 64 characters, one line of printable text"
}

func (e *Error) Error() string { return e.Field + ": " + e.Problem + "; " + e.Allowed }

const nameAllowed = "allowed: 1 to 64 characters, one line of printable text"

// Unsafe reports whether r is a rune Escape replaces and a name may not
// hold (see the package documentation).
func Unsafe(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7f && r <= 0x9f:
		return true
	case r < 0x061c:
		return false
	}
	switch r {
	case 0x061c, 0x200b, 0x200e, 0x200f, 0x2028, 0x2029, 0xfeff:
		return true
	}
	return (r >= 0x202a && r <= 0x202e) || (r >= 0x2060 && r <= 0x2064) ||
		(r >= 0x2066 && r <= 0x2069) || (r >= 0xfff9 && r <= 0xfffb)
}

// space reports whether r is Unicode White_Space (a fixed list; the
// property has not changed since Unicode 4.1) and not already unsafe.
func space(r rune) bool {
	switch r {
	case ' ', 0xa0, 0x1680, 0x202f, 0x205f, 0x3000:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}

// CheckName checks a name: valid UTF-8, 1 to MaxName characters, no unsafe
// rune (so one line, no control or bidirectional character), and no space
// at either end. The input edge trims spaces before it checks; the fold
// refuses them. field names the name in the error ("name", "--name").
func CheckName(field, s string) error {
	fail := func(problem string) error { return &Error{Field: field, Problem: problem, Allowed: nameAllowed} }
	if !utf8.ValidString(s) {
		return fail(fmt.Sprintf("%d bytes that are not valid UTF-8", len(s)))
	}
	n := utf8.RuneCountInString(s)
	switch {
	case n == 0:
		return fail("empty")
	case n > MaxName:
		return &Error{Field: field, Problem: fmt.Sprintf("%d characters", n),
			Allowed: "allowed: at most 64, one line of printable text"}
	}
	for _, r := range s {
		if Unsafe(r) {
			return fail(fmt.Sprintf("%s holds %s (%U)", Quote(s), kindOf(r), r))
		}
	}
	first, _ := utf8.DecodeRuneInString(s)
	last, _ := utf8.DecodeLastRuneInString(s)
	if space(first) || space(last) {
		return fail(Quote(s) + " starts or ends with a space")
	}
	return nil
}

func kindOf(r rune) string {
	switch {
	case r == '\n' || r == '\r' || r == 0x2028 || r == 0x2029:
		return "a line break"
	case r < 0x20 || (r >= 0x7f && r <= 0x9f):
		return "a control character"
	case r == 0x061c || r == 0x200e || r == 0x200f || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069):
		return "a bidirectional control character"
	}
	return "an invisible character"
}

// CheckDescription checks free text such as the org's description: valid
// UTF-8 of at most MaxDescription bytes. It is stored as given, newlines and
// all; printers escape it.
func CheckDescription(field, s string) error {
	const allowed = "allowed: at most 4096 bytes of UTF-8 text"
	switch {
	case len(s) > MaxDescription:
		return &Error{Field: field, Problem: fmt.Sprintf("%d bytes", len(s)), Allowed: allowed}
	case !utf8.ValidString(s):
		return &Error{Field: field, Problem: "not valid UTF-8", Allowed: allowed}
	}
	return nil
}

// Escape renders s for a person's terminal: every unsafe rune becomes a
// visible escape (\n, \r, \t, \x1b, \x7f, \u0085, \u202e) and every byte
// that is not valid UTF-8 becomes \xNN. All other text, wide CJK and emoji
// included, is unchanged. What holds:
//   - Escape(s) holds no unsafe rune and is valid UTF-8;
//   - Escape(s) == s exactly when s is valid UTF-8 without unsafe runes, so
//     every name CheckName accepts escapes to itself;
//   - Escape is idempotent: Escape(Escape(s)) == Escape(s).
//
// Escape does not escape the backslash, so it is not injective: a name
// spelled `a\x1bb` prints as a name holding ESC does. It keeps terminals
// safe; --json is the exact form.
func Escape(s string) string {
	i := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || Unsafe(r) {
			break
		}
		i += size
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x80 && Unsafe(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case Unsafe(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// Quote is s escaped and in double quotes, for error messages that echo a
// user's string.
func Quote(s string) string { return `"` + Escape(s) + `"` }

// Clip cuts s to MaxEcho characters (runes; a byte that is not UTF-8
// counts as one), ending a longer s in "…", so that an error does not
// echo a 10 KB value back. It does not escape: see Echo.
func Clip(s string) string {
	n := 0
	for i := 0; i < len(s); n++ {
		if n == MaxEcho {
			return s[:i] + "…"
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return s
}

// Echo is how an error message repeats a user's bad value: escaped, in
// double quotes, and at most MaxEcho characters of it; a longer value is
// cut, ends in "…" and says its length in bytes: "aaa…" (10240 bytes).
func Echo(s string) string {
	c := Clip(s)
	if c == s {
		return Quote(s)
	}
	return Quote(c) + fmt.Sprintf(" (%d bytes)", len(s))
}

// InvalidAt is the offset of the first byte of s that is not UTF-8, or -1
// when s is valid UTF-8.
func InvalidAt(s string) int {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return -1
}
