// Package api is the node's local HTTP API: the JSON types, the handlers (a
// stdlib ServeMux with method patterns, behind a bearer token), and the typed
// Go client that the CLI and the dashboard use. It owns the wire contract
// between the CLI and its node; the node's services implement the APIs of
// Services (services.go).
package api

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/jobspec"
	"github.com/cshare/cshare/market"
)

// PastOrg is the org a machine last left, and why (NodeStatus.Left).
type PastOrg struct {
	Org     string `json:"org"`
	Why     string `json:"why"`
	At      string `json:"at"`       // RFC 3339
	OldData string `json:"old_data"` // where its data went, or "deleted (--purge)"
}

// NodeStatus is `cshare node status --json`.
type NodeStatus struct {
	ID           string   `json:"id"`
	Name         string   `json:"name"`
	Org          string   `json:"org"`
	OrgName      string   `json:"org_name,omitempty"`
	Status       string   `json:"status"`
	Role         string   `json:"role,omitempty"`
	Person       string   `json:"person,omitempty"` // the person this machine acts for (before an org: its user key's)
	PersonName   string   `json:"person_name,omitempty"`
	Peers        int      `json:"peers"`
	PeerIDs      []string `json:"peer_ids"`
	Reconnecting bool     `json:"reconnecting"` // no peer while the org has other approved machines: dialling them
	// Left is the org this machine last left, and why (removed, rejected,
	// left, deleted): given while it is in no org.
	Left          *PastOrg `json:"left,omitempty"`
	Heads         []string `json:"heads"`
	Entries       int      `json:"entries"`
	StateHash     string   `json:"state_hash,omitempty"`
	Uptime        string   `json:"uptime"`
	UptimeSeconds int64    `json:"uptime_seconds"`
	Version       string   `json:"version"`
	PlanHash      string   `json:"plan_hash"`
	PlanAgree     int      `json:"plan_agree"`
	PlanPeers     int      `json:"plan_peers"`
	// CatchingUp: after a start or a pause, the node takes no new item
	// until it has synced with a peer (CatchingUpSince says since when).
	CatchingUp      bool     `json:"catching_up"`
	CatchingUpSince string   `json:"catching_up_since,omitempty"`
	API             string   `json:"api"`
	Addrs           []string `json:"addrs"`
	DataDir         string   `json:"data_dir"`
	// SSHAddr is the SSH gateway's listen address and SSHHostKey its host
	// key's SHA256 fingerprint; both empty when node.yaml has no ssh.
	SSHAddr    string `json:"ssh_addr,omitempty"`
	SSHHostKey string `json:"ssh_host_key,omitempty"`
	// JupyterAddr is the Jupyter proxy's listen address and JupyterCert
	// its certificate's fingerprint (sha256//BASE64 of its public key, as
	// curl --pinnedpubkey takes it); both empty when node.yaml has no
	// jupyter.
	JupyterAddr string `json:"jupyter_addr,omitempty"`
	JupyterCert string `json:"jupyter_cert,omitempty"`
	// Reachability is whether other networks reach this machine: public,
	// private (behind a NAT or a firewall: the org reaches it through
	// its relays) or unknown; PublicAddrs are the public addresses it has
	// or is observed at; RelayServing, whether it relays for the org's
	// machines; Connections, the path to each connected peer.
	Reachability string       `json:"reachability"`
	PublicAddrs  []string     `json:"public_addrs"`
	RelayServing bool         `json:"relay_serving"`
	Connections  []Connection `json:"connections"`
}

// Connection is one connected peer of NodeStatus and how it is reached:
// Path "direct", or "relayed" through one of the org's relays (Addr then
// names the relay, /p2p/<relay>/p2p-circuit).
type Connection struct {
	Machine string `json:"machine"`
	Path    string `json:"path"`
	Addr    string `json:"addr"`
}

// OrgInfo is `cshare org show --json`.
type OrgInfo struct {
	ID          string          `json:"id"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Owner       string          `json:"owner"`
	OwnerName   string          `json:"owner_name,omitempty"`
	StateHash   string          `json:"state_hash"`
	Entries     int             `json:"entries"`
	Heads       []string        `json:"heads"`
	Settings    ledger.Settings `json:"settings"`
	Members     int             `json:"members"`
	Machines    int             `json:"machines"`
	Created     string          `json:"created"`
	// Policies and Totals: usage.go.
	Policies Policies  `json:"policies"`
	Totals   OrgTotals `json:"totals"`
	// Capped are the machines the ledger's budget of entries without
	// effect cuts off until the next checkpoint (docs/design.md §5.8).
	Capped []string `json:"capped,omitempty"`
}

// OrgCreate is the body of POST /v1/org.
type OrgCreate struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// UserName names the person's key the node creates when its data dir
	// has none (the CLI's --user-name, else $USER); "" lets the node pick.
	UserName string `json:"user_name,omitempty"`
}

// KeyResult carries an org key or an invite code.
type KeyResult struct {
	Org     string `json:"org"`
	Key     string `json:"key"`
	Role    string `json:"role,omitempty"`
	Expires string `json:"expires,omitempty"`
	Uses    int64  `json:"uses,omitempty"`
}

// InviteRequest is the body of POST /v1/org/invite.
type InviteRequest struct {
	Role    string `json:"role"`
	Expires string `json:"expires"` // Go duration, "" = 72h, "0" = never
	Uses    int64  `json:"uses"`    // 0 = unlimited
}

// SettingsRequest is the body of POST /v1/org/settings: key=value pairs such
// as "smartshare.mode": "jobs".
type SettingsRequest struct {
	Set map[string]string `json:"set"`
}

// JoinRequest is the body of POST /v1/join.
type JoinRequest struct {
	OrgKey string `json:"org_key"`
	Name   string `json:"name,omitempty"`
	// Bootstrap are addresses (/ip4, /ip6, /dns4, /dns6, /dns ending in
	// /p2p/<id>) to join through besides the key's; see CheckBootstrap.
	Bootstrap []string `json:"bootstrap,omitempty"`
	// UserName: as OrgCreate.UserName.
	UserName string `json:"user_name,omitempty"`
}

// JoinResult says how a join went.
type JoinResult struct {
	Org     string `json:"org"`
	OrgName string `json:"org_name"`
	Machine string `json:"machine"`
	Status  string `json:"status"`
	Role    string `json:"role,omitempty"`
}

// LeaveRequest is the body of POST /v1/leave.
type LeaveRequest struct {
	// Purge deletes the org's data on this machine instead of keeping it
	// aside in <data-dir>/orgs/<org-id>.
	Purge bool `json:"purge"`
}

// OrgDeleteRequest is the body of POST /v1/org/delete.
type OrgDeleteRequest struct {
	Confirm string `json:"confirm"` // the org's name, typed again
	Purge   bool   `json:"purge"`
}

// LeftOrg says which org a node is leaving and where the org's data goes:
// Archive is the directory it is moved to, empty when Purged. The node
// leaves just after answering: it stops the org's instances, moves the
// data, and starts again in no org (node status then shows no org).
type LeftOrg struct {
	Org     string `json:"org"`
	OrgName string `json:"org_name"`
	Archive string `json:"archive,omitempty"`
	Purged  bool   `json:"purged"`
	// Warning, if set, is something the user should know: the entry that
	// says so reached no other machine before the node left.
	Warning string `json:"warning,omitempty"`
}

// Resources is a machine's free or total capacity as heartbeats report it.
type Resources struct {
	Cores    int64 `json:"cores"`
	MemoryMB int64 `json:"memory_mb"`
	DiskMB   int64 `json:"disk_mb"`
	GPUs     int64 `json:"gpus"`
	Slots    int64 `json:"slots"`
}

// MemberInfo is one row of `cshare member ls --json`: a person, with the
// IDs of their machines (approved and pending, sorted).
type MemberInfo struct {
	ID       string   `json:"id"`
	Role     string   `json:"role"`
	Name     string   `json:"name,omitempty"`
	Joined   string   `json:"joined,omitempty"`
	Machines []string `json:"machines"`
	// Capped: one of the person's machines is capped (OrgInfo.Capped).
	Capped bool `json:"capped,omitempty"`
}

// TransferRequest is the body of POST /v1/org/transfer: the person (a
// reference, as for member set-role) who becomes the owner.
type TransferRequest struct {
	To string `json:"to"`
}

// RoleRequest is the body of POST /v1/members/{id}/role.
type RoleRequest struct {
	Role string `json:"role"`
}

// RemoveResult answers POST /v1/members/{id}/remove.
type RemoveResult struct {
	Removed bool   `json:"removed"`
	ID      string `json:"id,omitempty"` // the member's full ID
}

// JobSubmit is the body of POST /v1/jobs. It carries typed values: the CLI
// parses the user's strings with package jobspec, and the node checks these
// numbers with the same validators (so the API is never looser than the
// CLI). Zero values of the omitempty fields take the defaults noted.
type JobSubmit struct {
	Name       string            `json:"name,omitempty"`
	Image      string            `json:"image,omitempty"`  // "" = the node's default image (docker)
	Driver     string            `json:"driver,omitempty"` // docker (default) or exec
	Cmd        []string          `json:"cmd"`
	Env        map[string]string `json:"env,omitempty"`
	Entrypoint string            `json:"entrypoint,omitempty"`  // replaces the image's; Cmd are its arguments
	CoresMilli int64             `json:"cores_milli,omitempty"` // millicores per instance; 0 = no limit
	MemoryMB   int64             `json:"memory_mb,omitempty"`   // MB per instance; 0 = no limit
	GPUs       int64             `json:"gpus,omitempty"`
	RangeStart *int64            `json:"range_start,omitempty"` // the agenda's first item; nil = 1
	RangeEnd   *int64            `json:"range_end,omitempty"`   // its last item (inclusive); nil = the first
	Priority   int64             `json:"priority,omitempty"`    // 1..9999; 0 = 9999
	CPUs       int64             `json:"cpus,omitempty"`        // primary instances; 0 = 1
	MaxCPUs    *int64            `json:"max_cpus,omitempty"`    // nil = the org's default; -1 = "*"
	Retries    int64             `json:"retries,omitempty"`
	// DiskMB is the disk each instance may fill, MB; 0 = none asked.
	DiskMB int64 `json:"disk_mb,omitempty"`
	// GPUMemoryMB: only GPUs with at least this much memory (MB) are used.
	GPUMemoryMB int64 `json:"gpu_memory_mb,omitempty"`
	// ItemTimeoutMS: a run of an item lasting longer is stopped and fails;
	// 0 = the org's policy.default_item_timeout.
	ItemTimeoutMS int64 `json:"item_timeout_ms,omitempty"`
	// Datasets are "NAME|CID:/path" mounts, read-only in every instance.
	Datasets []string `json:"datasets,omitempty"`
	// RegistryAuth is registry credentials sealed with age to the
	// approved machines (internal/regauth.Seal), passed on as they are.
	RegistryAuth []byte `json:"registry_auth,omitempty"`
}

// JobSubmitted answers POST /v1/jobs: the job, and warnings about it, such
// as a job no approved machine of the org could fit yet (it is accepted and
// waits: machines may join later).
type JobSubmitted struct {
	JobInfo
	Warnings []string `json:"warnings,omitempty"`
}

// JobModify is the body of POST /v1/jobs/{id}/modify; nil fields are left
// alone.
type JobModify struct {
	MaxCPUs  *int64 `json:"max_cpus,omitempty"` // -1 = "*"
	Priority *int64 `json:"priority,omitempty"` // 1..9999
}

// Items counts a job's agenda.
type Items struct {
	Total   int64 `json:"total"`
	Done    int64 `json:"done"`
	Failed  int64 `json:"failed"`
	Running int64 `json:"running"`
	Pending int64 `json:"pending"`
}

// InstanceInfo is one instance of a job.
type InstanceInfo struct {
	Machine     string `json:"machine"`
	MachineName string `json:"machine_name,omitempty"`
	Slot        int    `json:"slot"`
	Kind        string `json:"kind"`
	State       string `json:"state"`
	Item        int64  `json:"item,omitempty"`
	// CPUPercent (100 per busy core) and MemoryBytes are what its run
	// uses, as the driver last sampled it (docker stats, the exec run's
	// cgroup or /proc); OOMKilled: its last run was killed at its memory
	// cap.
	CPUPercent  float64 `json:"cpu_percent"`
	MemoryBytes int64   `json:"memory_bytes"`
	OOMKilled   bool    `json:"oom_killed,omitempty"`
	// Relayed: this node reaches the machine only through one of the
	// org's relays (its items' output comes through it).
	Relayed bool `json:"relayed,omitempty"`
}

// JobInfo is `cshare job show --json`.
type JobInfo struct {
	ID        string   `json:"id"`
	Name      string   `json:"name,omitempty"`
	Submitter string   `json:"submitter"`
	State     string   `json:"state"`
	Priority  int64    `json:"priority"`
	CPUs      int64    `json:"cpus"`
	MaxCPUs   string   `json:"max_cpus"`
	Driver    string   `json:"driver"`
	Image     string   `json:"image,omitempty"`
	Cmd       []string `json:"cmd"`
	Range     string   `json:"range"`
	Cores     int64    `json:"cores,omitempty"`
	MemoryMB  int64    `json:"memory_mb,omitempty"`
	GPUs      int64    `json:"gpus,omitempty"`
	Retries   int64    `json:"retries"`
	// DiskMB, GPUMemoryMB: as submitted. ItemTimeoutMS is the timeout in
	// force: the job's own, or else the org's default (0: none).
	DiskMB        int64 `json:"disk_mb,omitempty"`
	GPUMemoryMB   int64 `json:"gpu_memory_mb,omitempty"`
	ItemTimeoutMS int64 `json:"item_timeout_ms,omitempty"`
	Items         Items `json:"items"`
	// DuplicateRuns counts runs of items the ledger had already counted
	// (work done twice).
	DuplicateRuns int64          `json:"duplicate_runs"`
	Instances     []InstanceInfo `json:"instances"`
	Reason        string         `json:"reason,omitempty"`
	Error         string         `json:"error,omitempty"`
	Submitted     string         `json:"submitted"`
	SubmitterName string         `json:"submitter_name,omitempty"`
	Ended         string         `json:"ended,omitempty"`
	Datasets      []DatasetMount `json:"datasets,omitempty"`
	// RegistryAuth: the job carries sealed registry credentials (never
	// shown).
	RegistryAuth bool `json:"registry_auth,omitempty"`
}

// DatasetMount is a dataset a job mounts read-only at Path.
type DatasetMount struct {
	Name string `json:"name"`
	CID  string `json:"cid"`
	Path string `json:"path"`
}

// ItemInfo is one agenda item (job show --items, logs).
type ItemInfo struct {
	Item       int64  `json:"item"`
	Status     string `json:"status"`
	Attempts   int64  `json:"attempts"`
	Code       int64  `json:"code"`
	DurationMS int64  `json:"duration_ms"`
	OutputSize int64  `json:"output_size"`
	Machine    string `json:"machine,omitempty"`
	// Runs is every run of the item whose result reached the ledger, in
	// the ledger's order; a run not counted was a duplicate.
	Runs []RunInfo `json:"runs"`
}

// RunInfo is one run of an item (`job items --json`).
type RunInfo struct {
	Machine  string `json:"machine"`
	Instance string `json:"instance,omitempty"`
	Start    string `json:"start,omitempty"` // RFC 3339, "" if not reported
	End      string `json:"end,omitempty"`
	ExitCode int64  `json:"exit_code"`
	Counted  bool   `json:"counted"`           // the ledger took this run's result
	Stopped  bool   `json:"stopped,omitempty"` // stopped before it ended (preempted, cancelled): no result
	// OOMKilled: killed at its memory cap. TimedOut: stopped at its item
	// timeout (job submit --item-timeout).
	OOMKilled bool `json:"oom_killed,omitempty"`
	TimedOut  bool `json:"timed_out,omitempty"`
}

// Error is the body of every non-2xx answer, unknown routes and methods
// included. Field, when the error is about one value of the request, names
// it as the job spec does (cores, memory, range, priority, cpus, max_cpus,
// gpus, retries, driver, cmd, env, image) or, for a body that does not
// decode, the JSON key.
type Error struct {
	Error string `json:"error"`
	Field string `json:"field,omitempty"`
}

// StatusError is an error with an HTTP status, and the request field it is
// about, if any.
type StatusError struct {
	Code  int
	Msg   string
	Field string
}

func (e *StatusError) Error() string { return e.Msg }

// Errorf builds a StatusError.
func Errorf(code int, format string, a ...any) error {
	return &StatusError{Code: code, Msg: sprintf(format, a...)}
}

// BadRequest is err as a 400, naming the field at fault: that of a
// *jobspec.Error or a *text.Error (a name), or the field a market error
// names ("market: bad offer: cpus: ..."), as the request's JSON key.
func BadRequest(err error) error {
	se := &StatusError{Code: http.StatusBadRequest, Msg: err.Error()}
	var je *jobspec.Error
	var te *text.Error
	switch {
	case errors.As(err, &je):
		se.Field = je.Field
	case errors.As(err, &te):
		se.Field = te.Field
	case errors.Is(err, market.ErrOffer), errors.Is(err, market.ErrAsk):
		msg := err.Error()
		for _, prefix := range []string{market.ErrOffer.Error() + ": ", market.ErrAsk.Error() + ": "} {
			msg = strings.TrimPrefix(msg, prefix)
		}
		if f, _, ok := strings.Cut(msg, ": "); ok && marketFields[f] != "" {
			se.Field = marketFields[f]
		}
	}
	return se
}

// marketFields maps the fields market errors name to the request's JSON
// keys (OfferCreate, ContractCreate).
var marketFields = map[string]string{
	"gpus": "gpus", "cpus": "cpus", "memory_mb": "memory_mb", "disk_mb": "disk_mb", "price": "price",
	"disk_price": "disk_price", "until": "until", "min_duration": "min_duration_ms", "duration": "for_ms",
}

// FieldErrorf builds a StatusError about one field of the request.
func FieldErrorf(code int, field, format string, a ...any) error {
	return &StatusError{Code: code, Msg: sprintf(format, a...), Field: field}
}

// FormatTimeMS is FormatTime to the millisecond (run starts and ends).
func FormatTimeMS(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// FormatTime renders a time as RFC 3339 in UTC, or "" for the zero time.
func FormatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}
