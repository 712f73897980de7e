package node

import (
	"html/template"
	"net/http"
	"time"

	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/ledger"
)

// dashboard shows names through esc (text.Escape) as the CLI's tables do:
// html/template escapes HTML, not control or bidi characters.
var dashboard = template.Must(template.New("d").Funcs(template.FuncMap{"esc": text.Escape}).Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>cshare — {{esc .Org}}</title>
<meta http-equiv="refresh" content="5">
<style>body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse}td,th{padding:4px 10px;border-bottom:1px solid #ddd;text-align:left}</style>
</head><body>
<h1>cshare: {{esc .Org}}</h1>
<p>Node {{.ID}}{{if .Person}} · acts for person {{esc .PersonName}} ({{.Person}}){{if .Role}}, {{.Role}}{{end}}{{end}} · {{.Now}}</p>
<h2>Machines</h2>
<table><tr><th>Name</th><th>Owner</th><th>Status</th><th>Last heartbeat</th><th>Running jobs</th><th>Total jobs</th><th>CPUs</th><th>Memory MB</th><th>GPUs</th></tr>
{{range .Machines}}<tr><td>{{esc .Name}}</td><td>{{esc .OwnerName}}</td><td>{{.Status}}</td><td>{{.LastHeartbeat}}</td><td>{{.RunningJobs}}</td><td>{{.TotalJobs}}</td><td>{{.Hardware.CPUs}}</td><td>{{.Hardware.MemoryMB}}</td><td>{{len .Hardware.GPUs}}</td></tr>
{{end}}</table>
<h2>Jobs</h2>
<p>{{if .SeesAll}}All jobs of the org (admins and the owner see every job).{{else}}Your jobs (a member sees only the jobs they submitted).{{end}}</p>
<table><tr><th>ID</th><th>Name</th><th>Submitter</th><th>State</th><th>Priority</th><th>Instances</th><th>Done</th><th>Failed</th><th>Total</th></tr>
{{range .Jobs}}<tr><td>{{.ID}}</td><td>{{esc .Name}}</td><td>{{esc .SubmitterName}}</td><td>{{.State}}</td><td>{{.Priority}}</td><td>{{len .Instances}}</td><td>{{.Items.Done}}</td><td>{{.Items.Failed}}</td><td>{{.Items.Total}}</td></tr>
{{end}}</table>
</body></html>`))

// registerWeb serves a read-only dashboard at / (loopback only, like the
// API). It shows what the API shows this machine's person: every machine,
// and the jobs they may see (a member's own; every job to admins and the
// owner).
func registerWeb(mux *http.ServeMux, n *Node) {
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		ms, _ := n.orgs.Machines(r.Context())
		js, _ := n.jobs.Jobs(r.Context())
		st, _ := n.Status(r.Context())
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = dashboard.Execute(w, map[string]any{"Org": n.rep.Org(), "ID": n.idStr, "Now": n.opts.Now().UTC().Format(time.RFC3339),
			"Person": st.Person, "PersonName": st.PersonName, "Role": st.Role, "SeesAll": ledger.RoleRank(st.Role) >= 2,
			"Machines": ms, "Jobs": js})
	})
}
