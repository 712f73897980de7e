package ledger

// Entry kinds. Each kind has one payload type below.
const (
	KindGenesis        = "org.genesis"
	KindOrgUpdate      = "org.update"
	KindOrgKey         = "org.key"
	KindOrgTransfer    = "org.transfer"
	KindOrgDelete      = "org.delete"
	KindMachineReg     = "machine.register"
	KindMachineApprove = "machine.approve"
	KindMachineReject  = "machine.reject"
	KindMachineRemove  = "machine.remove"
	KindMachineUpdate  = "machine.update"
	KindMemberRole     = "member.role"
	KindMemberRemove   = "member.remove"
	KindJobSubmit      = "job.submit"
	KindJobModify      = "job.modify"
	KindJobCancel      = "job.cancel"
	KindJobResults     = "job.results"
	KindMerge          = "ledger.merge"
	KindDatasetAdd     = "dataset.add"
	KindDatasetRm      = "dataset.rm"
	KindDatasetAccess  = "dataset.access"
	// Org policies (fold_policies.go): a job's first start and its end
	// at max_job_runtime, written by a machine that runs it.
	KindJobStart  = "job.start"
	KindJobExpire = "job.expire"
)

// Merge is the empty payload of a ledger.merge entry, which an approved
// machine writes only to name the ledger's heads as its parents: after a wave
// of concurrent writes, it folds the many heads into one. It changes nothing
// else.
type Merge struct{}

// Roles, from most to least powerful.
const (
	RoleOwner  = "owner"
	RoleAdmin  = "admin"
	RoleMember = "member"
)

// RoleRank orders roles: owner 3, admin 2, member 1, none 0.
func RoleRank(r string) int {
	switch r {
	case RoleOwner:
		return 3
	case RoleAdmin:
		return 2
	case RoleMember:
		return 1
	}
	return 0
}

// Genesis founds an org. Its author is the owner; its machine is approved.
type Genesis struct {
	Name        string   `cbor:"name"`
	Description string   `cbor:"description,omitempty"`
	MachineName string   `cbor:"machine_name,omitempty"`
	OrgKeyID    string   `cbor:"org_key_id"`
	Settings    Settings `cbor:"settings"`
	Nonce       []byte   `cbor:"nonce,omitempty"`
	// Owner is the founding person's delegation of the genesis machine, for
	// org GenesisOrg(Nonce). Without it the machine is its own person.
	Owner *Delegation `cbor:"owner,omitempty"`
}

// OrgUpdate changes org settings; nil fields are left alone.
type OrgUpdate struct {
	Name                   *string `cbor:"name,omitempty"`
	Description            *string `cbor:"description,omitempty"`
	RequireMachineApproval *bool   `cbor:"require_machine_approval,omitempty"`
	SmartShareMode         *string `cbor:"smartshare_mode,omitempty"`
	PreemptPolicy          *string `cbor:"preempt_policy,omitempty"`
	DefaultMaxCPUs         *int64  `cbor:"default_max_cpus,omitempty"`
	MaxCPUsLimit           *int64  `cbor:"max_cpus_limit,omitempty"`
	MarketDeleteAfter      *int64  `cbor:"market_delete_after,omitempty"` // ms
	// Policies sets org policies by name (PolicyNames, without the
	// "policy." prefix), in their stored units (ms, MB, counts); 0 removes
	// one.
	Policies map[string]int64 `cbor:"policies,omitempty"`
	// Ledger settings (checkpoint.go): a count of entries or a time (ms)
	// between checkpoints, and how long pruned history is kept (ms).
	LedgerCheckpointEvery   *int64 `cbor:"ledger_checkpoint_every,omitempty"`
	LedgerCheckpointEveryMS *int64 `cbor:"ledger_checkpoint_every_ms,omitempty"`
	LedgerRetainMS          *int64 `cbor:"ledger_retain_ms,omitempty"`
	// JobsRetainMS: how long a finished job stays in the State (ms, 0:
	// kept; archive.go).
	JobsRetainMS *int64 `cbor:"jobs_retain_ms,omitempty"`
}

// OrgKey rotates the org key: from this entry on, only capabilities of kind
// org-key with this ID admit machines.
type OrgKey struct {
	KeyID string `cbor:"key_id"`
}

// MachineRegister is written by a joining machine. Cap is the capability (org
// key or invite) it joined with, signed by an admin. Delegation names the
// person the machine acts for (none: the machine is its own person).
// Witness is an approved machine's countersignature of the redemption,
// required when NeedsWitness(Cap).
type MachineRegister struct {
	Name       string      `cbor:"name,omitempty"`
	Cap        Capability  `cbor:"cap"`
	Delegation *Delegation `cbor:"delegation,omitempty"`
	Witness    *Witness    `cbor:"witness,omitempty"`
}

// MachineRef names a machine (approve, reject, remove).
type MachineRef struct {
	Machine string `cbor:"machine"`
}

// MachineUpdate is written by a machine about itself: hardware and limits.
type MachineUpdate struct {
	Name     string   `cbor:"name,omitempty"`
	Hardware Hardware `cbor:"hardware"`
	Limits   Limits   `cbor:"limits"`
	Version  string   `cbor:"version,omitempty"`
}

// Hardware is what a machine has.
type Hardware struct {
	CPUs     int64 `cbor:"cpus" json:"cpus"`
	MemoryMB int64 `cbor:"memory_mb" json:"memory_mb"`
	DiskMB   int64 `cbor:"disk_mb" json:"disk_mb"`
	GPUs     []GPU `cbor:"gpus,omitempty" json:"gpus"`
}

// GPU is one device of a machine.
type GPU struct {
	Index    int64  `cbor:"index" json:"index"`
	UUID     string `cbor:"uuid" json:"uuid"`
	Name     string `cbor:"name" json:"name"`
	MemoryMB int64  `cbor:"memory_mb" json:"memory_mb"`
}

// Limits is how much of a machine the org may use (node.yaml's resources,
// docs/design.md §3.9).
type Limits struct {
	CPULimit          int64      `cbor:"cpu_limit" json:"cpu_limit"`
	MemoryLimit       int64      `cbor:"memory_limit" json:"memory_limit"`
	DiskLimit         int64      `cbor:"disk_limit" json:"disk_limit"`
	MaxConcurrentJobs int64      `cbor:"max_concurrent_jobs" json:"max_concurrent_jobs"`
	GPUs              []GPULimit `cbor:"gpus,omitempty" json:"gpus,omitempty"`
}

// GPULimit is a GPU a machine offers, with the memory it offers on it.
type GPULimit struct {
	Device   int64 `cbor:"device" json:"device"`
	MemoryMB int64 `cbor:"memory" json:"memory"`
}

// MemberRole sets a member's role.
type MemberRole struct {
	Member string `cbor:"member"`
	Role   string `cbor:"role"`
}

// MemberRef names a member, a person ID (remove; the author's person
// removing itself is leaving).
type MemberRef struct {
	Member string `cbor:"member"`
}

// JobSpec is what a job submission carries.
type JobSpec struct {
	Name       string            `cbor:"name,omitempty" json:"name,omitempty"`
	Image      string            `cbor:"image,omitempty" json:"image,omitempty"`
	Driver     string            `cbor:"driver" json:"driver"`
	Cmd        []string          `cbor:"cmd" json:"cmd"`
	Env        map[string]string `cbor:"env,omitempty" json:"env,omitempty"`
	Cores      int64             `cbor:"cores,omitempty" json:"cores,omitempty"` // millicores per instance
	MemoryMB   int64             `cbor:"memory_mb,omitempty" json:"memory_mb,omitempty"`
	GPUs       int64             `cbor:"gpus,omitempty" json:"gpus,omitempty"`
	RangeStart int64             `cbor:"range_start" json:"range_start"`
	RangeEnd   int64             `cbor:"range_end" json:"range_end"`
	Priority   int64             `cbor:"priority" json:"priority"`
	CPUs       int64             `cbor:"cpus" json:"cpus"`
	MaxCPUs    *int64            `cbor:"max_cpus,omitempty" json:"max_cpus,omitempty"` // nil: org default; -1: "*"
	Retries    int64             `cbor:"retries,omitempty" json:"retries,omitempty"`
	// DiskMB is the disk an instance may fill (its writable layer or work
	// directory); placement counts it against the machine's disk_limit.
	DiskMB int64 `cbor:"disk_mb,omitempty" json:"disk_mb,omitempty"`
	// GPUMemoryMB: only GPUs with at least this much memory are used.
	GPUMemoryMB int64 `cbor:"gpu_memory_mb,omitempty" json:"gpu_memory_mb,omitempty"`
	// ItemTimeoutMS: a run of an item that lasts longer is stopped and
	// fails (0: the org's policy.default_item_timeout, if any).
	ItemTimeoutMS int64  `cbor:"item_timeout_ms,omitempty" json:"item_timeout_ms,omitempty"`
	Nonce         []byte `cbor:"nonce,omitempty" json:"-"`
	// Datasets are mounted read-only into every instance (dataset.go).
	Datasets []DatasetMount `cbor:"datasets,omitempty" json:"datasets,omitempty"`
	// Entrypoint replaces the image's entrypoint (docker; exec: the
	// program), with Cmd as its arguments, which may then be none.
	Entrypoint string `cbor:"entrypoint,omitempty" json:"entrypoint,omitempty"`
	// RegistryAuth is the submitter's registry credentials for Image,
	// sealed with age to the approved machines' recipients
	// (internal/regauth). Never shown (json "-").
	RegistryAuth []byte `cbor:"registry_auth,omitempty" json:"-"`
}

// JobModify changes a job (qbmodify); nil fields are left alone.
type JobModify struct {
	Job      string `cbor:"job"`
	MaxCPUs  *int64 `cbor:"max_cpus,omitempty"`
	Priority *int64 `cbor:"priority,omitempty"`
}

// JobRef names a job (cancel).
type JobRef struct {
	Job string `cbor:"job"`
}

// JobResults is one machine's batch of finished agenda items.
type JobResults struct {
	Job     string       `cbor:"job"`
	Results []ItemResult `cbor:"results"`
}

// ItemResult is the outcome of one run of one agenda item.
type ItemResult struct {
	Item       int64  `cbor:"item"`
	Code       int64  `cbor:"code"`
	DurationMS int64  `cbor:"duration_ms"`
	OutputSize int64  `cbor:"output_size"`
	Instance   string `cbor:"instance,omitempty"`
	Error      string `cbor:"error,omitempty"`
	Started    int64  `cbor:"started,omitempty"` // unix ms when the run started (0: not known)
	// Stopped: the run was stopped before it ended (preempted, its job
	// cancelled, ...): a real run, but no result; the item stays pending.
	Stopped bool `cbor:"stopped,omitempty"`
	// OOMKilled: the run was killed at its memory cap. TimedOut: it was
	// stopped at its item timeout. Both are failures like any other.
	OOMKilled bool `cbor:"oom,omitempty"`
	TimedOut  bool `cbor:"timeout,omitempty"`
}
