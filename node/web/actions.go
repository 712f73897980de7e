package web

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/cshare/cshare/ledger/jobspec"
	"github.com/cshare/cshare/node/api"
)

// actionRoutes are the forms' actions, by path. Each calls one service and
// goes back to its page with the outcome; the services check who may.
func (d *Dashboard) actionRoutes() map[string]actionFunc {
	return map[string]actionFunc{
		"/machines/{id}/{action}": d.machineAction,
		"/jobs":                   d.submitJob,
		"/jobs/{id}/modify":       d.modifyJob,
		"/jobs/{id}/cancel": func(r *http.Request, _ string) (string, flash) {
			j, err := d.svc.Jobs.CancelJob(r.Context(), r.PathValue("id"))
			return "/jobs/" + url.PathEscape(r.PathValue("id")), outcome(err, "Cancelled job "+j.Name+".")
		},
		"/members/invite":      d.invite,
		"/members/{id}/role":   d.setRole,
		"/members/{id}/remove": d.removeMember,
		"/leave": func(r *http.Request, _ string) (string, flash) {
			left, err := d.svc.Leave.Leave(r.Context(), api.LeaveRequest{})
			if err != nil {
				return "/", flash{Error: err.Error()}
			}
			return "/", flash{OK: "You left " + left.OrgName + "."}
		},
		"/settings":           d.saveSettings,
		"/org/delete":         d.deleteOrg,
		"/tokens":             d.createToken,
		"/tokens/{id}/revoke": d.revokeToken,
		"/org/create": func(r *http.Request, _ string) (string, flash) {
			k, err := d.svc.Org.CreateOrg(r.Context(), api.OrgCreate{Name: r.PostFormValue("name"), Description: r.PostFormValue("description")})
			return "/", outcome(err, "Created the org; its key: "+k.Key)
		},
		"/join": func(r *http.Request, _ string) (string, flash) {
			res, err := d.svc.Org.Join(r.Context(), api.JoinRequest{OrgKey: strings.TrimSpace(r.PostFormValue("code")), Name: r.PostFormValue("name")})
			if err != nil {
				return "/join", flash{Error: err.Error()}
			}
			return "/", flash{OK: "Joined " + res.OrgName + "; this machine is " + res.Status + "."}
		},
		"/datasets/{ref}/remove": func(r *http.Request, _ string) (string, flash) {
			ds, err := d.svc.Datasets.RemoveDataset(r.Context(), r.PathValue("ref"))
			return "/datasets", outcome(err, "Removed dataset "+ds.Name+".")
		},
		"/datasets/{ref}/access": func(r *http.Request, _ string) (string, flash) {
			ref := r.PathValue("ref")
			ds, err := d.svc.Datasets.SetDatasetAccess(r.Context(), ref, api.DatasetAccessRequest{Access: r.PostFormValue("access")})
			return "/datasets/" + url.PathEscape(ref), outcome(err, "Dataset "+ds.Name+" is now "+ds.Access+": "+accessText(ds.Access)+".")
		},
		"/contracts/{id}/{action}": func(r *http.Request, _ string) (string, flash) {
			a := r.PathValue("action")
			if a != "stop" && a != "start" && a != "rm" {
				return "/market", flash{Error: "action: " + a + " is not one of stop, start, rm"}
			}
			c, err := d.svc.Market.ContractAction(r.Context(), r.PathValue("id"), a)
			return "/market", outcome(err, "Contract "+short(c.ID)+": "+c.State+".")
		},
	}
}

func (d *Dashboard) machineAction(r *http.Request, _ string) (string, flash) {
	a := r.PathValue("action")
	if a != "approve" && a != "reject" && a != "remove" {
		return "/machines", flash{Error: "action: " + a + " is not one of approve, reject, remove"}
	}
	m, err := d.svc.Org.MachineAction(r.Context(), r.PathValue("id"), a)
	return "/machines", outcome(err, "Machine "+m.Name+": "+a+" done; status "+m.Status+".")
}

// submitJob reads the submit form as the CLI reads its flags, with the same
// parsers (ledger/jobspec), and names the form's field when one is wrong.
func (d *Dashboard) submitJob(r *http.Request, _ string) (string, flash) {
	f := r.PostFormValue
	cmd := strings.TrimSpace(f("cmd"))
	if cmd == "" {
		return "/jobs", flash{Error: "command: give the command each item runs (it runs as sh -c COMMAND)"}
	}
	req := api.JobSubmit{Name: strings.TrimSpace(f("name")), Image: strings.TrimSpace(f("image")), Driver: f("driver"), Cmd: []string{"sh", "-c", cmd}}
	var err error
	parse := func(field string, p func(string) (int64, error), into *int64) {
		if s := strings.TrimSpace(f(field)); s != "" && err == nil {
			*into, err = p(s)
		}
	}
	parse("cores", jobspec.ParseCores, &req.CoresMilli)
	parse("memory", jobspec.ParseMemory, &req.MemoryMB)
	parse("gpus", jobspec.ParseGPUs, &req.GPUs)
	parse("priority", jobspec.ParsePriority, &req.Priority)
	parse("cpus", jobspec.ParseCPUs, &req.CPUs)
	parse("retries", jobspec.ParseRetries, &req.Retries)
	if s := strings.TrimSpace(f("range")); s != "" && err == nil {
		var a, b int64
		if a, b, err = jobspec.ParseRange(s); err == nil {
			req.RangeStart, req.RangeEnd = &a, &b
		}
	}
	if s := strings.TrimSpace(f("max_cpus")); s != "" && f("expert") != "" && err == nil {
		var n int64
		if n, err = jobspec.ParseMaxCPUs(s); err == nil {
			req.MaxCPUs = &n
		}
	}
	if err != nil {
		return "/jobs", flash{Error: err.Error()}
	}
	j, err := d.svc.Jobs.SubmitJob(r.Context(), req)
	if err != nil {
		return "/jobs", flash{Error: err.Error()}
	}
	fl := flash{OK: "Submitted job " + j.Name + " (" + short(j.ID) + ")."}
	if len(j.Warnings) > 0 {
		fl.OK += " Warning: " + strings.Join(j.Warnings, "; ")
	}
	return "/jobs/" + url.PathEscape(j.ID), fl
}

func (d *Dashboard) modifyJob(r *http.Request, _ string) (string, flash) {
	id := r.PathValue("id")
	back := "/jobs/" + url.PathEscape(id)
	var req api.JobModify
	if s := strings.TrimSpace(r.PostFormValue("priority")); s != "" {
		p, err := jobspec.ParsePriority(s)
		if err != nil {
			return back, flash{Error: err.Error()}
		}
		req.Priority = &p
	}
	if s := strings.TrimSpace(r.PostFormValue("max_cpus")); s != "" {
		n, err := jobspec.ParseMaxCPUs(s)
		if err != nil {
			return back, flash{Error: err.Error()}
		}
		req.MaxCPUs = &n
	}
	_, err := d.svc.Jobs.ModifyJob(r.Context(), id, req)
	return back, outcome(err, "Modified the job.")
}

// invite makes an invite code and shows it, with the link that opens the
// joiner's own dashboard on its Join page (a node's API listens on
// 127.0.0.1:7480 unless told otherwise).
func (d *Dashboard) invite(r *http.Request, _ string) (string, flash) {
	uses, err := strconv.ParseInt(strings.TrimSpace(r.PostFormValue("uses")), 10, 64)
	if err != nil || uses < 0 {
		return "/members", flash{Error: "uses: a whole number, 0 for unlimited"}
	}
	k, err := d.svc.Org.Invite(r.Context(), api.InviteRequest{Role: r.PostFormValue("role"), Expires: strings.TrimSpace(r.PostFormValue("expires")), Uses: uses})
	if err != nil {
		return "/members", flash{Error: err.Error()}
	}
	return "/members", flash{OK: "Invite made: give the joiner the code, or the link, which opens the Join page of the dashboard on their machine.",
		Code: k.Key, Link: "http://localhost:7480/join?code=" + url.QueryEscape(k.Key)}
}

func (d *Dashboard) setRole(r *http.Request, _ string) (string, flash) {
	m, err := d.svc.Org.SetRole(r.Context(), r.PathValue("id"), r.PostFormValue("role"))
	return "/members", outcome(err, m.Name+" is now "+m.Role+".")
}

func (d *Dashboard) removeMember(r *http.Request, _ string) (string, flash) {
	_, err := d.svc.Org.RemoveMember(r.Context(), r.PathValue("id"))
	return "/members", outcome(err, "Removed the member, their machines and their jobs.")
}

// settingKeys are the Settings form's fields, each the key `org set` takes.
var settingKeys = []string{"name", "description", "require_machine_approval",
	"smartshare.mode", "smartshare.preempt_policy", "smartshare.default_max_cpus", "smartshare.max_cpus_limit", "market.delete_after",
	"policy.max_machines_per_user", "policy.max_concurrent_jobs_per_user", "policy.max_job_runtime", "policy.max_job_memory", "policy.default_item_timeout"}

// saveSettings sends the fields that changed (the form carries each
// field's old value as old.KEY).
func (d *Dashboard) saveSettings(r *http.Request, _ string) (string, flash) {
	set := map[string]string{}
	for _, k := range settingKeys {
		v := strings.TrimSpace(r.PostFormValue(k))
		if k == "require_machine_approval" {
			v = strconv.FormatBool(v != "")
		}
		if v != r.PostFormValue("old."+k) {
			set[k] = v
		}
	}
	if len(set) == 0 {
		return "/settings", flash{OK: "Nothing changed."}
	}
	_, err := d.svc.Org.SetSettings(r.Context(), api.SettingsRequest{Set: set})
	return "/settings", outcome(err, "Saved the settings.")
}

func (d *Dashboard) deleteOrg(r *http.Request, _ string) (string, flash) {
	left, err := d.svc.Leave.DeleteOrg(r.Context(), api.OrgDeleteRequest{Confirm: r.PostFormValue("confirm")})
	if err != nil {
		return "/settings", flash{Error: err.Error()}
	}
	return "/", flash{OK: "Deleted the org " + left.OrgName + " on every node."}
}

// accessText says who reads a dataset of access a.
func accessText(a string) string {
	if a == "private" {
		return "its owner and the admins read it"
	}
	return "every member of the org reads it"
}
