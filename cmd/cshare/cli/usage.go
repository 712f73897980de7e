package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/ledger/jobspec"
	"github.com/cshare/cshare/node/api"
)

// orgUsageCmd is `org usage`: consumption per person and per machine over
// a window, like Slurm's sreport, computed from the ledger (the same on
// every node for the same window).
func (a *app) orgUsageCmd() *cobra.Command {
	var sinceS, untilS string
	var since, until int64
	c := &cobra.Command{
		Use:   "usage [--since T] [--until T]",
		Short: "Usage per person and per machine over a window, from the ledger (like sreport)",
		Long: `Usage per person and per machine over a window, computed from the ledger
alone, so any two nodes print the same for the same window: CPU-seconds
(run time × cores asked, one core when none), GPU-seconds, memory
MiB-seconds, items done and failed, jobs submitted, datasets held (bytes at
the end, byte-seconds over the window), and contract spend (as renter) and
earnings (as host). --since defaults to the org's creation, --until to now;
each takes a time like 2026-12-01T18:00:00Z or a date like 2026-12-01.`,
		Args: exactArgs(),
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			for _, x := range []struct {
				flag, v string
				out     *int64
			}{{"--since", sinceS, &since}, {"--until", untilS, &until}} {
				if x.v == "" {
					continue
				}
				t, err := parseOfferTime(x.v)
				if err != nil || t.UnixMilli() <= 0 {
					return usagef(cmd, "%s: %q: a time like 2026-12-01T18:00:00Z or a date like 2026-12-01, after 1970", x.flag, text.Clip(x.v))
				}
				*x.out = t.UnixMilli()
			}
			if since != 0 && until != 0 && until < since {
				return usagef(cmd, "--until: %s is before --since %s", untilS, sinceS)
			}
			return nil
		},
	}
	c.Flags().StringVar(&sinceS, "since", "", "the window's start (RFC 3339 or a date; default the org's creation)")
	c.Flags().StringVar(&untilS, "until", "", "the window's end (RFC 3339 or a date; default now)")
	return viewCmd(a, c, "print the usage as JSON",
		func(ctx context.Context, cl *api.Client, _ []string) (api.OrgUsage, error) {
			return cl.OrgUsage(ctx, since, until)
		},
		func(u api.OrgUsage) error { return printUsage(a, u) })
}

func printUsage(a *app, u api.OrgUsage) error {
	var t table
	t.row("PERSON", "NAME", "CPU", "GPU", "MEMORY (MiB-s)", "ITEMS DONE", "FAILED", "JOBS", "DATASETS", "SPENT", "EARNED")
	row := func(id, name string, x api.UsageTotals) {
		t.row(id, name, hours(x.CPUSeconds), hours(x.GPUSeconds), fmt.Sprintf("%.0f", x.MemoryMiBSeconds),
			fmt.Sprint(x.ItemsDone), fmt.Sprint(x.ItemsFailed), fmt.Sprint(x.Jobs), jobspec.FormatBytes(float64(x.DatasetBytes)),
			fmt.Sprintf("$%.6f", x.ContractSpendUSD), fmt.Sprintf("$%.6f", x.ContractEarnedUSD))
	}
	for _, p := range u.Persons {
		row(short(p.ID), text.Escape(orDash(p.Name)), p.UsageTotals)
	}
	row("total", "", u.Totals)
	if err := t.write(a.stdout); err != nil {
		return err
	}
	var m table
	m.row("MACHINE", "NAME", "CPU", "GPU")
	for _, x := range u.Machines {
		m.row(short(x.ID), text.Escape(orDash(x.Name)), hours(x.CPUSeconds), hours(x.GPUSeconds))
	}
	fmt.Fprintln(a.stdout)
	if err := m.write(a.stdout); err != nil {
		return err
	}
	_, err := fmt.Fprintf(a.stdout, "from %s until %s (CPU and GPU as core- and device-time)\n", u.Since, u.Until)
	return err
}

// hours renders seconds of a resource as a duration, to the second.
func hours(s float64) string {
	return (time.Duration(s) * time.Second).String()
}
