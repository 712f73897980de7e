package web

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cshare/cshare/node/api"
)

// maxListed caps the rows a page lists (the CLI pages further).
const maxListed = 1000

// pageRoutes are the pages, by path.
func (d *Dashboard) pageRoutes() map[string]pageSpec {
	return map[string]pageSpec{
		"/{$}":            {"overview", "Overview", "machines,jobs,ledger", false, d.readOverview},
		"/machines":       {"machines", "Machines", "machines", false, d.readMachines},
		"/jobs":           {"jobs", "Jobs", "jobs", false, d.readJobs},
		"/jobs/{id}":      {"job", "Job", "jobs", false, d.readJob},
		"/members":        {"members", "Members", "ledger", false, d.readMembers},
		"/datasets":       {"datasets", "Datasets", "ledger", false, d.readDatasets},
		"/datasets/{ref}": {"dataset", "Dataset", "ledger", false, d.readDataset},
		"/market":         {"market", "Market", "contracts", false, d.readMarket},
		"/usage":          {"usage", "Usage", "ledger", false, d.readUsage},
		"/settings":       {"settings", "Settings", "ledger", true, d.readSettings},
		"/jobs/{id}/logs": {"logs", "Logs", "", false, d.readLogs},
		"/join":           {"join", "Join an org", "", false, func(r *http.Request, v *view) error { v.Data = r.URL.Query().Get("code"); return nil }},
	}
}

// event is one line of the overview's recent events.
type event struct {
	At   string
	What string
}

type overview struct {
	Org      api.OrgInfo
	Machines []api.MachineInfo
	Jobs     []api.JobInfo // active ones
	Events   []event
	Busy     any
}

func (d *Dashboard) readOverview(r *http.Request, v *view) error {
	if !v.InOrg {
		return nil
	}
	o := overview{}
	var err error
	if o.Org, err = d.svc.Org.Org(r.Context()); err != nil {
		return err
	}
	if o.Machines, err = d.svc.Org.Machines(r.Context()); err != nil {
		return err
	}
	jobs, err := d.jobs(r, "", "")
	if err != nil {
		return err
	}
	for _, j := range jobs {
		if j.Ended == "" {
			o.Jobs = append(o.Jobs, j)
		}
		o.Events = append(o.Events, event{j.Submitted, "job " + j.Name + " (" + short(j.ID) + ") submitted by " + j.SubmitterName})
		if j.Ended != "" {
			o.Events = append(o.Events, event{j.Ended, "job " + j.Name + " (" + short(j.ID) + ") " + j.State})
		}
	}
	for _, m := range o.Machines {
		if m.Registered != "" {
			o.Events = append(o.Events, event{m.Registered, "machine " + m.Name + " registered by " + m.OwnerName})
		}
	}
	slices.SortFunc(o.Events, func(a, b event) int { return strings.Compare(b.At, a.At) })
	o.Events = o.Events[:min(len(o.Events), 12)]
	d.sampleIfStale(r.Context())
	o.Busy = busyChart(d.busy.get(), v.Now)
	v.Data = o
	return nil
}

func (d *Dashboard) readMachines(r *http.Request, v *view) error {
	ms, err := d.svc.Org.Machines(r.Context())
	v.Data = ms
	return err
}

type jobsData struct {
	Jobs          []api.JobInfo
	State, Search string
	States        []string
}

// jobs are the jobs this person may see, filtered by state and by a search
// of their ID, name, submitter and command.
func (d *Dashboard) jobs(r *http.Request, state, search string) ([]api.JobInfo, error) {
	var js []api.JobInfo
	search = strings.ToLower(search)
	err := d.svc.Jobs.ListJobs(r.Context(), api.Page{}, func(j api.JobInfo) error {
		if state != "" && j.State != state {
			return nil
		}
		if search != "" && !strings.Contains(strings.ToLower(j.ID+" "+j.Name+" "+j.SubmitterName+" "+strings.Join(j.Cmd, " ")), search) {
			return nil
		}
		js = append(js, j)
		return nil
	})
	slices.Reverse(js) // newest first
	return js[:min(len(js), maxListed)], err
}

func (d *Dashboard) readJobs(r *http.Request, v *view) error {
	q := r.URL.Query()
	jd := jobsData{State: q.Get("state"), Search: q.Get("q"), States: []string{"queued", "running", "done", "failed", "cancelled"}}
	var err error
	jd.Jobs, err = d.jobs(r, jd.State, jd.Search)
	v.Data = jd
	return err
}

type jobData struct {
	Job   api.JobInfo
	Items []api.ItemInfo
	More  bool
	// Explain is why it waits, machine by machine, while it is active
	// (ExplainErr: what asking said).
	Explain    *api.JobExplain
	ExplainErr string
}

func (d *Dashboard) readJob(r *http.Request, v *view) error {
	j, err := d.svc.Jobs.Job(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	jd := jobData{Job: j}
	v.Title = "Job " + j.Name
	if j.Ended == "" {
		if x, err := d.svc.Jobs.ExplainJob(r.Context(), j.ID); err != nil {
			jd.ExplainErr = err.Error()
		} else {
			jd.Explain = &x
		}
	}
	err = d.svc.Jobs.ListJobItems(r.Context(), j.ID, api.Page{Limit: maxListed + 1}, func(it api.ItemInfo) error {
		it.Runs = slices.Clone(it.Runs)
		jd.Items = append(jd.Items, it)
		return nil
	})
	if len(jd.Items) > maxListed {
		jd.Items, jd.More = jd.Items[:maxListed], true
	}
	v.Data = jd
	return err
}

func (d *Dashboard) readMembers(r *http.Request, v *view) error {
	ms, err := d.svc.Org.Members(r.Context())
	v.Data = ms
	return err
}

func (d *Dashboard) readDatasets(r *http.Request, v *view) error {
	ds, err := d.svc.Datasets.Datasets(r.Context())
	v.Data = ds
	return err
}

func (d *Dashboard) readDataset(r *http.Request, v *view) error {
	ds, err := d.svc.Datasets.Dataset(r.Context(), r.PathValue("ref"))
	v.Data, v.Title = ds, "Dataset "+ds.Name
	return err
}

type marketData struct {
	Query, Order string
	Offers       []api.OfferInfo
	OffersErr    string
	Contracts    []contractRow
}

type contractRow struct {
	api.ContractInfo
	SSH string // the command that enters it, when it runs and a gateway serves it
}

func (d *Dashboard) readMarket(r *http.Request, v *view) error {
	q := r.URL.Query()
	md := marketData{Query: q.Get("q"), Order: q.Get("o")}
	offers, err := d.svc.Market.Offers(r.Context(), md.Query, md.Order)
	if err != nil {
		md.OffersErr = err.Error() // a query the language refuses: said beside the search box
	}
	md.Offers = offers[:min(len(offers), maxListed)]
	cs, err := d.svc.Market.Contracts(r.Context())
	for _, c := range cs[:min(len(cs), maxListed)] {
		row := contractRow{ContractInfo: c}
		if c.State == "running" && d.svc.Gateway != nil {
			if t, err := d.svc.Gateway.ContractSSH(r.Context(), c.ID); err == nil && t.Host != "" {
				row.SSH = "ssh -p " + strconv.Itoa(t.Port) + " " + t.User + "@" + t.Host
			}
		}
		md.Contracts = append(md.Contracts, row)
	}
	v.Data = md
	return err
}

type usageData struct {
	Window string
	Usage  api.OrgUsage
}

// usageWindows are the Usage page's choices: how far back from now.
var usageWindows = map[string]time.Duration{"1h": time.Hour, "24h": 24 * time.Hour, "7d": 7 * 24 * time.Hour, "30d": 30 * 24 * time.Hour, "all": 0}

func (d *Dashboard) readUsage(r *http.Request, v *view) error {
	if d.svc.Usage == nil {
		return api.Errorf(http.StatusNotFound, "usage: this node does not serve it")
	}
	w := r.URL.Query().Get("window")
	if w == "" {
		w = "all"
	}
	back, ok := usageWindows[w]
	if !ok {
		return api.Errorf(http.StatusBadRequest, "window: %q is not one of 1h, 24h, 7d, 30d, all", w)
	}
	var since int64
	if back > 0 {
		since = v.Now.Add(-back).UnixMilli()
	}
	u, err := d.svc.Usage.OrgUsage(r.Context(), since, 0)
	v.Data = usageData{Window: w, Usage: u}
	return err
}

type settingsData struct {
	Org    api.OrgInfo
	Fields []setting
	// Tokens are this node's API access tokens (Tokens: the node serves
	// them; TokensErr: what listing them said).
	Tokens    bool
	TokenList []api.TokenInfo
	TokensErr string
}

func (d *Dashboard) readSettings(r *http.Request, v *view) error {
	o, err := d.svc.Org.Org(r.Context())
	sd := settingsData{Org: o, Fields: settingsForm(o), Tokens: d.svc.Tokens != nil}
	if sd.Tokens {
		ts, terr := d.svc.Tokens.ListTokens(r.Context())
		sd.TokenList = ts[:min(len(ts), maxListed)]
		if terr != nil {
			sd.TokensErr = terr.Error()
		}
	}
	v.Data = sd
	return err
}
