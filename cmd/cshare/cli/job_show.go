package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/ledger/jobspec"
	"github.com/cshare/cshare/node/api"
)

// jobShowCmd is `job show ID`: the job (printJob), or with --explain why
// it waits, machine by machine (printExplain; Vast's --explain).
func (a *app) jobShowCmd() *cobra.Command {
	var explain bool
	c := &cobra.Command{Use: "show ID [--explain]", Short: "Show a job: spec, progress, instances, and why it has no more (--explain: machine by machine)",
		Args: exactArgs("ID")}
	c = viewCmd(a, c, "print the job as JSON (with --explain: the explanation)",
		func(ctx context.Context, cl *api.Client, args []string) (any, error) {
			if explain {
				return cl.ExplainJob(ctx, args[0])
			}
			return cl.Job(ctx, args[0])
		},
		func(v any) error {
			if x, ok := v.(api.JobExplain); ok {
				return printExplain(a, x)
			}
			return printJob(a, v.(api.JobInfo))
		})
	c.Flags().BoolVar(&explain, "explain", false, "say why the job waits, machine by machine: not approved, offline, lacks GPUs or memory, a policy, busy with jobs of higher priority...")
	return c
}

// printExplain prints a job's explanation: its reason and what the plan
// gives it, then one row per machine.
func printExplain(a *app, x api.JobExplain) error {
	pairs := [][2]string{
		{"job", x.Job + " (" + orDash(x.Name) + ")"},
		{"state", x.State},
		{"instances", fmt.Sprintf("%d planned of %d it could use; %d items left", x.Planned, x.Wanted, x.PendingItems)},
	}
	if x.Reason != "" {
		pairs = append(pairs, [2]string{"reason", x.Reason})
	}
	if err := kv(a.stdout, pairs...); err != nil || len(x.Machines) == 0 {
		return err // an ended job: nothing waits
	}
	fmt.Fprintln(a.stdout)
	var t table
	t.row("MACHINE", "NAME", "STATUS", "INSTANCES", "WHY")
	for _, m := range x.Machines {
		t.row(short(m.Machine), orDash(m.Name), machineWaitStatus(m), itoa(int64(m.Instances)), orDash(waitReasons(m.Reasons)))
	}
	return t.write(a.stdout)
}

// machineWaitStatus is the ledger's status, or online/offline for an
// approved machine.
func machineWaitStatus(m api.MachineWaits) string {
	switch {
	case m.Status != "approved":
		return m.Status
	case m.Online:
		return "online"
	}
	return "offline"
}

func waitReasons(rs []api.WaitReason) string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Code+": "+r.Text)
	}
	return strings.Join(out, "; ")
}

func printJob(a *app, j api.JobInfo) error {
	res := []string{}
	if j.Cores > 0 {
		res = append(res, cores(j.Cores)+" cores")
	}
	if j.MemoryMB > 0 {
		res = append(res, mib(j.MemoryMB)+" memory")
	}
	if j.GPUs > 0 {
		res = append(res, fmt.Sprintf("%d gpus", j.GPUs))
	}
	if j.GPUMemoryMB > 0 {
		res = append(res, mib(j.GPUMemoryMB)+" or more per gpu")
	}
	if j.DiskMB > 0 {
		res = append(res, mib(j.DiskMB)+" disk")
	}
	it := j.Items
	pairs := [][2]string{
		{"id", j.ID},
		{"name", orDash(j.Name)},
		{"state", j.State},
		{"priority", itoa(j.Priority)},
		{"cpus", itoa(j.CPUs)},
		{"max_cpus", orDash(j.MaxCPUs)},
		{"driver", orDash(j.Driver)},
		{"image", orDash(j.Image)},
		{"command", quoteArgs(j.Cmd)},
		{"range", orDash(j.Range)},
		{"per instance", orDash(strings.Join(res, ", "))},
		{"retries", itoa(j.Retries)},
		{"item timeout", msOrNone(j.ItemTimeoutMS)},
		{"items", fmt.Sprintf("%d/%d done, %d failed, %d running, %d pending", it.Done, it.Total, it.Failed, it.Running, it.Pending)},
		{"duplicate runs", itoa(j.DuplicateRuns)},
		{"instances", instances(j) + " (running/primaries+secondaries)"},
		{"submitter", personRef(j.Submitter, j.SubmitterName)},
		{"submitted", orDash(j.Submitted)},
	}
	if j.Ended != "" {
		pairs = append(pairs, [2]string{"ended", j.Ended})
	}
	for _, d := range j.Datasets {
		pairs = append(pairs, [2]string{"dataset", fmt.Sprintf("%s (%s) at %s, read-only", d.Name, d.CID, d.Path)})
	}
	if j.Reason != "" {
		pairs = append(pairs, [2]string{"reason", j.Reason})
	}
	if j.Error != "" {
		pairs = append(pairs, [2]string{"error", j.Error})
	}
	if err := kv(a.stdout, pairs...); err != nil {
		return err
	}
	if len(j.Instances) == 0 {
		return nil
	}
	fmt.Fprintln(a.stdout)
	var t table
	t.row("MACHINE", "NAME", "SLOT", "KIND", "STATE", "ITEM", "CPU", "MEMORY")
	for _, in := range j.Instances {
		item := "-"
		if in.Item != 0 {
			item = itoa(in.Item)
		}
		cpu, mem := "-", "-"
		if in.CPUPercent > 0 || in.MemoryBytes > 0 {
			cpu, mem = fmt.Sprintf("%.1f%%", in.CPUPercent), jobspec.FormatBytes(float64(in.MemoryBytes))
		}
		if in.OOMKilled {
			mem += " (last run oom_killed)"
		}
		t.row(short(in.Machine), orDash(in.MachineName), fmt.Sprint(in.Slot), in.Kind, in.State, item, cpu, mem)
	}
	if err := t.write(a.stdout); err != nil {
		return err
	}
	if r := relayedMachines(j.Instances); r != "" {
		_, err := fmt.Fprintf(a.stdout, "\nreached through a relay (no direct connection yet; their items' output comes through it, slower): %s\n", r)
		return err
	}
	return nil
}

// relayedMachines names the machines of ins this node reaches only through
// a relay, once each, in order.
func relayedMachines(ins []api.InstanceInfo) string {
	var out []string
	seen := map[string]bool{}
	for _, in := range ins {
		if in.Relayed && !seen[in.Machine] {
			seen[in.Machine] = true
			name := short(in.Machine)
			if in.MachineName != "" {
				name = text.Escape(in.MachineName) + " (" + name + ")"
			}
			out = append(out, name)
		}
	}
	return strings.Join(out, ", ")
}
