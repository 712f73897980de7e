package api

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
)

// Usage and policies (issue 30): `org usage`, and what `org show` adds.

// UsageService is the org usage part of the API; a Service that has it
// serves GET /v1/org/usage.
type UsageService interface {
	// OrgUsage is the org's consumption in [since, until) (unix ms; 0:
	// the org's creation, and now), computed from the ledger alone.
	OrgUsage(ctx context.Context, since, until int64) (OrgUsage, error)
}

// Policies are the org's policies as `org show --json` lists them, in the
// units of the seed's organization.limits: counts, seconds and MB. A
// policy not set is left out.
type Policies struct {
	MaxMachinesPerUser       int64 `json:"max_machines_per_user,omitempty"`
	MaxConcurrentJobsPerUser int64 `json:"max_concurrent_jobs_per_user,omitempty"`
	MaxJobRuntime            int64 `json:"max_job_runtime,omitempty"` // seconds
	MaxJobMemory             int64 `json:"max_job_memory,omitempty"`  // MB
	DefaultItemTimeout       int64 `json:"default_item_timeout,omitempty"`
}

// OrgTotals is the org at a glance (`org show`): approved machines, what
// the online ones have free for new jobs (their last heartbeats), active
// jobs that may run (not queued by a policy), and the CPU-seconds of every
// run the ledger knows.
type OrgTotals struct {
	Machines          int64   `json:"machines"`
	AvailableCPUs     float64 `json:"available_cpus"`
	AvailableMemoryMB int64   `json:"available_memory_mb"`
	AvailableGPUs     int64   `json:"available_gpus"`
	ActiveJobs        int64   `json:"active_jobs"`
	CPUSeconds        float64 `json:"cpu_seconds"`
}

// UsageTotals are consumption figures (a person's, or the org's): CPU-,
// GPU- and memory MiB-seconds of runs, items done and failed for good,
// jobs submitted, datasets held (bytes at the window's end, byte-seconds
// over it), and contract spend (as renter) and earnings (as host) in
// dollars.
type UsageTotals struct {
	CPUSeconds         float64 `json:"cpu_seconds"`
	GPUSeconds         float64 `json:"gpu_seconds"`
	MemoryMiBSeconds   float64 `json:"memory_mib_seconds"`
	ItemsDone          int64   `json:"items_done"`
	ItemsFailed        int64   `json:"items_failed"`
	Jobs               int64   `json:"jobs"`
	DatasetBytes       int64   `json:"dataset_bytes"`
	DatasetByteSeconds int64   `json:"dataset_byte_seconds"`
	ContractSpendUSD   float64 `json:"contract_spend_usd"`
	ContractEarnedUSD  float64 `json:"contract_earned_usd"`
}

// PersonUsage is one person's row of `org usage`.
type PersonUsage struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	UsageTotals
}

// MachineUsage is one machine's row of `org usage`.
type MachineUsage struct {
	ID         string  `json:"id"`
	Name       string  `json:"name"`
	CPUSeconds float64 `json:"cpu_seconds"`
	GPUSeconds float64 `json:"gpu_seconds"`
}

// OrgUsage is `org usage --json`: since and until are RFC 3339 (ms);
// persons and machines are sorted by ID.
type OrgUsage struct {
	Since    string         `json:"since"`
	Until    string         `json:"until"`
	Persons  []PersonUsage  `json:"persons"`
	Machines []MachineUsage `json:"machines"`
	Totals   UsageTotals    `json:"totals"`
}

// usageRoutes is the usage part of the API's table.
func usageRoutes(svc UsageService) []route {
	return []route{
		{"GET /v1/org/usage", noBody(func(ctx context.Context, r *http.Request) (OrgUsage, error) {
			var at [2]int64
			for i, k := range []string{"since", "until"} {
				s := r.URL.Query().Get(k)
				if s == "" {
					continue
				}
				v, err := strconv.ParseInt(s, 10, 64)
				if err != nil || v <= 0 || v > maxUsageTime {
					return OrgUsage{}, FieldErrorf(http.StatusBadRequest, k, "%s: %q; a positive unix time in ms, before the year 10000", k, Ellipsize(s))
				}
				at[i] = v
			}
			if at[0] != 0 && at[1] != 0 && at[1] < at[0] {
				return OrgUsage{}, FieldErrorf(http.StatusBadRequest, "until", "until: before since; give a window that ends after it starts")
			}
			return svc.OrgUsage(ctx, at[0], at[1])
		})},
	}
}

// maxUsageTime is the latest time a window may name (the ledger's own
// bound, 9999-12-31).
const maxUsageTime = 253402300799999

// OrgUsage is GET /v1/org/usage: the org's consumption in [since, until)
// (unix ms; 0: from the org's creation, to now).
func (c *Client) OrgUsage(ctx context.Context, since, until int64) (OrgUsage, error) {
	q := url.Values{}
	if since != 0 {
		q.Set("since", strconv.FormatInt(since, 10))
	}
	if until != 0 {
		q.Set("until", strconv.FormatInt(until, 10))
	}
	path := "/v1/org/usage"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return get[OrgUsage](c, ctx, path)
}
