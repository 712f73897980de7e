package ledger

import (
	"strings"
	"testing"
)

// hostileNames are names a member's terminal must never receive raw: escape
// sequences, line breaks, NUL, DEL, a bidi override, and names that are too
// long or padded. Each is refused by the fold wherever a name enters.
var hostileNames = map[string]string{
	"ESC":      "evil\x1b[2J\x1b[31m",
	"CR":       "ok\rforged",
	"LF":       "two\nlines",
	"NUL":      "nul\x00",
	"DEL":      "del\x7f",
	"C1 CSI":   "csi\u009b31m",
	"bidi":     "txt.\u202egpj",
	"isolate":  "a\u2066b",
	"too long": strings.Repeat("x", 65),
	"padded":   " acme",
	"empty":    "",
}

// TestFoldIgnoresHostileNames: entries signed by real members with a bad
// name have no effect, exactly like other invalid entries.
func TestFoldIgnoresHostileNames(t *testing.T) {
	for what, bad := range hostileNames {
		t.Run(what, func(t *testing.T) {
			w := newWorld(t)
			m := w.member(2, RoleMember)
			w.denied(ErrMalformed, w.owner, KindOrgUpdate, OrgUpdate{Name: &bad})
			if bad == "" {
				return // an empty machine or job name means "none given"
			}
			w.denied(ErrMalformed, m, KindMachineUpdate, MachineUpdate{Name: bad})
			w.denied(ErrMalformed, m, KindJobSubmit, JobSpec{Name: bad, Driver: "exec", Cmd: []string{"true"},
				RangeStart: 1, RangeEnd: 1, Priority: 5, CPUs: 1})
			// A register with a bad name neither admits the machine nor uses
			// up the invite.
			joiner := newActor(t, 3)
			inv := w.invite(w.owner, RoleMember, 1, 0)
			reg := w.register(joiner, inv)
			reg.Name = bad
			w.denied(ErrMalformed, joiner, KindMachineReg, reg)
			reg.Name = "joiner"
			w.ok(joiner, KindMachineReg, reg)
			if got := w.log.State().Machines[joiner.id].Name; got != "joiner" {
				t.Errorf("joiner's machine is named %q, want joiner", got)
			}
		})
	}
}

func TestFoldIgnoresHostileGenesis(t *testing.T) {
	owner := newActor(t, 1)
	for what, bad := range hostileNames {
		for _, g := range []Genesis{
			{Name: bad, OrgKeyID: "k1", Settings: DefaultSettings()},
			{Name: "acme", MachineName: bad, OrgKeyID: "k1", Settings: DefaultSettings()},
		} {
			if g.MachineName == "" && g.Name != "" {
				continue // no machine name: the short ID is used
			}
			l := NewLog()
			e := sign(t, owner, "", KindGenesis, g, 1)
			v, err := l.Add(e)
			if err != nil {
				t.Fatalf("%s: add: %v", what, err)
			}
			if v == nil || l.State().Org != "" {
				t.Errorf("%s: genesis %+v founded an org", what, g)
			}
		}
	}
}

// TestFoldDescriptions: a description is free text stored as given, up to
// 4 KiB; printers escape it.
func TestFoldDescriptions(t *testing.T) {
	w := newWorld(t)
	d := "line one\nline two: \x1b[31mred\x1b[0m \u202e"
	w.ok(w.owner, KindOrgUpdate, OrgUpdate{Description: &d})
	if got := w.log.State().Description; got != d {
		t.Errorf("description %q, want %q stored as given", got, d)
	}
	long := strings.Repeat("x", 4097)
	name := "renamed"
	w.denied(ErrMalformed, w.owner, KindOrgUpdate, OrgUpdate{Name: &name, Description: &long})
	if st := w.log.State(); st.Name != "acme" || st.Description != d {
		t.Errorf("a refused update changed the org: name %q, description %q", st.Name, st.Description)
	}
	ok := strings.Repeat("é", 64)
	w.ok(w.owner, KindOrgUpdate, OrgUpdate{Name: &ok})
}
