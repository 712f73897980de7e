package web

import (
	"errors"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
)

// view is what every page's template gets: who is looking, the outcome of
// their last action, and the page's own data.
type view struct {
	Page   string // the page's name: its template set and its nav entry
	Title  string
	Topics string // the event topics that refresh its fragments
	Status api.NodeStatus
	InOrg  bool
	Admin  bool // admin or owner
	Owner  bool
	CSRF   string
	Flash  *flash
	Err    string // what reading the page's data said
	Now    time.Time
	Data   any
}

// pageSpec is one page: its template set, title, the topics that refresh
// it, whether only admins see it, and what reads its data.
type pageSpec struct {
	name, title, topics string
	admin               bool
	read                func(r *http.Request, v *view) error
}

// actionFunc performs a form's action for session id and says which page
// to go on to and what to tell there.
type actionFunc func(r *http.Request, id string) (string, flash)

// errNotSignedIn is the answer to a request without a live session.
const errNotSignedIn = "Not signed in, or the session expired: run cshare node dashboard and open the URL it prints."

// page serves a page, or one of its fragments with ?frag=NAME.
func (d *Dashboard) page(p pageSpec) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, se := d.sess.get(r)
		if se == nil {
			d.signedOut(w, http.StatusUnauthorized, errNotSignedIn)
			return
		}
		v := &view{Page: p.name, Title: p.title, Topics: p.topics, CSRF: se.csrf, Now: d.now()}
		code := http.StatusOK
		st, err := d.svc.Node.Status(r.Context())
		v.Status, v.InOrg = st, st.Org != ""
		v.Admin, v.Owner = ledger.RoleRank(st.Role) >= ledger.RoleRank(ledger.RoleAdmin), st.Role == ledger.RoleOwner
		switch {
		case err != nil:
			v.Err = err.Error()
		case !v.InOrg && p.name != "overview" && p.name != "join":
			v.Err = "This node is in no org: create one, or join one, on the Overview."
		case p.admin && !v.Admin:
			code, v.Err = http.StatusForbidden, p.title+": only admins and the owner may see and change this; your role is "+orDash(st.Role)+"."
		default:
			if err := p.read(r, v); err != nil {
				code, v.Err = errCode(err), err.Error()
			}
		}
		header(w)
		t := d.pages[p.name]
		if frag := r.URL.Query().Get("frag"); frag != "" {
			if !strings.HasPrefix(frag, "frag-") || t.Lookup(frag) == nil {
				http.Error(w, "frag: no such fragment of this page", http.StatusNotFound)
				return
			}
			w.WriteHeader(code)
			d.exec(w, t, frag, v)
			return
		}
		v.Flash = d.sess.takeFlash(id)
		w.WriteHeader(code)
		d.exec(w, t, "layout", v)
	}
}

// exec renders template name of t; an error half way is logged (the
// status is written by then).
func (d *Dashboard) exec(w http.ResponseWriter, t *template.Template, name string, v *view) {
	if err := t.ExecuteTemplate(w, name, v); err != nil {
		d.log.Warn("dashboard: rendering a page", "page", v.Page, "template", name, "err", err)
	}
}

// action serves a form's POST: a live session, from this site, with the
// session's CSRF token; then 303 to the page the action names.
func (d *Dashboard) action(a actionFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, _, ok := d.checkPost(w, r)
		if !ok {
			return
		}
		to, f := a(r, id)
		if f != (flash{}) {
			d.sess.setFlash(id, f)
		}
		http.Redirect(w, r, to, http.StatusSeeOther)
	}
}

// checkPost refuses a POST without a session (401), from another site or
// without the session's CSRF token (403).
func (d *Dashboard) checkPost(w http.ResponseWriter, r *http.Request) (string, *session, bool) {
	id, se := d.sess.get(r)
	switch {
	case !sameOrigin(r):
		d.signedOut(w, http.StatusForbidden, "Refused: this form was sent from another site.")
	case se == nil:
		d.signedOut(w, http.StatusUnauthorized, errNotSignedIn)
	case !csrfOK(r, se):
		d.signedOut(w, http.StatusForbidden, "Refused: the form's CSRF token is missing or wrong; reload the page and try again.")
	default:
		return id, se, true
	}
	return "", nil, false
}

// errCode is err's HTTP status: a service's *StatusError, else 500.
func errCode(err error) int {
	var se *api.StatusError
	if errors.As(err, &se) && se.Code != 0 {
		return se.Code
	}
	return http.StatusInternalServerError
}

// outcome is the flash for an action's result: ok, or err's message.
func outcome(err error, ok string) flash {
	if err != nil {
		return flash{Error: err.Error()}
	}
	return flash{OK: ok}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
