package market

import (
	"strings"
	"testing"
)

// TestQueryControlCharacter: a control character in a query is refused as
// such, with its position, not blamed on "brackets and commas" (ESC [
// looks like a list); so is a byte that is not UTF-8. Tabs and newlines
// still separate terms.
func TestQueryControlCharacter(t *testing.T) {
	for _, c := range []struct{ q, want string }{
		{"gpus>=2\x1b[31m", `offer query: "gpus>=2\x1b[31m": control character U+001B not allowed, at character 8`},
		{"gpus>=2 price<\x001", `offer query: "price<\x001": control character U+0000 not allowed, at character 15`},
		{"gpu_name==RTX\u202e", "control character U+202E not allowed, at character 14"},
		{"gpus>=2 cpus>\xff", `offer query: "cpus>\xff": a byte that is not UTF-8 at byte 14`},
	} {
		_, err := ParseQuery(c.q)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "brackets") || strings.ContainsAny(err.Error(), "\x00\x1b\n") {
			t.Errorf("ParseQuery(%q) = %v; want %q", c.q, err, c.want)
		}
	}
	if q, err := ParseQuery("gpus>=2\tprice<1.5\ncpus>=4"); err != nil || len(q.Terms) != 3 {
		t.Errorf("tabs and newlines between terms: %+v %v", q, err)
	}
	_, err := ParseQuery("gpu_name==" + strings.Repeat("x", 4000) + "\x07")
	if err == nil || len(err.Error()) > 200 {
		t.Errorf("a long term is echoed whole: %d bytes", len(err.Error()))
	}
}
