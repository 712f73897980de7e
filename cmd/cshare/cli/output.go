package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/ledger/jobspec"
)

// printJSON writes v as one indented JSON value. A nil slice is written as
// [] so that listings are always arrays.
func printJSON(w io.Writer, v any) error {
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Slice && rv.IsNil() {
		v = []any{}
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	_, err = w.Write(b)
	return err
}

// table is an aligned text table. Columns are separated by two spaces and
// padded by display width, so wide runes (the status marks) keep alignment.
// Every cell is escaped (text.Escape): names and descriptions come from
// other members, and a row is always one line without control characters.
type table struct{ rows [][]string }

func (t *table) row(cells ...string) {
	r := make([]string, len(cells))
	for i, c := range cells {
		r[i] = text.Escape(c)
	}
	t.rows = append(t.rows, r)
}

func (t *table) write(w io.Writer) error {
	widths := t.widths()
	var b strings.Builder
	for _, r := range t.rows {
		writeRow(&b, r, widths)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// widths is the display width of each column: its widest cell.
func (t *table) widths() []int {
	var widths []int
	for _, r := range t.rows {
		for i, c := range r {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], displayWidth(c))
		}
	}
	return widths
}

// writeRow writes one row of escaped cells, padded to widths (a wider cell
// pushes the rest of its line), as a line.
func writeRow(b *strings.Builder, r []string, widths []int) {
	var line strings.Builder
	for i, c := range r {
		line.WriteString(c)
		if i < len(r)-1 {
			w := 0
			if i < len(widths) {
				w = widths[i]
			}
			line.WriteString(strings.Repeat(" ", max(w-displayWidth(c), 0)+2))
		}
	}
	b.WriteString(strings.TrimRight(line.String(), " "))
	b.WriteByte('\n')
}

// streamHead is how many rows of a streamed table set its column widths.
const streamHead = 1000

// streamTable is a table printed as its rows come, for listings of any
// size: its first streamHead rows (the header among them) set the widths
// of its columns and are printed together, as table prints them (all of a
// shorter table: it looks the same); each later row is printed at once, a
// wider cell pushing the rest of its own line only.
type streamTable struct {
	w      io.Writer
	head   table
	widths []int // set once the head is printed
}

func (s *streamTable) row(cells ...string) error {
	if s.widths == nil {
		s.head.row(cells...)
		if len(s.head.rows) < streamHead {
			return nil
		}
		s.widths = s.head.widths()
		err := s.head.write(s.w)
		s.head = table{}
		return err
	}
	r := make([]string, len(cells))
	for i, c := range cells {
		r[i] = text.Escape(c)
	}
	var b strings.Builder
	writeRow(&b, r, s.widths)
	_, err := io.WriteString(s.w, b.String())
	return err
}

// close prints what is left of the head.
func (s *streamTable) close() error {
	if s.widths != nil {
		return nil
	}
	return s.head.write(s.w)
}

// jsonArray prints one indented JSON array an element at a time, as
// printJSON prints the whole slice: the same bytes.
type jsonArray struct {
	w io.Writer
	n int
}

func (j *jsonArray) add(v any) error {
	b, err := json.MarshalIndent(v, "  ", "  ")
	if err != nil {
		return err
	}
	sep := ",\n  "
	if j.n == 0 {
		sep = "[\n  "
	}
	j.n++
	if _, err := io.WriteString(j.w, sep); err != nil {
		return err
	}
	_, err = j.w.Write(b)
	return err
}

// close ends the array.
func (j *jsonArray) close() error {
	end := "\n]\n"
	if j.n == 0 {
		end = "[]\n"
	}
	_, err := io.WriteString(j.w, end)
	return err
}

// kv writes "key:  value" lines, aligned and escaped as table rows are: a
// multi-line value (the org's description) shows its line breaks as \n.
func kv(w io.Writer, pairs ...[2]string) error {
	var t table
	for _, p := range pairs {
		t.row(p[0]+":", p[1])
	}
	return t.write(w)
}

// displayWidth is the number of terminal columns s takes: wide runes (emoji,
// CJK) count two.
func displayWidth(s string) int {
	n := 0
	for _, r := range s {
		switch {
		case r == 0x200d || (r >= 0xfe00 && r <= 0xfe0f): // joiners and variation selectors
		case wideRune(r):
			n += 2
		default:
			n++
		}
	}
	return n
}

func wideRune(r rune) bool {
	switch {
	case r >= 0x1f300 && r <= 0x1faff, // pictographs, emoji, the coloured circles
		r >= 0x1100 && r <= 0x115f,
		r >= 0x2e80 && r <= 0xa4cf,
		r >= 0xac00 && r <= 0xd7a3,
		r >= 0xf900 && r <= 0xfaff,
		r >= 0xfe30 && r <= 0xfe4f,
		r >= 0xff00 && r <= 0xff60,
		r >= 0xffe0 && r <= 0xffe6,
		r >= 0x20000 && r <= 0x3fffd:
		return true
	}
	switch r {
	case 0x26aa, 0x26ab, 0x2705, 0x274c, 0x231a, 0x231b, 0x23f3, 0x26a1, 0x2b50:
		return true
	}
	return false
}

// short is the table form of a long ID: its last 12 characters, which a
// command accepts in place of the full ID.
func short(id string) string {
	const n = 12
	if utf8.RuneCountInString(id) <= n+4 {
		return id
	}
	return id[len(id)-n:]
}

// orDash is s, or "-" when empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// parseTime reads an API time (RFC 3339).
func parseTime(s string) (time.Time, bool) {
	if s == "" {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || t.IsZero() {
		return time.Time{}, false
	}
	return t, true
}

// age renders how long ago s was, e.g. "12s", "5m", "3h", "2d".
func (a *app) age(s string) string {
	t, ok := parseTime(s)
	if !ok {
		return orDash(s)
	}
	d := a.now().Sub(t)
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	default:
		return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
	}
}

// ago is age with " ago", or "never" when there is no time.
func (a *app) ago(s string) string {
	if _, ok := parseTime(s); !ok {
		if s == "" {
			return "never"
		}
		return s
	}
	return a.age(s) + " ago"
}

// mib renders a size in MiB as a user reads it ("512 MiB", "16 GiB"); "-"
// when unknown.
func mib(mb int64) string {
	if mb <= 0 {
		return "-"
	}
	return jobspec.FormatMB(mb)
}

// cores renders millicores as CPU cores ("0.5", "2").
func cores(milli int64) string { return jobspec.FormatCores(milli) }

// itoa is strconv.FormatInt for int64.
func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// machineStatus renders a machine status with the marks README.md shows.
func machineStatus(s string) string {
	switch s {
	case "available":
		return "🟢 available"
	case "busy":
		return "🟡 busy"
	case "offline":
		return "⚫ offline"
	}
	return orDash(s)
}

// quoteArgs renders a command line, quoting words that need it.
func quoteArgs(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`|&;<>()*?[]{}~#") {
			out[i] = strconv.Quote(a)
		} else {
			out[i] = a
		}
	}
	return strings.Join(out, " ")
}
