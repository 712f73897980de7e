package orgsvc

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/jobspec"
	"github.com/cshare/cshare/market"
	"github.com/cshare/cshare/node/api"
)

// The org's policies as org set takes them and org show lists them, its
// totals, and its usage (issue 30; the rules are the ledger's:
// ledger/fold_policies.go, ledger/usage.go).

// ParsePolicy reads `org set policy.NAME=VALUE`: "0" or "none" removes
// the policy; counts are whole numbers; durations are Go durations or
// whole days ("2d"), a bare number being seconds; sizes are as job submit
// --memory reads them ("64g"), a bare number being MB (the units of the
// seed's organization.limits). It returns the value in the ledger's units
// (count, ms, MB).
func ParsePolicy(name, v string) (int64, error) {
	key := "policy." + name
	v = strings.TrimSpace(v)
	unit := ledger.PolicyUnit(name)
	if unit == "" {
		return 0, api.FieldErrorf(http.StatusBadRequest, key, "unknown setting %q; allowed: policy.%s", api.Ellipsize(key), strings.Join(ledger.PolicyNames, ", policy."))
	}
	if v == "0" || strings.EqualFold(v, "none") {
		return 0, nil
	}
	bad := func(what string) error {
		return api.FieldErrorf(http.StatusBadRequest, key, "%s: %q is not %s, or 0 or none to remove the policy", key, api.Ellipsize(v), what)
	}
	var x int64
	switch unit {
	case "count":
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, bad("a whole number")
		}
		x = n
	case "ms":
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			if n < 0 || n > market.MaxDuration/1000 {
				return 0, bad("a duration like 24h, 90m or 2d (a bare number is seconds) of at most 10 years")
			}
			x = n * 1000
		} else if days, ok := strings.CutSuffix(v, "d"); ok {
			n, err := strconv.ParseInt(days, 10, 64)
			if err != nil || n <= 0 || n > 3650 {
				return 0, bad("a duration like 24h, 90m or 2d (a bare number is seconds) of at most 10 years")
			}
			x = n * market.Day
		} else {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return 0, bad("a duration like 24h, 90m or 2d (a bare number is seconds)")
			}
			x = d.Milliseconds()
		}
	case "MB":
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			if n < 0 {
				return 0, bad("a size like 64g or 512m (a bare number is MB)")
			}
			x = n
		} else {
			mb, err := jobspec.ParseSizeMB(key, v)
			if err != nil {
				return 0, api.BadRequest(err)
			}
			x = mb
		}
	}
	if err := ledger.CheckPolicy(name, x); err != nil {
		return 0, api.FieldErrorf(http.StatusBadRequest, key, "%v", err)
	}
	return x, nil
}

// Usage is the org's usage and totals (org usage, org show's totals,
// /metrics), computed from the ledger alone: a part of the org service
// with a type of its own.
type Usage struct{ s *Service }

// Usage is the service's usage part.
func (s *Service) Usage() Usage { return Usage{s} }

// apiPolicies are the ledger's policies in org show's units.
func apiPolicies(p ledger.Policies) api.Policies {
	return api.Policies{MaxMachinesPerUser: p.MaxMachinesPerUser, MaxConcurrentJobsPerUser: p.MaxConcurrentJobsPerUser,
		MaxJobRuntime: p.MaxJobRuntimeMS / 1000, MaxJobMemory: p.MaxJobMemoryMB, DefaultItemTimeout: p.DefaultItemTimeoutMS / 1000}
}

// ledgerTotals fills in t what the ledger says at now (approved machines,
// active jobs that may run, the CPU-seconds of every run), and returns
// what each approved machine's last heartbeat reports free, for
// addAvailable once the ledger's lock is released.
func (u Usage) ledgerTotals(st *ledger.State, now time.Time, t *api.OrgTotals) map[string]api.Resources {
	s := u.s
	free := map[string]api.Resources{}
	for _, m := range st.SortedMachines() {
		if m.Status != ledger.MachineApproved {
			continue
		}
		t.Machines++
		if mi := s.d.Machines.MachineInfo(st, m, now); mi.Free != nil && !mi.DiskFull {
			free[m.ID] = *mi.Free
		}
	}
	for _, j := range st.Jobs {
		if j.State == ledger.JobActive && j.Queued == "" {
			t.ActiveJobs++
		}
	}
	all := st.Usage(0, market.MaxTime)
	t.CPUSeconds = seconds(all.Totals.CPUMilliMS, 1000)
	return free
}

// addAvailable adds to t what the online machines among free report free:
// the capacity ready for new jobs.
func (u Usage) addAvailable(free map[string]api.Resources, now time.Time, t *api.OrgTotals) {
	s := u.s
	for _, id := range slices.Sorted(maps.Keys(free)) {
		if s.d.Machines.MachineStatus(id, now) == "offline" {
			continue
		}
		f := free[id]
		t.AvailableCPUs += float64(f.Cores) / 1000
		t.AvailableMemoryMB += f.MemoryMB
		t.AvailableGPUs += f.GPUs
	}
}

// seconds is x ms (times per units of a thing) as seconds of one.
func seconds(x, per int64) float64 { return float64(x) / float64(per) / 1000 }

// OrgUsage implements api.UsageService: the org's consumption in [since,
// until) from the ledger alone, so any two nodes with the same ledger
// answer the same for the same window. since 0 is the org's creation,
// until 0 now.
func (u Usage) OrgUsage(_ context.Context, since, until int64) (api.OrgUsage, error) {
	s := u.s
	if err := s.needOrg(); err != nil {
		return api.OrgUsage{}, err
	}
	if until == 0 {
		until = s.now().UnixMilli()
	}
	var out api.OrgUsage
	s.snapshot(func(st *ledger.State) {
		if since == 0 {
			since = st.Created
		}
		out = usageAPI(st.Usage(since, max(until, since)))
	})
	return out, nil
}

// usageAPI is u as the API prints it.
func usageAPI(u ledger.Usage) api.OrgUsage {
	out := api.OrgUsage{Since: api.FormatTimeMS(time.UnixMilli(u.Since)), Until: api.FormatTimeMS(time.UnixMilli(u.Until)),
		Persons: []api.PersonUsage{}, Machines: []api.MachineUsage{}, Totals: usageTotals(u.Totals)}
	for _, p := range u.Persons {
		out.Persons = append(out.Persons, api.PersonUsage{ID: p.ID, Name: p.Name, UsageTotals: usageTotals(p.Consumption)})
	}
	for _, m := range u.Machines {
		out.Machines = append(out.Machines, api.MachineUsage{ID: m.ID, Name: m.Name, CPUSeconds: seconds(m.CPUMilliMS, 1000), GPUSeconds: seconds(m.GPUMS, 1)})
	}
	return out
}

func usageTotals(c ledger.Consumption) api.UsageTotals {
	return api.UsageTotals{CPUSeconds: seconds(c.CPUMilliMS, 1000), GPUSeconds: seconds(c.GPUMS, 1), MemoryMiBSeconds: seconds(c.MemoryMBMS, 1),
		ItemsDone: c.ItemsDone, ItemsFailed: c.ItemsFailed, Jobs: c.Jobs, DatasetBytes: c.DatasetBytes, DatasetByteSeconds: c.DatasetByteSec,
		ContractSpendUSD: float64(c.ContractSpend) / 1e6, ContractEarnedUSD: float64(c.ContractEarned) / 1e6}
}

// Totals is org show's totals at now, without the rest of org show (for
// /metrics).
func (u Usage) Totals() (api.OrgTotals, error) {
	s := u.s
	if err := s.needOrg(); err != nil {
		return api.OrgTotals{}, err
	}
	var t api.OrgTotals
	now := s.now()
	var free map[string]api.Resources
	s.snapshot(func(st *ledger.State) { free = u.ledgerTotals(st, now, &t) })
	u.addAvailable(free, now, &t)
	return t, nil
}
