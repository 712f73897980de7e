package web

import (
	"net/http"
	"strings"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
)

// The Settings page's API access tokens (`cshare node token`): listed,
// created and revoked by the org's admins and owner, as the page is theirs.

func (d *Dashboard) createToken(r *http.Request, _ string) (string, flash) {
	if err := d.tokensAdmin(r); err != nil {
		return "/settings", flash{Error: err.Error()}
	}
	f := r.PostFormValue
	tc, err := d.svc.Tokens.CreateToken(r.Context(), api.TokenCreate{Name: strings.TrimSpace(f("name")), Scope: f("scope"), Expires: strings.TrimSpace(f("expires"))})
	if err != nil {
		return "/settings", flash{Error: err.Error()}
	}
	return "/settings", flash{OK: "Created token " + tc.ID + " (" + tc.Scope + ", expires " + api.FormatTime(tc.Expires) + "). Copy it now: it is not shown again.", Token: tc.Token}
}

func (d *Dashboard) revokeToken(r *http.Request, _ string) (string, flash) {
	if err := d.tokensAdmin(r); err != nil {
		return "/settings", flash{Error: err.Error()}
	}
	t, err := d.svc.Tokens.RevokeToken(r.Context(), r.PathValue("id"))
	return "/settings", outcome(err, "Revoked token "+t.ID+".")
}

// tokensAdmin says why this session may not change the tokens: the node
// serves none, or its person is not an admin or the owner.
func (d *Dashboard) tokensAdmin(r *http.Request) error {
	if d.svc.Tokens == nil {
		return api.Errorf(http.StatusNotFound, "tokens: this node does not serve API access tokens")
	}
	st, err := d.svc.Node.Status(r.Context())
	if err != nil {
		return err
	}
	if ledger.RoleRank(st.Role) < ledger.RoleRank(ledger.RoleAdmin) {
		return api.Errorf(http.StatusForbidden, "tokens: only admins and the owner may change them; your role is %s", orDash(st.Role))
	}
	return nil
}
