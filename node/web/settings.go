package web

import (
	"strconv"
	"time"

	"github.com/cshare/cshare/ledger/jobspec"
	"github.com/cshare/cshare/node/api"
)

// setting is one field of the Settings form: its `org set` key, its label,
// its value as `org set` reads it, and its choices (a select) or Bool (a
// checkbox).
type setting struct {
	Key, Label, Value, Help string
	Choices                 []string
	Bool                    bool
}

// settingsForm is the org's settings as the form shows them.
func settingsForm(o api.OrgInfo) []setting {
	s, p := o.Settings, o.Policies
	n := func(x int64) string { return strconv.FormatInt(x, 10) }
	return []setting{
		{Key: "name", Label: "Organization name", Value: o.Name},
		{Key: "description", Label: "Description", Value: o.Description},
		{Key: "require_machine_approval", Label: "New machines need an admin's approval", Value: strconv.FormatBool(s.RequireMachineApproval), Bool: true},
		{Key: "smartshare.mode", Label: "SmartShare balances between", Value: s.SmartShare.Mode, Choices: []string{"jobs", "none"}},
		{Key: "smartshare.preempt_policy", Label: "Preemption", Value: s.SmartShare.PreemptPolicy, Choices: []string{"aggressive", "passive"}},
		{Key: "smartshare.default_max_cpus", Label: "Default max CPUs of a job", Value: jobspec.FormatMaxCPUs(s.SmartShare.DefaultMaxCPUs), Help: "N, or * for the limit"},
		{Key: "smartshare.max_cpus_limit", Label: "Max CPUs limit", Value: jobspec.FormatMaxCPUs(s.SmartShare.MaxCPUsLimit)},
		{Key: "market.delete_after", Label: "Delete ended contracts after", Value: (time.Duration(s.Market.DeleteAfter) * time.Millisecond).String(), Help: "0: 48h"},
		{Key: "policy.max_machines_per_user", Label: "Max machines per person", Value: n(p.MaxMachinesPerUser), Help: "0: none"},
		{Key: "policy.max_concurrent_jobs_per_user", Label: "Max concurrent jobs per person", Value: n(p.MaxConcurrentJobsPerUser), Help: "0: none; later jobs wait queued"},
		{Key: "policy.max_job_runtime", Label: "Max job runtime (seconds, or 24h, 2d)", Value: n(p.MaxJobRuntime), Help: "0: none"},
		{Key: "policy.max_job_memory", Label: "Max job memory (MB, or 64g)", Value: n(p.MaxJobMemory), Help: "0: none"},
		{Key: "policy.default_item_timeout", Label: "Default item timeout (seconds, or 30m)", Value: n(p.DefaultItemTimeout), Help: "0: none"},
	}
}
