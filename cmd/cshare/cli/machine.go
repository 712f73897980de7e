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

func (a *app) machineCmd() *cobra.Command {
	return group("machine", "List, show, approve, reject and remove the org's machines",
		a.machineLsCmd(), a.machineShowCmd(),
		a.machineActionCmd("approve", "Approve a pending machine (admins)", "approved"),
		a.machineActionCmd("reject", "Reject a pending machine (admins)", "rejected"),
		a.machineActionCmd("remove", "Take a machine out of the org (admins, or its own person); its person stays a member", "removed"),
	)
}

func (a *app) machineLsCmd() *cobra.Command {
	c := &cobra.Command{Use: "ls", Aliases: []string{"list"}, Short: "List the org's machines", Args: exactArgs()}
	return listCmd(a, c, "machines", []string{"ID", "NAME", "STATUS", "LAST HEARTBEAT", "RUNNING", "TOTAL JOBS", "CPUS", "MEM", "GPUS", "OWNER"},
		func(ctx context.Context, cl *api.Client, _ []string, p api.Page, emit func(api.MachineInfo) error) error {
			return cl.EachMachine(ctx, p, emit)
		},
		func(m api.MachineInfo) []string {
			return []string{short(m.ID), orDash(m.Name), machineStatusOf(m), a.ago(m.LastHeartbeat),
				fmt.Sprint(m.RunningJobs), itoa(m.TotalJobs), itoa(m.Hardware.CPUs),
				mib(m.Hardware.MemoryMB), fmt.Sprint(len(m.Hardware.GPUs)), ownerCell(m)}
		},
		func(m api.MachineInfo) string { return m.ID })
}

// machineStatusOf is a machine's status for people, with "disk full" when
// its data dir is below its reserve.
func machineStatusOf(m api.MachineInfo) string {
	if m.DiskFull {
		return machineStatus(m.Status) + ", disk full"
	}
	return machineStatus(m.Status)
}

// ownerCell is a machine's person for a table: their name, else the short
// ID.
func ownerCell(m api.MachineInfo) string {
	if m.OwnerName != "" && m.OwnerName != m.Owner {
		return m.OwnerName
	}
	return orDash(short(m.Owner))
}

func (a *app) machineShowCmd() *cobra.Command {
	c := &cobra.Command{Use: "show ID", Short: "Show one machine: its person, hardware, limits, addresses, history", Args: exactArgs("ID")}
	return viewCmd(a, c, "print the machine as JSON",
		func(ctx context.Context, cl *api.Client, args []string) (api.MachineInfo, error) {
			return cl.Machine(ctx, args[0])
		},
		func(m api.MachineInfo) error { return printMachine(a, m) })
}

func printMachine(a *app, m api.MachineInfo) error {
	l := m.Limits
	pairs := [][2]string{
		{"id", m.ID},
		{"name", orDash(m.Name)},
		{"status", machineStatusOf(m)},
		{"owner", personRef(m.Owner, m.OwnerName)},
		{"last heartbeat", a.ago(m.LastHeartbeat)},
		{"registered", orDash(m.Registered)},
		{"version", orDash(m.Version)},
		{"addrs", orDash(strings.Join(m.Addrs, ", "))},
		{"running jobs", fmt.Sprint(m.RunningJobs)},
		{"total jobs", itoa(m.TotalJobs)},
		{"cpus", itoa(m.Hardware.CPUs)},
		{"memory", mib(m.Hardware.MemoryMB)},
		{"disk", mib(m.Hardware.DiskMB)},
		{"gpus", fmt.Sprint(len(m.Hardware.GPUs))},
		{"cpu_limit", fmt.Sprintf("%d%%", l.CPULimit)},
		{"memory_limit", mib(l.MemoryLimit)},
		{"disk_limit", mib(l.DiskLimit)},
		{"max_concurrent_jobs", itoa(l.MaxConcurrentJobs)},
	}
	if f := m.Free; f != nil {
		pairs = append(pairs, [2]string{"free", fmt.Sprintf("%s cores, %s memory, %s disk, %d gpus, %d slots",
			cores(f.Cores), mib(f.MemoryMB), mib(f.DiskMB), f.GPUs, f.Slots)})
	}
	if u := m.Usage; u != nil {
		pairs = append(pairs, [2]string{"in use", fmt.Sprintf("%.1f%% cpu, %s memory, %s disk, by %d instances",
			u.CPUPercent, jobspec.FormatBytes(float64(u.MemoryBytes)), mib(u.DiskUsedMB), u.Instances)})
	}
	if err := kv(a.stdout, pairs...); err != nil {
		return err
	}
	if len(m.History) > 0 {
		fmt.Fprintln(a.stdout)
		var t table
		t.row("HISTORY", "TIME", "BY")
		for _, ev := range m.History {
			by := ev.By
			if ev.ByName != "" {
				by = ev.ByName + " (" + ev.By + ")"
			}
			t.row(ev.Status, orDash(ev.Time), orDash(by))
		}
		if err := t.write(a.stdout); err != nil {
			return err
		}
	}
	if len(m.Hardware.GPUs) > 0 {
		offered := map[int64]int64{}
		for _, g := range l.GPUs {
			offered[g.Device] = g.MemoryMB
		}
		fmt.Fprintln(a.stdout)
		var t table
		t.row("GPU", "NAME", "MEMORY", "OFFERED", "UUID")
		for _, g := range m.Hardware.GPUs {
			off := "-"
			if mb, ok := offered[g.Index]; ok {
				off = mib(mb)
			}
			t.row(itoa(g.Index), orDash(g.Name), mib(g.MemoryMB), off, orDash(g.UUID))
		}
		return t.write(a.stdout)
	}
	return nil
}

func (a *app) machineActionCmd(action, short, done string) *cobra.Command {
	return &cobra.Command{
		Use:   action + " ID",
		Short: short,
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := a.client()
			if err != nil {
				return err
			}
			m, err := cl.MachineAction(cmd.Context(), args[0], action)
			if err != nil {
				return err
			}
			name := m.ID
			if m.Name != "" {
				name = text.Escape(m.Name) + " (" + m.ID + ")"
			}
			_, err = fmt.Fprintf(a.stdout, "%s machine %s; status %s\n", done, name, orDash(m.Status))
			return err
		},
	}
}
