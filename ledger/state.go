package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"sort"

	"github.com/fxamacker/cbor/v2"

	"github.com/cshare/cshare/market"
)

// Machine statuses recorded in the ledger. Liveness (available, busy,
// offline) is not a ledger fact: the node derives it from heartbeats.
const (
	MachinePending  = "pending"
	MachineApproved = "approved"
	MachineRejected = "rejected"
	MachineRemoved  = "removed"
)

// Job states recorded in the ledger. Whether an active job is queued or
// running is derived by the node from live instances.
const (
	JobActive    = "active"
	JobDone      = "done"
	JobFailed    = "failed"
	JobCancelled = "cancelled"
)

// Item statuses.
const (
	ItemPending uint8 = iota
	ItemDone
	ItemFailed
)

// SmartShare settings (docs/design.md §10), kept in the ledger.
type SmartShare struct {
	Mode           string `cbor:"mode" json:"mode"`
	PreemptPolicy  string `cbor:"preempt_policy" json:"preempt_policy"`
	DefaultMaxCPUs int64  `cbor:"default_max_cpus" json:"default_max_cpus"`
	MaxCPUsLimit   int64  `cbor:"max_cpus_limit" json:"max_cpus_limit"`
}

// Settings are the org-wide settings.
type Settings struct {
	RequireMachineApproval bool       `cbor:"require_machine_approval" json:"require_machine_approval"`
	SmartShare             SmartShare `cbor:"smartshare" json:"smartshare"`
	// Market: market.delete_after (0: 48 hours).
	Market market.Policy `cbor:"market" json:"market"`
	// Policies are the org's resource policies (fold_policies.go); the
	// API shows them apart, as org show's "policies".
	Policies Policies `cbor:"policies,omitempty" json:"-"`
	// Ledger: checkpoints and pruning (checkpoint.go).
	Ledger LedgerSettings `cbor:"ledger,omitempty" json:"-"`
	// Jobs: how long finished jobs stay in the State (archive.go).
	Jobs JobsSettings `cbor:"jobs,omitempty" json:"jobs"`
}

// DefaultSettings are a new org's settings.
func DefaultSettings() Settings {
	return Settings{
		RequireMachineApproval: true,
		SmartShare:             SmartShare{Mode: "jobs", PreemptPolicy: "aggressive", DefaultMaxCPUs: -1, MaxCPUsLimit: 100},
	}
}

// Member is a person with a role. ID is the person's ID (a machine's own ID
// when it registered without a delegation); Name is the name the person's
// delegation gave.
type Member struct {
	ID     string   `cbor:"id"`
	Name   string   `cbor:"name"`
	Role   string   `cbor:"role"`
	Grant  OrderKey `cbor:"grant"` // the entry that gave the current role
	Joined int64    `cbor:"joined"`
}

// Machine is a machine as the ledger knows it.
type Machine struct {
	ID         string   `cbor:"id"`
	Name       string   `cbor:"name"`
	Owner      string   `cbor:"owner"`
	Status     string   `cbor:"status"`
	Role       string   `cbor:"role"` // the role its capability grants on approval
	Hardware   Hardware `cbor:"hardware"`
	Limits     Limits   `cbor:"limits"`
	HasLimits  bool     `cbor:"has_limits"`
	Version    string   `cbor:"version"`
	Registered int64    `cbor:"registered"`
	TotalJobs  int64    `cbor:"total_jobs"`
	// OwnerName is the name the owner's delegation gave (the machine's ID
	// when it has no delegation).
	OwnerName string `cbor:"owner_name"`
	// History is every change of Status, oldest first.
	History []MachineEvent `cbor:"history"`
}

// Item is one agenda item's progress.
type Item struct {
	Status     uint8  `cbor:"s"`
	Attempts   int64  `cbor:"a"`           // every real run the ledger knows: counted, duplicate or stopped
	Failures   int64  `cbor:"f,omitempty"` // counted runs that failed (what --retries bounds)
	Code       int64  `cbor:"c"`
	DurationMS int64  `cbor:"d"`
	OutputSize int64  `cbor:"o"`
	Machine    string `cbor:"m"`
}

// Job is a submitted job and its agenda.
type Job struct {
	ID        string          `cbor:"id"`
	Submitter string          `cbor:"submitter"` // the submitting person
	Machine   string          `cbor:"machine"`   // the machine that wrote the submission
	Spec      JobSpec         `cbor:"spec"`
	Seq       int64           `cbor:"seq"` // submission order in the org
	Submitted int64           `cbor:"submitted"`
	State     string          `cbor:"state"`
	Priority  int64           `cbor:"priority"`
	MaxCPUs   *int64          `cbor:"max_cpus"`
	Items     ItemList        `cbor:"items"`
	Done      int64           `cbor:"done"`
	Failed    int64           `cbor:"failed"`
	Error     string          `cbor:"error"`
	Machines  map[string]bool `cbor:"machines"`
	Ended     int64           `cbor:"ended"`
	// Runs is every run whose result reached the ledger, in the fold's
	// order (see RunList); Duplicates counts those the ledger did not
	// count (the item was already done or failed for good, or the job had
	// ended).
	Runs       RunList `cbor:"runs,omitempty"`
	Duplicates int64   `cbor:"dups,omitempty"`
	// Org policies (fold_policies.go). Queued is why an active job may
	// not run yet (policy.max_concurrent_jobs_per_user), "" once it may;
	// Admitted is when it was let run (its submission, or the entry that
	// took it from the queue); Started is its first start as the ledger
	// knows it (a job.start, or the earliest run in its first results),
	// never before Admitted; 0 until then.
	Queued   string `cbor:"queued,omitempty"`
	Admitted int64  `cbor:"admitted,omitempty"`
	Started  int64  `cbor:"started,omitempty"`
	// Archived: the job finished and left the State at a checkpoint
	// (archive.go): Items and Runs are empty, and this sums them.
	Archived *JobSummary `cbor:"archived,omitempty"`
}

// RunList is an append-only list of runs kept in chunks that never move:
// a job of a million items gets a million runs, and a slice grown by
// append would copy them again and again (Go grows large slices by a
// quarter). Chunks double from 8 runs up to maxRunChunk.
type RunList [][]Run

const maxRunChunk = 1024

// Add appends r.
func (l *RunList) Add(r Run) {
	n := len(*l)
	if n == 0 || len((*l)[n-1]) == cap((*l)[n-1]) {
		size := 8
		if n > 0 {
			size = min(maxRunChunk, 2*cap((*l)[n-1]))
		}
		*l = append(*l, make([]Run, 0, size))
		n++
	}
	(*l)[n-1] = append((*l)[n-1], r)
}

// Len is the number of runs.
func (l RunList) Len() int {
	k := 0
	for _, c := range l {
		k += len(c)
	}
	return k
}

// Each calls fn for every run, in order.
func (l RunList) Each(fn func(Run)) {
	for _, c := range l {
		for _, r := range c {
			fn(r)
		}
	}
}

// MarshalCBOR encodes the runs as one flat array: the chunks are how this
// process happened to grow the list (a re-fold from a checkpoint grows it
// differently), and must not reach the state's hash.
func (l RunList) MarshalCBOR() ([]byte, error) {
	flat := make([]Run, 0, l.Len())
	l.Each(func(r Run) { flat = append(flat, r) })
	return encMode.Marshal(flat)
}

// UnmarshalCBOR decodes a flat array of runs.
func (l *RunList) UnmarshalCBOR(b []byte) error {
	var flat []Run
	if err := cbor.Unmarshal(b, &flat); err != nil {
		return err
	}
	*l = nil
	for _, r := range flat {
		l.Add(r)
	}
	return nil
}

// clone shares the runs: a chunk's runs never change once added, and the
// copy's last chunk has no spare capacity, so the copy's next Add starts a
// chunk of its own instead of writing where the original appends.
func (l RunList) clone() RunList {
	if l == nil {
		return nil
	}
	c := make(RunList, len(l))
	for i, ch := range l {
		c[i] = ch[:len(ch):len(ch)]
	}
	return c
}

// Run is one run of an item, as its machine reported it.
type Run struct {
	Item       int64  `cbor:"i"`
	Machine    string `cbor:"m"`
	Instance   string `cbor:"n,omitempty"`
	Started    int64  `cbor:"s,omitempty"` // unix ms, 0 if not reported
	DurationMS int64  `cbor:"d"`
	Code       int64  `cbor:"c"`
	Counted    bool   `cbor:"k"`           // the ledger took this run's result for the item
	Stopped    bool   `cbor:"x,omitempty"` // stopped before it ended (preempted, cancelled): no result
	OOMKilled  bool   `cbor:"o,omitempty"` // killed at its memory cap
	TimedOut   bool   `cbor:"t,omitempty"` // stopped at its item timeout
}

// Revocation records how a member lost a role, for conflict resolution.
type Revocation struct {
	Entry       OrderKey `cbor:"entry"`
	By          string   `cbor:"by"`
	ByRank      int      `cbor:"by_rank"`
	ByGrant     OrderKey `cbor:"by_grant"`
	Target      string   `cbor:"target"`
	TargetRank  int      `cbor:"target_rank"`
	TargetGrant OrderKey `cbor:"target_grant"`
	NewRank     int      `cbor:"new_rank"`
}

// State is the org as folded from the ledger.
type State struct {
	Org         string                 `cbor:"org"`
	Name        string                 `cbor:"name"`
	Description string                 `cbor:"description"`
	Owner       string                 `cbor:"owner"`
	Created     int64                  `cbor:"created"`
	Settings    Settings               `cbor:"settings"`
	OrgKeyID    string                 `cbor:"org_key_id"`
	Members     map[string]*Member     `cbor:"members"`
	Machines    map[string]*Machine    `cbor:"machines"`
	CapUses     map[string]int64       `cbor:"cap_uses"`
	Jobs        map[string]*Job        `cbor:"jobs"`
	JobSeq      int64                  `cbor:"job_seq"`
	Applied     int64                  `cbor:"applied"`     // entries with effect
	Ineffective int64                  `cbor:"ineffective"` // entries kept without effect
	Revoked     map[string]*Revocation `cbor:"revoked"`
	// Deleted: the owner deleted the org (org.delete); nothing after has
	// any effect. DeletedAt is that entry's advisory time.
	Deleted   bool  `cbor:"deleted"`
	DeletedAt int64 `cbor:"deleted_at"`
	// Contracts are the market's rentals by ID (issue 18); ContractSeq
	// counts their requests, in ledger order.
	Contracts   map[string]*Contract `cbor:"contracts"`
	ContractSeq int64                `cbor:"contract_seq"`
	// Datasets by name (nil until the first dataset.add).
	Datasets map[string]*Dataset `cbor:"datasets,omitempty"`
	// DatasetsRemoved is every removed dataset's owner, size and life, in
	// ledger order, for usage (usage.go); it only grows.
	DatasetsRemoved []DatasetSpan `cbor:"datasets_removed,omitempty"`
	// SSHKeys are persons' SSH public keys by person, in the order added
	// (nil until the first sshkey.add; fold_sshkeys.go).
	SSHKeys map[string][]SSHKey `cbor:"ssh_keys,omitempty"`
	// Budgets count, by machine, the entries without effect since the last
	// checkpoint, and name the one that passed the budget (log_budget.go);
	// nil after each checkpoint.
	Budgets map[string]Budget `cbor:"budgets,omitempty"`

	// frozen: published as a snapshot, never to change again; cow: what
	// this State owns of what it shares with a frozen one (cow.go).
	frozen bool
	cow    *cow
	// fh is a frozen State's hash, computed once (SnapshotHash).
	fh *frozenHash
	// left: where jobs that leave the State at a checkpoint go, shared
	// by every State folded from this one (archive.go).
	left *leftJobs
}

// NewState is the empty state before genesis.
func NewState() *State {
	return &State{
		Members:  map[string]*Member{},
		Machines: map[string]*Machine{},
		CapUses:  map[string]int64{},
		Jobs:     map[string]*Job{},
		Revoked:  map[string]*Revocation{},

		Contracts: map[string]*Contract{},
		left:      &leftJobs{},
	}
}

// Hash is the hex SHA-256 of the state's canonical encoding. Converged nodes
// have equal hashes.
func (s *State) Hash() string {
	hashes.Add(1)
	b, err := encMode.Marshal(s)
	if err != nil {
		panic("ledger: state does not encode: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Clone deep-copies the state (for checkpoints).
func (s *State) Clone() *State {
	c := *s
	c.frozen, c.cow, c.fh = false, nil, nil
	c.Members = make(map[string]*Member, len(s.Members))
	for k, v := range s.Members {
		m := *v
		c.Members[k] = &m
	}
	c.Machines = make(map[string]*Machine, len(s.Machines))
	for k, v := range s.Machines {
		m := *v
		m.History = append([]MachineEvent(nil), v.History...)
		c.Machines[k] = &m
	}
	c.CapUses = make(map[string]int64, len(s.CapUses))
	for k, v := range s.CapUses {
		c.CapUses[k] = v
	}
	c.Jobs = make(map[string]*Job, len(s.Jobs))
	for k, v := range s.Jobs {
		j := *v
		j.Items = v.Items.clone()
		j.Runs = v.Runs.clone()
		j.Machines = make(map[string]bool, len(v.Machines))
		for m := range v.Machines {
			j.Machines[m] = true
		}
		c.Jobs[k] = &j
	}
	c.Revoked = make(map[string]*Revocation, len(s.Revoked))
	for k, v := range s.Revoked {
		r := *v
		c.Revoked[k] = &r
	}
	c.Contracts = cloneContracts(s.Contracts)
	c.Datasets = cloneDatasets(s.Datasets)
	c.DatasetsRemoved = slices.Clip(s.DatasetsRemoved) // append-only: the copy's next append copies
	c.SSHKeys = cloneSSHKeys(s.SSHKeys)
	c.Budgets = maps.Clone(s.Budgets)
	return &c
}

// Role is a member's role, or "" for none.
func (s *State) Role(id string) string {
	if m := s.Members[id]; m != nil {
		return m.Role
	}
	return ""
}

// IsAdmin reports whether id is an admin or the owner.
func (s *State) IsAdmin(id string) bool { return RoleRank(s.Role(id)) >= 2 }

// SortedMachines lists machines by ID.
func (s *State) SortedMachines() []*Machine {
	out := make([]*Machine, 0, len(s.Machines))
	for _, m := range s.Machines {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// SortedMembers lists members by role rank (highest first), then ID.
func (s *State) SortedMembers() []*Member {
	out := make([]*Member, 0, len(s.Members))
	for _, m := range s.Members {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool {
		ri, rj := RoleRank(out[i].Role), RoleRank(out[j].Role)
		if ri != rj {
			return ri > rj
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// SortedJobs lists jobs in submission order.
func (s *State) SortedJobs() []*Job {
	out := make([]*Job, 0, len(s.Jobs))
	for _, j := range s.Jobs {
		out = append(out, j)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out
}

// weight estimates the cost of cloning the state, in items.
func (s *State) weight() int {
	w := len(s.Members) + len(s.Machines) + len(s.Revoked) + len(s.CapUses) + len(s.Contracts) + len(s.SSHKeys)
	for _, j := range s.Jobs {
		w += 1 + j.Items.Len() + len(j.Machines)
		if j.Archived != nil {
			w += len(j.Archived.Usage)
		}
	}
	return w
}
