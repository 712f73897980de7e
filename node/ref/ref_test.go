package ref

import (
	"net/http"
	"strings"
	"testing"

	"github.com/cshare/cshare/node/api"
)

func TestResolve(t *testing.T) {
	cands := []Candidate{
		{ID: "12D3KooWMachineOne111aaaa", Name: "office-gpu-1"},
		{ID: "12D3KooWMachineTwo222bbbb", Name: "render-2"},
		{ID: "12D3KooWMachineThr333cccc", Name: "laptop"},
		{ID: "12D3KooWOld", Name: "render-2x"},
		{ID: "ab12", Name: "12D3KooWOld"}, // a name that is another's ID
	}
	for _, c := range []struct {
		ref, want string
		code      int
		msg       []string
	}{
		{"12D3KooWMachineTwo222bbbb", "12D3KooWMachineTwo222bbbb", 0, nil},
		{" laptop ", "12D3KooWMachineThr333cccc", 0, nil},
		{"render-2", "12D3KooWMachineTwo222bbbb", 0, nil}, // a name beats prefixes
		{"bbbb", "12D3KooWMachineTwo222bbbb", 0, nil},     // suffix
		{"12D3KooWMachineO", "12D3KooWMachineOne111aaaa", 0, nil},
		{"12D3KooWOld", "12D3KooWOld", 0, nil}, // an ID beats a name
		{"ab12", "ab12", 0, nil},
		{"aaa", "", http.StatusNotFound, []string{`machine "aaa": no such machine (see cshare machine ls)`}}, // too short
		{"nope", "", http.StatusNotFound, []string{"no such machine"}},
		// A 100 KB reference is not echoed back whole.
		{strings.Repeat("q", 100<<10), "", http.StatusNotFound, []string{`machine "` + strings.Repeat("q", api.MaxEcho) + `…": no such machine`}},
		{"", "", http.StatusBadRequest, []string{"give a machine ID or name"}},
		{"12D3KooWMachine", "", http.StatusConflict, []string{`machine "12D3KooWMachine" is ambiguous: it matches 3 machines: 12D3KooWMachineOne111aaaa (office-gpu-1), 12D3KooWMachineTwo222bbbb (render-2), 12D3KooWMachineThr333cccc (laptop); give more of the ID`}},
	} {
		got, err := Resolve("machine", "cshare machine ls", c.ref, cands)
		if c.code == 0 {
			if err != nil || got != c.want {
				t.Errorf("%q: %q, %v; want %q", c.ref, got, err, c.want)
			}
			continue
		}
		se, ok := err.(*api.StatusError)
		if !ok || se.Code != c.code || strings.Contains(se.Msg, "\n") {
			t.Errorf("%q: %v; want a one-line %d", c.ref, err, c.code)
			continue
		}
		for _, m := range c.msg {
			if !strings.Contains(se.Msg, m) {
				t.Errorf("%q: %q lacks %q", c.ref, se.Msg, m)
			}
		}
	}
	// The list of an ambiguous reference is bounded.
	var many []Candidate
	for i := range 20 {
		many = append(many, Candidate{ID: "job" + strings.Repeat("x", i) + "z"})
	}
	_, err := Resolve("job", "cshare job ls", "jobx", many)
	if se, ok := err.(*api.StatusError); !ok || se.Code != http.StatusConflict || !strings.Contains(se.Msg, "matches 19 jobs") || !strings.Contains(se.Msg, "and 14 more") {
		t.Errorf("many: %v", err)
	}
}
