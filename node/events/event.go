// Package events is the node's event bus (docs/design.md §26): what the
// node sees change (ledger entries, machines going on- and offline, items
// and jobs ending, contracts, members, settings), as numbered events kept
// in a bounded ring and handed to subscribers (GET /v1/events, the
// dashboard, cshare events) and to hooks (node.yaml's notify webhooks).
//
// Derive (derive.go) is a pure core: it turns a ledger state, the entries
// just added and what the node sees of its peers into events, with the
// time passed in; it reads the results of job.results entries again
// (results.go) for the item events. The Bus (bus.go) numbers and keeps
// them.
package events

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Topics.
const (
	TopicMachines  = "machines"
	TopicJobs      = "jobs"
	TopicLedger    = "ledger"
	TopicContracts = "contracts"
	TopicOrg       = "org"
)

// AllTopics are the topics in the order they are listed in errors.
var AllTopics = []string{TopicMachines, TopicJobs, TopicLedger, TopicContracts, TopicOrg}

// Event types.
const (
	LedgerEntry     = "ledger.entry"
	MachineOnline   = "machine.online"
	MachineOffline  = "machine.offline"
	MachinePending  = "machine.pending"
	MachineApproved = "machine.approved"
	MachineRejected = "machine.rejected"
	MachineRemoved  = "machine.removed"
	MachineCapped   = "machine.capped" // capped.go
	JobSubmitted    = "job.submitted"
	JobDone         = "job.done"
	JobFailed       = "job.failed"
	JobCancelled    = "job.cancelled"
	ItemDone        = "item.done"
	ItemFailed      = "item.failed"
	ContractCreated = "contract.created"
	ContractStarted = "contract.started"
	ContractStopped = "contract.stopped"
	ContractEnding  = "contract.ending"
	MemberJoined    = "member.joined"
	MemberRemoved   = "member.removed"
	SettingsChanged = "settings.changed"
)

// typeTopic is every event type's topic.
var typeTopic = map[string]string{
	LedgerEntry:   TopicLedger,
	MachineOnline: TopicMachines, MachineOffline: TopicMachines, MachinePending: TopicMachines,
	MachineApproved: TopicMachines, MachineRejected: TopicMachines, MachineRemoved: TopicMachines, MachineCapped: TopicMachines,
	JobSubmitted: TopicJobs, JobDone: TopicJobs, JobFailed: TopicJobs, JobCancelled: TopicJobs,
	ItemDone: TopicJobs, ItemFailed: TopicJobs,
	ContractCreated: TopicContracts, ContractStarted: TopicContracts, ContractStopped: TopicContracts, ContractEnding: TopicContracts,
	MemberJoined: TopicOrg, MemberRemoved: TopicOrg, SettingsChanged: TopicOrg,
}

// Types are every event type, sorted.
func Types() []string {
	out := make([]string, 0, len(typeTopic))
	for t := range typeTopic {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// TopicOf is an event type's topic ("" for an unknown type).
func TopicOf(typ string) string { return typeTopic[typ] }

// Event is one thing the node saw change. Its JSON is the data of one
// server-sent event of GET /v1/events; empty fields are left out.
type Event struct {
	ID       uint64         `json:"id"`
	Type     string         `json:"type"`
	Topic    string         `json:"topic"`
	Time     time.Time      `json:"time"`
	Machine  string         `json:"machine,omitempty"`
	Job      string         `json:"job,omitempty"`
	Item     *int64         `json:"item,omitempty"`
	Contract string         `json:"contract,omitempty"`
	Data     map[string]any `json:"data,omitempty"`
	// Mine says this node is the one of the org that notifies of the
	// event (node.yaml notify; the rule is Derive's): every node sees it,
	// one sends it.
	Mine bool `json:"-"`
}

// Topics is a set of topics; nil or empty is every topic.
type Topics []string

// ParseTopics reads a comma-separated list of topics ("" is every topic).
func ParseTopics(s string) (Topics, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out Topics
	for _, t := range strings.Split(s, ",") {
		t = strings.TrimSpace(t)
		if typeTopicKnown(t) {
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
			continue
		}
		if len(t) > 40 {
			t = t[:40] + "…"
		}
		return nil, fmt.Errorf("topics: %q is not a topic; allowed: %s", t, strings.Join(AllTopics, ", "))
	}
	return out, nil
}

func typeTopicKnown(t string) bool { return slices.Contains(AllTopics, t) }

// Has says t is one of the topics (every topic when ts is empty).
func (ts Topics) Has(t string) bool { return len(ts) == 0 || slices.Contains(ts, t) }

// CheckTypes checks a list of event types (node.yaml notify's events):
// each must be known. field names the list in the error.
func CheckTypes(field string, types []string) error {
	if len(types) == 0 {
		return fmt.Errorf("%s: empty; list event types, of: %s", field, strings.Join(Types(), ", "))
	}
	for _, t := range types {
		if _, ok := typeTopic[t]; !ok {
			return fmt.Errorf("%s: %q is not an event type; allowed: %s", field, t, strings.Join(Types(), ", "))
		}
	}
	return nil
}
