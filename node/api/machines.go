package api

import "github.com/cshare/cshare/ledger"

// MachineInfo is one row of `cshare machine ls --json`.
type MachineInfo struct {
	ID            string          `json:"id"`
	Name          string          `json:"name"`
	Status        string          `json:"status"`
	Owner         string          `json:"owner"`
	OwnerName     string          `json:"owner_name,omitempty"`
	LastHeartbeat string          `json:"last_heartbeat"`
	RunningJobs   int             `json:"running_jobs"`
	TotalJobs     int64           `json:"total_jobs"`
	Hardware      ledger.Hardware `json:"hardware"`
	Limits        ledger.Limits   `json:"limits"`
	Addrs         []string        `json:"addrs,omitempty"`
	Version       string          `json:"version,omitempty"`
	Registered    string          `json:"registered,omitempty"`
	Free          *Resources      `json:"free,omitempty"`
	// DiskFull: the machine's data dir is below its disk reserve, as its
	// last heartbeat says: it refuses writes and takes no new item until
	// there is room again.
	DiskFull bool `json:"disk_full,omitempty"`
	// Capped: every node refuses what the machine sends until the next
	// checkpoint: it wrote more than ledger.IneffectiveBudget entries
	// without effect since the last one (docs/design.md §5.8).
	Capped bool `json:"capped,omitempty"`
	// Usage is what the machine's jobs use now, from its last heartbeat.
	Usage *MachineUse `json:"usage,omitempty"`
	// History is every change of its ledger status, oldest first (machine
	// show only).
	History []MachineEvent `json:"history,omitempty"`
	// AgeRecipient is an approved machine's age X25519 public key, from
	// its heartbeat: job submit --registry-auth seals to it.
	AgeRecipient string `json:"age_recipient,omitempty"`
}

// MachineEvent is one change of a machine's ledger status: the status, when
// (RFC 3339) and by which person.
type MachineEvent struct {
	Status string `json:"status"`
	Time   string `json:"time"`
	By     string `json:"by,omitempty"`      // the person who made the change
	ByName string `json:"by_name,omitempty"` // their name
}

// MachineUse is what a machine's instances use now: CPU (100 per busy
// core) and memory, summed over their runs as the drivers last sampled
// them, and the disk cshare's runs, outputs and datasets fill there.
type MachineUse struct {
	Instances   int     `json:"instances"`
	CPUPercent  float64 `json:"cpu_percent"`
	MemoryBytes int64   `json:"memory_bytes"`
	DiskUsedMB  int64   `json:"disk_used_mb"`
}
