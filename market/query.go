package market

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/cshare/cshare/internal/text"
)

// The query language is Vast's search grammar (docs/design.md §14, issue 18):
//
//	query      = comparison { comparison }
//	comparison = field op value
//	op         = "<" | "<=" | "==" | "=" | "!=" | ">=" | ">" | "in" | "notin"
//	value      = number | "true" | "false" | string | "any" | "[" value { "," value } "]"
//
// with or without spaces around the operator. A string writes spaces as
// "_" (gpu_name==RTX_4090). "any" matches every offer (the comparison is
// dropped). Lists go with in and notin only. Units: sizes (gpu_ram,
// memory, disk) are GB unless suffixed MB, GB or TB; duration is days
// unless suffixed h or d; price is dollars per hour; reliability is 0..1.

// ErrQuery is the class of a query or sort order that does not parse.
var ErrQuery = errors.New("market: bad query")

// QueryError is a query term that does not parse: the term as written and
// what is wrong with it. Its message is one line.
type QueryError struct {
	Term string
	Msg  string
}

// Error is one line: the message echoes parts of the query, escaped and
// the term cut to 64 characters.
func (e *QueryError) Error() string {
	return fmt.Sprintf("offer query: %s: %s", text.Echo(e.Term), text.Escape(e.Msg))
}

// Is makes errors.Is(err, ErrQuery) hold.
func (e *QueryError) Is(target error) bool { return target == ErrQuery }

type fieldKind uint8

const (
	kindCount fieldKind = iota // a plain number
	kindSize                   // GB, or MB/GB/TB suffixed
	kindDays                   // days, or h/d suffixed
	kindString
)

type fieldDef struct {
	name string
	kind fieldKind
	// num is the field's value for a listing at now (numeric kinds).
	num func(l Listing, now int64) float64
	// strs are the field's values (string kind): a comparison holds when
	// one of them equals the value.
	strs func(l Listing) []string
}

const mbPerGB = 1024

var fieldDefs = []fieldDef{
	{name: "gpus", kind: kindCount, num: func(l Listing, _ int64) float64 { return float64(len(l.Offer.GPUs)) }},
	{name: "gpu_name", kind: kindString, strs: func(l Listing) []string { return []string{l.Offer.GPUName()} }},
	{name: "gpu_ram", kind: kindSize, num: func(l Listing, _ int64) float64 { return float64(l.Offer.GPUMemoryMB()) / mbPerGB }},
	{name: "cpus", kind: kindCount, num: func(l Listing, _ int64) float64 { return float64(l.Offer.CPUs) }},
	{name: "memory", kind: kindSize, num: func(l Listing, _ int64) float64 { return float64(l.Offer.MemoryMB) / mbPerGB }},
	{name: "disk", kind: kindSize, num: func(l Listing, _ int64) float64 { return float64(l.Offer.DiskMB) / mbPerGB }},
	{name: "price", kind: kindCount, num: func(l Listing, _ int64) float64 { return float64(l.Offer.Price) / microPerDollar }},
	{name: "duration", kind: kindDays, num: func(l Listing, now int64) float64 { return float64(max(0, l.Offer.Until-now)) / float64(Day) }},
	{name: "reliability", kind: kindCount, num: func(l Listing, _ int64) float64 { return l.reliability() }},
	{name: "machine", kind: kindString, strs: func(l Listing) []string { return []string{l.Offer.Machine, l.MachineName} }},
}

// FieldNames lists the fields a query and a sort order may name, in the
// issue's order.
func FieldNames() []string {
	out := make([]string, len(fieldDefs))
	for i, f := range fieldDefs {
		out[i] = f.name
	}
	return out
}

func lookupField(name string) (fieldDef, bool) {
	for _, f := range fieldDefs {
		if f.name == name {
			return f, true
		}
	}
	return fieldDef{}, false
}

// Listing is an offer as a search sees it: the signed offer, the host
// machine's name, and its reliability (the share of the last day's
// heartbeats the machine sent, 0..1), which the node measures.
type Listing struct {
	Offer       Offer   `json:"offer"`
	MachineName string  `json:"machine_name,omitempty"`
	Reliability float64 `json:"reliability"`
}

func (l Listing) reliability() float64 {
	if math.IsNaN(l.Reliability) || l.Reliability < 0 {
		return 0
	}
	return min(l.Reliability, 1)
}

// Operators, canonical spelling ("=" parses as OpEq).
const (
	OpLt    = "<"
	OpLe    = "<="
	OpEq    = "=="
	OpNe    = "!="
	OpGe    = ">="
	OpGt    = ">"
	OpIn    = "in"
	OpNotIn = "notin"
)

const opsAllowed = "< <= == != >= > in notin (= means ==)"

// Value is a comparison's right-hand side.
type Value struct {
	Any  bool    // "any": no constraint
	Num  float64 // a number, in the field's unit (GB, days, dollars)
	Str  string  // a string, "_" read as a space
	List []Value // in, notin
	Raw  string  // as written
}

// Term is one comparison.
type Term struct {
	Field string
	Op    string
	Value Value
}

func (t Term) def() fieldDef {
	for i := range fieldDefs {
		if fieldDefs[i].name == t.Field {
			return fieldDefs[i]
		}
	}
	return fieldDef{}
}

// Query is a parsed query: every term must hold (an empty query matches
// every offer).
type Query struct {
	Terms []Term
}

// Limits on a query's size: it comes from users and from API bodies.
const (
	MaxQueryLen  = 4096
	maxTerms     = 64
	maxListItems = 64
)

// ParseQuery parses a query. An error is a *QueryError naming the term and
// what is allowed there.
func ParseQuery(s string) (Query, error) {
	if len(s) > MaxQueryLen {
		return Query{}, &QueryError{Term: s[:32] + "...", Msg: fmt.Sprintf("query of %d bytes; at most %d", len(s), MaxQueryLen)}
	}
	if err := checkQueryText(s); err != nil {
		return Query{}, err
	}
	var q Query
	i := 0
	for {
		i = skipSpace(s, i)
		if i >= len(s) {
			return q, nil
		}
		if len(q.Terms) == maxTerms {
			return Query{}, &QueryError{Term: rest(s, i), Msg: fmt.Sprintf("at most %d comparisons", maxTerms)}
		}
		t, next, err := parseTerm(s, i)
		if err != nil {
			return Query{}, err
		}
		q.Terms = append(q.Terms, t)
		i = next
	}
}

// checkQueryText refuses a query that holds a byte that is not UTF-8 or a
// control character other than the spaces between terms (tab, newline):
// said as such, with its position, before the grammar would blame it on
// something else ("\x1b[31m" looks like a list).
func checkQueryText(s string) error {
	if i := text.InvalidAt(s); i >= 0 {
		return &QueryError{Term: termAround(s, i), Msg: fmt.Sprintf("a byte that is not UTF-8 at byte %d; a query is text", i+1)}
	}
	pos := 0
	for i, r := range s {
		pos++
		if text.Unsafe(r) && !(r < 0x80 && isSpace(byte(r))) {
			return &QueryError{Term: termAround(s, i), Msg: fmt.Sprintf("control character %U not allowed, at character %d", r, pos)}
		}
	}
	return nil
}

// termAround is the word of s (between spaces) that holds byte i.
func termAround(s string, i int) string {
	j := i
	for j > 0 && !isSpace(s[j-1]) {
		j--
	}
	return rest(s, j)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(s string, i int) int {
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return i
}

func isIdent(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// rest is the word at i: up to the next space.
func rest(s string, i int) string {
	j := i
	for j < len(s) && !isSpace(s[j]) {
		j++
	}
	return s[i:j]
}

// termAt is the text of a malformed term starting at start, for the
// error: the field, the operator and the value's first word.
func termAt(s string, start int) string {
	j := start
	for j < len(s) && isIdent(s[j]) {
		j++
	}
	j = skipSpace(s, j)
	for j < len(s) && !isSpace(s[j]) {
		j++
	}
	return strings.TrimSpace(s[start:j])
}

func parseTerm(s string, start int) (Term, int, error) {
	i := start
	for i < len(s) && isIdent(s[i]) {
		i++
	}
	name := s[start:i]
	bad := func(end int, format string, a ...any) (Term, int, error) {
		text := termAt(s, start)
		if end > start {
			text = strings.TrimSpace(s[start:end])
		}
		return Term{}, 0, &QueryError{Term: text, Msg: fmt.Sprintf(format, a...)}
	}
	if name == "" {
		return bad(0, "expected a field name; fields: %s", strings.Join(FieldNames(), " "))
	}
	f, ok := lookupField(name)
	if !ok {
		return bad(0, "unknown field %s; fields: %s", name, strings.Join(FieldNames(), " "))
	}
	i = skipSpace(s, i)
	op := ""
	switch {
	case strings.HasPrefix(s[i:], "<="), strings.HasPrefix(s[i:], ">="), strings.HasPrefix(s[i:], "=="), strings.HasPrefix(s[i:], "!="):
		op, i = s[i:i+2], i+2
	case strings.HasPrefix(s[i:], "<"), strings.HasPrefix(s[i:], ">"):
		op, i = s[i:i+1], i+1
	case strings.HasPrefix(s[i:], "="):
		op, i = OpEq, i+1
	case wordAt(s, i, OpNotIn):
		op, i = OpNotIn, i+len(OpNotIn)
	case wordAt(s, i, OpIn):
		op, i = OpIn, i+len(OpIn)
	default:
		return bad(0, "expected an operator after %s; operators: %s", name, opsAllowed)
	}
	i = skipSpace(s, i)
	var raw string
	if i < len(s) && s[i] == '[' {
		j := strings.IndexByte(s[i:], ']')
		if j < 0 {
			return bad(len(s), "unclosed list: a list is [a,b,...]")
		}
		raw, i = s[i:i+j+1], i+j+1
	} else {
		j := i
		for j < len(s) && !isSpace(s[j]) {
			j++
		}
		raw, i = s[i:j], j
	}
	if i < len(s) && !isSpace(s[i]) {
		return bad(len(s), "expected a space after the value %s", raw)
	}
	if raw == "" {
		return bad(i, "expected a value after %s %s", name, op)
	}
	v, err := parseValue(f, op, raw)
	if err != nil {
		return bad(i, "%s", err.Error())
	}
	return Term{Field: name, Op: op, Value: v}, i, nil
}

// wordAt: s[i:] starts with word, followed by a space, "[" or the end.
func wordAt(s string, i int, word string) bool {
	if !strings.HasPrefix(s[i:], word) {
		return false
	}
	j := i + len(word)
	return j == len(s) || isSpace(s[j]) || s[j] == '['
}

func parseValue(f fieldDef, op, raw string) (Value, error) {
	list := strings.HasPrefix(raw, "[")
	if op == OpIn || op == OpNotIn {
		if !list {
			return Value{}, fmt.Errorf("%s takes a bracketed list, like %s %s [a,b]", op, f.name, op)
		}
		inner := strings.TrimSpace(raw[1 : len(raw)-1])
		if inner == "" {
			return Value{}, fmt.Errorf("empty list; a list is [a,b,...]")
		}
		parts := strings.Split(inner, ",")
		if len(parts) > maxListItems {
			return Value{}, fmt.Errorf("list of %d items; at most %d", len(parts), maxListItems)
		}
		v := Value{Raw: raw}
		for _, p := range parts {
			p = strings.TrimSpace(p)
			if p == "" || strings.ContainsAny(p, "[] \t\r\n") {
				return Value{}, fmt.Errorf("list item %q; a list is [a,b,...] of single values", p)
			}
			if p == "any" {
				return Value{}, fmt.Errorf("any cannot be a list item; write %s == any", f.name)
			}
			item, err := parseScalar(f, p)
			if err != nil {
				return Value{}, err
			}
			v.List = append(v.List, item)
		}
		return v, nil
	}
	if list {
		return Value{}, fmt.Errorf("a list goes with in and notin, not %s", op)
	}
	if strings.ContainsAny(raw, "[],") {
		return Value{}, fmt.Errorf("value %s; brackets and commas belong to lists", raw)
	}
	if raw == "any" {
		return Value{Any: true, Raw: raw}, nil
	}
	if f.kind == kindString && op != OpEq && op != OpNe {
		return Value{}, fmt.Errorf("%s is a string and takes == != in notin, not %s", f.name, op)
	}
	return parseScalar(f, raw)
}

func parseScalar(f fieldDef, raw string) (Value, error) {
	if raw == "true" || raw == "false" {
		return Value{}, fmt.Errorf("%s is not true/false: it takes %s", f.name, kindHelp(f))
	}
	if f.kind == kindString {
		if !printable(raw) {
			return Value{}, fmt.Errorf("value %q; printable characters, _ for a space", raw)
		}
		return Value{Str: strings.ReplaceAll(raw, "_", " "), Raw: raw}, nil
	}
	num, unit := splitNumber(raw)
	x, err := strconv.ParseFloat(num, 64)
	if num == "" || err != nil || math.IsInf(x, 0) || math.IsNaN(x) {
		return Value{}, fmt.Errorf("%s takes %s, not %s", f.name, kindHelp(f), raw)
	}
	scale, ok := unitScale(f.kind, strings.ToLower(unit))
	if !ok {
		return Value{}, fmt.Errorf("%s takes %s, not %s", f.name, kindHelp(f), raw)
	}
	return Value{Num: x * scale, Raw: raw}, nil
}

// splitNumber splits "24GB" into "24" and "GB": a decimal number, optionally
// signed, with an optional fraction; no exponent, hex or inf.
func splitNumber(raw string) (num, unit string) {
	i := 0
	if i < len(raw) && raw[i] == '-' {
		i++
	}
	d := i
	for i < len(raw) && raw[i] >= '0' && raw[i] <= '9' {
		i++
	}
	if i == d {
		return "", raw
	}
	if i < len(raw) && raw[i] == '.' {
		i++
		f := i
		for i < len(raw) && raw[i] >= '0' && raw[i] <= '9' {
			i++
		}
		if i == f {
			return "", raw
		}
	}
	return raw[:i], raw[i:]
}

func unitScale(k fieldKind, unit string) (float64, bool) {
	switch k {
	case kindSize:
		switch unit {
		case "", "gb", "g", "gib":
			return 1, true
		case "mb", "m", "mib":
			return 1.0 / mbPerGB, true
		case "tb", "t", "tib":
			return mbPerGB, true
		}
	case kindDays:
		switch unit {
		case "", "d":
			return 1, true
		case "h":
			return 1.0 / 24, true
		}
	case kindCount:
		return 1, unit == ""
	}
	return 0, false
}

func kindHelp(f fieldDef) string {
	switch f.kind {
	case kindSize:
		return "a size in GB (or with MB, GB, TB), like 24 or 512MB"
	case kindDays:
		return "days (or with h or d), like 7 or 36h"
	case kindString:
		return "a string with _ for spaces, like RTX_4090"
	}
	switch f.name {
	case "price":
		return "dollars per hour, like 1.5"
	case "reliability":
		return "a share from 0 to 1, like 0.95"
	}
	return "a number, like 2"
}

// String is the query in canonical form: "field op value" terms, one space
// apart; parsing it gives the same query.
func (q Query) String() string {
	parts := make([]string, len(q.Terms))
	for i, t := range q.Terms {
		parts[i] = t.Field + " " + t.Op + " " + t.Value.Raw
	}
	return strings.Join(parts, " ")
}

// Match reports whether the listing satisfies every term at now.
func (q Query) Match(l Listing, now int64) bool {
	for _, t := range q.Terms {
		if !t.match(l, now) {
			return false
		}
	}
	return true
}

func (t Term) match(l Listing, now int64) bool {
	if t.Value.Any {
		return true
	}
	f := t.def()
	if f.name == "" {
		return false // a Term built by hand with an unknown field
	}
	eq := func(v Value) bool {
		if f.kind == kindString {
			for _, s := range f.strs(l) {
				if s != "" && strings.EqualFold(s, v.Str) {
					return true
				}
			}
			return false
		}
		return f.num(l, now) == v.Num
	}
	switch t.Op {
	case OpEq:
		return eq(t.Value)
	case OpNe:
		return !eq(t.Value)
	case OpIn, OpNotIn:
		in := slices.ContainsFunc(t.Value.List, eq)
		return in == (t.Op == OpIn)
	}
	x := f.num(l, now)
	switch t.Op {
	case OpLt:
		return x < t.Value.Num
	case OpLe:
		return x <= t.Value.Num
	case OpGe:
		return x >= t.Value.Num
	case OpGt:
		return x > t.Value.Num
	}
	return false
}

// Order is one key of a sort order.
type Order struct {
	Field string
	Desc  bool
}

// ParseOrder parses a sort order, "price,gpus-": fields separated by
// commas, each ascending or, with a trailing "-", descending. The empty
// order sorts by price.
func ParseOrder(s string) ([]Order, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	if len(s) > 256 {
		return nil, &QueryError{Term: s[:32] + "...", Msg: "sort order of more than 256 bytes"}
	}
	var out []Order
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		o := Order{Field: strings.TrimSuffix(p, "-")}
		o.Desc = o.Field != p
		if _, ok := lookupField(o.Field); !ok {
			return nil, &QueryError{Term: p, Msg: "unknown sort field; fields: " + strings.Join(FieldNames(), " ") + " (a trailing - sorts descending)"}
		}
		out = append(out, o)
	}
	return out, nil
}

// FormatOrder is the order as ParseOrder reads it.
func FormatOrder(os []Order) string {
	parts := make([]string, len(os))
	for i, o := range os {
		parts[i] = o.Field
		if o.Desc {
			parts[i] += "-"
		}
	}
	return strings.Join(parts, ",")
}

// Search returns the listings that match q at now, sorted by orders (by
// price when none), then by offer ID and machine: a total order, so the
// result does not depend on the order of ls. ls is not modified.
func Search(ls []Listing, q Query, orders []Order, now int64) []Listing {
	if len(orders) == 0 {
		orders = []Order{{Field: "price"}}
	}
	// Each listing's sort keys are computed once, not per comparison.
	type keyed struct {
		l    Listing
		nums []float64
		strs []string
	}
	defs := make([]fieldDef, len(orders))
	for i, o := range orders {
		defs[i], _ = lookupField(o.Field)
	}
	var rows []keyed
	for _, l := range ls {
		if !q.Match(l, now) {
			continue
		}
		k := keyed{l: l, nums: make([]float64, len(defs)), strs: make([]string, len(defs))}
		for i, f := range defs {
			if f.kind == kindString {
				k.strs[i] = f.strs(l)[0]
			} else {
				k.nums[i] = f.num(l, now)
			}
		}
		rows = append(rows, k)
	}
	slices.SortFunc(rows, func(a, b keyed) int {
		for i, o := range orders {
			c := cmp.Compare(a.nums[i], b.nums[i])
			if defs[i].kind == kindString {
				c = cmp.Or(strings.Compare(strings.ToLower(a.strs[i]), strings.ToLower(b.strs[i])), strings.Compare(a.strs[i], b.strs[i]))
			}
			if o.Desc {
				c = -c
			}
			if c != 0 {
				return c
			}
		}
		return cmp.Or(strings.Compare(a.l.Offer.ID, b.l.Offer.ID), strings.Compare(a.l.Offer.Machine, b.l.Offer.Machine),
			cmp.Compare(a.l.Offer.Created, b.l.Offer.Created))
	})
	out := make([]Listing, len(rows))
	for i, r := range rows {
		out[i] = r.l
	}
	return out
}
