package jobsvc

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/node/sched"
	"github.com/cshare/cshare/p2p"
	"github.com/cshare/cshare/smartshare"
)

// Info renders job j, whoever may see it (tests); see jobInfo.
func (s *Service) Info(j *ledger.Job) api.JobInfo { return s.jobInfo(j) }

// jobInfo renders a job with its live instances from the current plan.
func (s *Service) jobInfo(j *ledger.Job) api.JobInfo {
	ji := api.JobInfo{ID: j.ID, Name: j.Spec.Name, Submitter: j.Submitter, Priority: j.Priority, CPUs: j.Spec.CPUs,
		Driver: j.Spec.Driver, Image: j.Spec.Image, Cmd: j.Spec.Cmd, Range: fmt.Sprintf("%d-%d", j.Spec.RangeStart, j.Spec.RangeEnd),
		Cores: j.Spec.Cores, MemoryMB: j.Spec.MemoryMB, GPUs: j.Spec.GPUs, Retries: j.Spec.Retries, Error: j.Error,
		DiskMB: j.Spec.DiskMB, GPUMemoryMB: j.Spec.GPUMemoryMB, RegistryAuth: len(j.Spec.RegistryAuth) > 0,
		Submitted: api.FormatTime(time.UnixMilli(j.Submitted)), Instances: []api.InstanceInfo{}}
	ji.MaxCPUs = "default"
	if j.MaxCPUs != nil {
		ji.MaxCPUs = strconv.FormatInt(*j.MaxCPUs, 10)
		if *j.MaxCPUs < 0 {
			ji.MaxCPUs = "*"
		}
	}
	if j.Ended != 0 {
		ji.Ended = api.FormatTime(time.UnixMilli(j.Ended))
	}
	ji.Items = api.Items{Total: j.Total(), Done: j.Done, Failed: j.Failed}
	for _, m := range j.Spec.Datasets {
		ji.Datasets = append(ji.Datasets, api.DatasetMount{Name: m.Name, CID: m.CID, Path: m.Path})
	}
	ji.DuplicateRuns = j.Duplicates
	view := s.d.Scheduler.View()
	plan := view.Plan
	// What actually runs: from heartbeats (others) and local truth (this node).
	type key struct {
		m string
		s int
	}
	type live struct {
		item int64
		use  sched.Use
	}
	running := map[key]live{}
	me := s.d.Machine
	for _, seen := range s.d.Peers.OnlinePeers(s.now()) {
		for _, ri := range sched.ActiveInstances(seen.Heartbeat) {
			if ri.Job == j.ID {
				running[key{seen.Heartbeat.Machine, int(ri.Slot)}] = live{ri.Item, sched.Use{CPUMilli: ri.CPUMilli, MemoryBytes: ri.MemoryMB << 20, OOMKilled: ri.OOMKilled}}
			}
		}
	}
	for _, in := range view.Instances {
		if in.Job == j.ID {
			running[key{me, in.Slot}] = live{in.Item, in.Use}
		}
	}
	withUse := func(ii api.InstanceInfo, l live) api.InstanceInfo {
		if l.item >= 0 {
			ii.Item = l.item
		}
		ii.CPUPercent, ii.MemoryBytes, ii.OOMKilled = float64(l.use.CPUMilli)/10, l.use.MemoryBytes, l.use.OOMKilled
		return ii
	}
	names := map[string]string{}
	s.snapshot(func(st *ledger.State) {
		for id, m := range st.Machines {
			names[id] = m.Name
		}
		ji.SubmitterName = st.PersonName(j.Submitter)
		ji.ItemTimeoutMS = sched.ItemTimeout(st, j).Milliseconds()
	})
	if j.State == ledger.JobActive {
		preempt := map[key]string{}
		for _, p := range plan.Preempt {
			if p.Job == j.ID {
				preempt[key{p.Machine, p.Slot}] = p.Mode
			}
		}
		seen := map[key]bool{}
		for _, pi := range plan.Instances {
			if pi.Job != j.ID {
				continue
			}
			k := key{pi.Machine, pi.Slot}
			seen[k] = true
			state := "starting"
			l, ok := running[k]
			if ok {
				state = "running"
			}
			ii := api.InstanceInfo{Machine: pi.Machine, MachineName: names[pi.Machine], Slot: pi.Slot, Kind: pi.Kind, State: state}
			if ok {
				ii = withUse(ii, l)
			}
			ji.Instances = append(ji.Instances, ii)
		}
		for k, l := range running {
			if seen[k] {
				continue
			}
			state := "stopping"
			if m := preempt[k]; m != "" {
				state = "preempting (" + m + ")"
			}
			ji.Instances = append(ji.Instances, withUse(api.InstanceInfo{Machine: k.m, MachineName: names[k.m], Slot: k.s, Kind: "secondary", State: state}, l))
		}
		for i, in := range ji.Instances {
			if p, err := peer.Decode(in.Machine); err == nil && in.Machine != s.d.Machine {
				ji.Instances[i].Relayed = s.d.Host.Path(p) == p2p.PathRelayed
			}
		}
		sort.Slice(ji.Instances, func(a, b int) bool {
			if ji.Instances[a].Machine != ji.Instances[b].Machine {
				return ji.Instances[a].Machine < ji.Instances[b].Machine
			}
			return ji.Instances[a].Slot < ji.Instances[b].Slot
		})
		for _, l := range running {
			if l.item >= 0 {
				ji.Items.Running++
			}
		}
		for _, js := range plan.Jobs {
			if js.ID == j.ID {
				ji.Reason = reasonText(js.Reason)
				if js.Reason == smartshare.ReasonNotMet {
					s.snapshot(func(st *ledger.State) {
						if why := sched.Unfit(st, j.Spec); why != "" {
							ji.Reason = sched.UnfitReason(why)
						}
					})
				}
			}
		}
		if len(plan.Jobs) == 0 && len(ji.Instances) == 0 {
			ji.Reason = reasonText("no_machine_available")
		}
		if r := s.d.Fetches.FetchReason(j); r != "" {
			ji.Reason = r
		}
	}
	ji.Items.Pending = ji.Items.Total - ji.Items.Done - ji.Items.Failed - ji.Items.Running
	if ji.Items.Pending < 0 {
		ji.Items.Pending = 0
	}
	switch j.State {
	case ledger.JobActive:
		ji.State = "queued"
		if ji.Items.Running > 0 {
			ji.State = "running"
		}
	default:
		ji.State = j.State
	}
	switch {
	case j.State == ledger.JobActive && j.Queued != "":
		// Held by the org's policy (ledger/fold_policies.go): no machine
		// places it, whatever the plan says.
		ji.State, ji.Reason = "queued", j.Queued
	case j.State == ledger.JobFailed && strings.HasPrefix(j.Error, "policy."):
		ji.Reason = j.Error // ended by a policy (max_job_runtime)
	}
	return ji
}

func reasonText(code string) string {
	switch code {
	case "":
		return ""
	case "no_machine_available":
		return "no_machine_available: no online machine has a free slot for it (all are busy with equal or higher priority work, offline, or pending approval)"
	case "resource_limits":
		return "resource_limits: machines have free slots but their remaining cores, memory or GPUs (resource limits) are too small for one instance"
	case "requirements_not_met":
		return "requirements_not_met: no machine of the org could ever fit one instance (cores, memory or GPUs per instance exceed every machine's limits)"
	case "smartshare_disabled":
		return "smartshare_disabled: it runs only its primaries (max_cpus 0, or the org's smartshare.mode is none)"
	case "preempted_by_higher_priority":
		return "preempted_by_higher_priority: its instances went to jobs of higher priority"
	}
	return code
}
