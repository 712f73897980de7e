package web

import (
	"html/template"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/jobspec"
	"github.com/cshare/cshare/node/api"
)

// pageNames are the template sets: layout.html and parts.html with one
// page's file (templates/NAME.html, which defines "content" and its
// fragments, "frag-...").
var pageNames = []string{"overview", "machines", "jobs", "job", "members", "datasets", "dataset", "market", "usage", "settings", "join", "logs"}

// funcs are the templates' helpers. esc shows other people's text as the
// CLI does (html/template escapes HTML, not control or bidi characters).
var funcs = template.FuncMap{
	"esc":         text.Escape,
	"access":      accessText,
	"pathesc":     url.PathEscape,
	"short":       short,
	"ago":         ago,
	"mb":          jobspec.FormatMB,
	"cores":       jobspec.FormatCores,
	"bytes":       func(b int64) string { return jobspec.FormatBytes(float64(b)) },
	"jobBar":      jobBar,
	"grid":        machineGrid,
	"statusClass": statusClass,
	"statusText":  statusText,
	"join":        strings.Join,
	"cpus":        func(s float64) string { return jobspec.FormatCores(int64(s * 1000)) },
	"hours": func(s float64) string {
		return strings.TrimSuffix(time.Duration(s*float64(time.Second)).Round(time.Second).String(), "0s")
	},
	"usd":      func(f float64) string { return "$" + trimFloat(f) },
	"pct":      func(f float64) string { return trimFloat(f) + "%" },
	"shell":    func(cmd []string) string { return text.Escape(strings.Join(cmd, " ")) },
	"roleRank": ledger.RoleRank,
	"when":     api.FormatTime,
}

func parsePages() map[string]*template.Template {
	base := template.Must(template.New("base").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/parts.html"))
	pages := map[string]*template.Template{"signedout": base}
	for _, n := range pageNames {
		pages[n] = template.Must(template.Must(base.Clone()).ParseFS(templateFS, "templates/"+n+".html"))
	}
	return pages
}

// short is an ID's last 12 characters, as the CLI's tables show it.
func short(id string) string {
	if len(id) <= 12 {
		return id
	}
	return id[len(id)-12:]
}

// ago is how long before now an RFC 3339 time was ("never" for none).
func ago(now time.Time, s string) string {
	if s == "" {
		return "never"
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return text.Escape(s)
	}
	d := now.Sub(t)
	switch {
	case d < 0:
		return "just now"
	case d < time.Minute:
		return itoa(int64(d/time.Second)) + "s ago"
	case d < time.Hour:
		return itoa(int64(d/time.Minute)) + "m ago"
	case d < 48*time.Hour:
		return itoa(int64(d/time.Hour)) + "h ago"
	}
	return itoa(int64(d/(24*time.Hour))) + "d ago"
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// trimFloat is f with at most two decimals and no trailing zeros.
func trimFloat(f float64) string {
	s := strconv.FormatFloat(f, 'f', 2, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}
