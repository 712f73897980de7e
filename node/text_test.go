package node

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
)

// hostile holds ESC, CR, LF, NUL, DEL and a bidi override.
const hostile = "evil\x1b[2J\x1b[31m\rCR\nLF\x00NUL\x7fDEL\u202eRLO"

// TestHostileTextRefusedAtTheAPI: a name with control characters, or too
// long, is refused by the API with one line naming the field and the limit;
// a description takes them, stored as given.
func TestHostileTextRefusedAtTheAPI(t *testing.T) {
	m := newMesh(t, meshConfig{n: 2, interval: 200 * time.Millisecond, slots: 1})
	key := m.formOrg()
	n0, n1 := m.nodes[0].Node, m.nodes[1].Node
	ctx := ctxT(t)

	refused := func(what string, err error, want string) {
		t.Helper()
		if statusCode(err) != http.StatusBadRequest || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want 400 with %q", what, err, want)
		}
		if err != nil && text.Escape(err.Error()) != err.Error() {
			t.Errorf("%s: error %q is not one safe line", what, err)
		}
	}
	_, err := n0.jobs.SubmitJob(ctx, api.JobSubmit{Name: hostile, Driver: "exec", Cmd: []string{"true"}})
	refused("job name", err, "name: ")
	_, err = n0.orgs.SetSettings(ctx, api.SettingsRequest{Set: map[string]string{"name": hostile}})
	refused("org name", err, "name: ")
	_, err = n0.orgs.SetSettings(ctx, api.SettingsRequest{Set: map[string]string{"name": strings.Repeat("x", 100241)}})
	refused("100 KB org name", err, "name: 100241 characters; allowed: at most 64")
	_, err = n0.orgs.SetSettings(ctx, api.SettingsRequest{Set: map[string]string{"description": strings.Repeat("x", 60000)}})
	refused("60 KB description", err, "description: 60000 bytes; allowed: at most 4096 bytes")
	_, err = n1.orgs.Join(ctx, api.JoinRequest{OrgKey: key, Name: hostile})
	refused("machine name", err, "name: ")

	// Names are trimmed at the input edge.
	j, err := n0.jobs.SubmitJob(ctx, api.JobSubmit{Name: "  render  ", Driver: "exec", Cmd: []string{"true"}})
	if err != nil || j.Name != "render" {
		t.Errorf("submit with a padded name: %+v, %v", j, err)
	}
	o, err := n0.orgs.SetSettings(ctx, api.SettingsRequest{Set: map[string]string{"description": hostile}})
	if err != nil || o.Description != hostile {
		t.Errorf("description: %q, %v; want it stored as given", o.Description, err)
	}
}

// TestHostileTextForgedEntries: entries signed by real members but holding
// a bad name, imported as if from a peer, have no effect; the dashboard
// shows no control character.
func TestHostileTextForgedEntries(t *testing.T) {
	m := newMesh(t, meshConfig{n: 2, interval: 200 * time.Millisecond})
	m.formOrg()
	n0, n1 := m.nodes[0].Node, m.nodes[1].Node
	var org string
	var before int64
	n0.rep.View(func(st *ledger.State) { org, before = st.Org, st.Ineffective })
	hs, clock := heads(n0)
	forge := func(n *Node, kind string, p any) *ledger.Entry {
		e, err := n.signer.Sign(org, kind, p, hs, clock, time.Now().UnixMilli())
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	es := []*ledger.Entry{
		forge(n1, ledger.KindMachineUpdate, ledger.MachineUpdate{Name: hostile}),
		forge(n1, ledger.KindJobSubmit, ledger.JobSpec{Name: hostile, Driver: "exec", Cmd: []string{"true"}, RangeStart: 1, RangeEnd: 1, Priority: 5, CPUs: 1}),
		forge(n0, ledger.KindOrgUpdate, ledger.OrgUpdate{Name: ptr(hostile)}),
		forge(n0, ledger.KindOrgUpdate, ledger.OrgUpdate{Name: ptr(strings.Repeat("x", 65))}),
	}
	if err := n0.importEntries(es); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the forged entries folded", func() string {
		var got int64
		n0.rep.View(func(st *ledger.State) { got = st.Ineffective })
		if got < before+int64(len(es)) {
			return "not all ineffective yet"
		}
		return ""
	})
	n0.rep.View(func(st *ledger.State) {
		if st.Name != "acme" || len(st.Jobs) != 0 || st.Machines[n1.ID().String()].Name != "n1" {
			t.Errorf("a forged entry took effect: org %q, %d jobs, n1 named %q", st.Name, len(st.Jobs), st.Machines[n1.ID().String()].Name)
		}
	})

	// The dashboard's pages (node/web escapes names with hostile ones in
	// its own tests, TestPagesEscapeHostileText).
	c := dashboardSession(t, n0)
	for _, path := range []string{"/", "/machines", "/jobs", "/members"} {
		_, page := c.get(t, path)
		for _, line := range strings.Split(page, "\n") {
			if text.Escape(line) != line {
				t.Errorf("dashboard %s: a line holds a control character: %q", path, line)
			}
		}
	}
}
