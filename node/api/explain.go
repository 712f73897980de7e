package api

import "context"

// JobExplain is why a job's items and instances wait, machine by machine
// (GET /v1/jobs/{id}/explain; `cshare job show ID --explain --json`): what
// the current plan gives the job, and for each machine of the org that is
// not removed, why it runs none, or no more, of the job's instances.
type JobExplain struct {
	Job   string `json:"job"`
	Name  string `json:"name"`
	State string `json:"state"`
	// Reason is the job's own reason, as `job show` says it.
	Reason string `json:"reason,omitempty"`
	// Wanted is how many instances the job could use (its cpus and
	// max_cpus, at most its items left); Planned how many the plan gives
	// it; PendingItems its items not yet done or failed.
	Wanted       int            `json:"wanted"`
	Planned      int            `json:"planned"`
	PendingItems int64          `json:"pending_items"`
	Machines     []MachineWaits `json:"machines"`
}

// MachineWaits is one machine's part in a JobExplain.
type MachineWaits struct {
	Machine string `json:"machine"`
	Name    string `json:"name"`
	Status  string `json:"status"` // the ledger's: approved, pending, rejected
	Online  bool   `json:"online"`
	// Instances are the job's instances the plan puts on it.
	Instances int          `json:"instances"`
	Reasons   []WaitReason `json:"reasons"` // none: it runs what the job can use of it
}

// WaitReason is one reason a machine runs none, or no more, of a job's
// instances: a code (not_approved, rejected, offline, no_slots, rented,
// disk_full, lacks_cores, lacks_memory, lacks_gpus, lacks_gpu_memory,
// lacks_disk, policy_limit, not_needed, smartshare_disabled,
// busy_higher_priority, busy_shared, resources_in_use, next_plan) and what
// it means for this machine.
type WaitReason struct {
	Code string `json:"code"`
	Text string `json:"text"`
}

// ExplainJob is why job id waits, machine by machine.
func (c *Client) ExplainJob(ctx context.Context, id string) (JobExplain, error) {
	return get[JobExplain](c, ctx, "/v1/jobs/"+esc(id)+"/explain")
}
