package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cshare/cshare/ledger/jobspec"
	"github.com/cshare/cshare/market"
	"github.com/cshare/cshare/node/api"
)

func (a *app) offerCmd() *cobra.Command {
	return group("offer", "Offer part of this machine for rent, and search the org's offers",
		a.offerCreateCmd(), a.offerLsCmd(), a.offerRmCmd())
}

func (a *app) offerCreateCmd() *cobra.Command {
	var price, diskPrice, memory, disk, until, forS, minS string
	var gpus, cpus int64
	var req api.OfferCreate
	c := &cobra.Command{
		Use:   "create --price DOLLARS_PER_HOUR [--gpus N] [--cpus N] [--memory SIZE] [--disk SIZE] [--disk-price DOLLARS_PER_GB_MONTH] [--until TIME | --for DURATION] [--min-duration D]",
		Short: "Sign an offer for part of this machine (its owner), publish it to the org, and print its ID",
		Args:  exactArgs(),
		PreRunE: func(cmd *cobra.Command, args []string) error {
			if price == "" {
				return usagef(cmd, "--price is required: dollars per hour, like --price 1.5")
			}
			req = api.OfferCreate{Price: price, DiskPrice: diskPrice}
			f := cmd.Flags()
			if f.Changed("gpus") {
				req.GPUs = &gpus
			}
			if f.Changed("cpus") {
				req.CPUs = &cpus
			}
			for _, s := range []struct {
				flag, v string
				dst     **int64
			}{{"memory", memory, &req.MemoryMB}, {"disk", disk, &req.DiskMB}} {
				if s.v == "" {
					continue
				}
				mb, err := jobspec.ParseSizeMB("--"+s.flag, s.v)
				if err != nil {
					return usagef(cmd, "%v", err)
				}
				*s.dst = &mb
			}
			if until != "" && forS != "" {
				return usagef(cmd, "--until and --for both set the offer's end: give one")
			}
			if until != "" {
				t, err := parseOfferTime(until)
				if err != nil {
					return usagef(cmd, "--until: %v", err)
				}
				req.Until = t.UnixMilli()
			}
			if forS != "" {
				d, err := parseDuration(forS)
				if err != nil {
					return usagef(cmd, "--for: %v", err)
				}
				req.ForMS = d.Milliseconds()
			}
			if minS != "" {
				d, err := parseDuration(minS)
				if err != nil {
					return usagef(cmd, "--min-duration: %v", err)
				}
				req.MinDurationMS = d.Milliseconds()
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&price, "price", "", "price in dollars per hour, like 1.5 (required)")
	f.Int64Var(&gpus, "gpus", 0, "GPUs offered, the machine's lowest-indexed (default: all)")
	f.Int64Var(&cpus, "cpus", 0, "CPUs offered (default: all)")
	f.StringVar(&memory, "memory", "", "memory offered, like 64g (default: all)")
	f.StringVar(&disk, "disk", "", "disk offered, like 500g (default: all)")
	f.StringVar(&diskPrice, "disk-price", "", "disk price in dollars per GB-month, like 0.1 (default 0)")
	f.StringVar(&until, "until", "", "when the offer ends: RFC 3339 time or YYYY-MM-DD (default: in 7 days)")
	f.StringVar(&forS, "for", "", "how long the offer lasts, like 72h or 7d (instead of --until)")
	f.StringVar(&minS, "min-duration", "", "the shortest contract accepted, like 1h")
	return viewCmd(a, c, "print the offer as JSON",
		func(ctx context.Context, cl *api.Client, _ []string) (api.OfferInfo, error) {
			return cl.CreateOffer(ctx, req)
		},
		func(o api.OfferInfo) error {
			_, err := fmt.Fprintln(a.stdout, o.ID)
			return err
		})
}

func (a *app) offerLsCmd() *cobra.Command {
	var order string
	c := &cobra.Command{
		Use:     "ls [QUERY...]",
		Aliases: []string{"list", "search"},
		Short:   "List the org's open offers that match a query, like 'gpus>=2 gpu_name==RTX_4090 price<1.5'",
		Long: "List the org's open offers. A query is comparisons `field op value`, with op one of < <= == != >= > in notin (= means ==), " +
			"with or without spaces around it; values are numbers, true/false, strings with _ for spaces, any, or [a,b] lists for in/notin. " +
			"Fields: " + strings.Join(market.FieldNames(), ", ") + " (gpu_ram, memory and disk in GB or with MB/GB/TB; duration in days or with h/d; " +
			"price in dollars per hour; reliability 0..1). -o sorts, like -o price,gpus- (a trailing - for descending).",
		Args: cobra.ArbitraryArgs,
	}
	c.Flags().StringVarP(&order, "order", "o", "", "sort by these fields, like price,gpus- (default: price)")
	return listCmd(a, c, "offers", []string{"ID", "MACHINE", "GPUS", "GPU", "GPU RAM", "CPUS", "MEM", "DISK", "$/HOUR", "$/GB-MONTH", "LEFT", "MIN", "RELIABILITY"},
		func(ctx context.Context, cl *api.Client, args []string, p api.Page, emit func(api.OfferInfo) error) error {
			q := strings.Join(args, " ")
			// Check here too, so a bad query is a usage error before any node is asked.
			if _, err := market.ParseQuery(q); err != nil {
				return usagef(c, "%v", err)
			}
			if _, err := market.ParseOrder(order); err != nil {
				return usagef(c, "-o: %v", err)
			}
			return cl.EachOffer(ctx, q, order, p, emit)
		},
		func(o api.OfferInfo) []string {
			gpuRAM := "-"
			if len(o.GPUs) > 0 {
				gpuRAM = mib(o.GPUs[0].MemoryMB)
			}
			machine := orDash(o.MachineName)
			if o.Mine {
				machine += " (this)"
			}
			return []string{o.ID, machine, strconv.Itoa(len(o.GPUs)), orDash(o.GPUName), gpuRAM, itoa(o.CPUs), mib(o.MemoryMB), mib(o.DiskMB),
				fmt.Sprintf("%.2f", o.Price), fmt.Sprintf("%.2f", o.DiskPrice), market.FormatDuration(o.DurationMS / 60_000 * 60_000),
				market.FormatDuration(o.MinDurationMS), fmt.Sprintf("%.0f%%", o.Reliability*100)}
		},
		func(o api.OfferInfo) string { return o.ID })
}

func (a *app) offerRmCmd() *cobra.Command {
	c := &cobra.Command{Use: "rm ID", Aliases: []string{"remove"}, Short: "Withdraw one of this machine's offers", Args: exactArgs("ID")}
	return viewCmd(a, c, "print the withdrawn offer as JSON",
		func(ctx context.Context, cl *api.Client, args []string) (api.OfferInfo, error) {
			return cl.RemoveOffer(ctx, args[0])
		},
		func(o api.OfferInfo) error {
			_, err := fmt.Fprintf(a.stdout, "offer %s withdrawn\n", o.ID)
			return err
		})
}

// parseDuration reads a Go duration, or a whole number of days like 7d.
func parseDuration(s string) (time.Duration, error) {
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(d, 10, 64)
		if err != nil || n <= 0 || n > 3650 {
			return 0, fmt.Errorf("%q: a duration like 72h, 90m or 7d (1..3650 days)", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q: a duration like 72h, 90m or 7d", s)
	}
	return d, nil
}

// parseOfferTime reads an RFC 3339 time or a date (YYYY-MM-DD, midnight UTC).
func parseOfferTime(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339, "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q: a time like 2026-12-01T18:00:00Z or a date like 2026-12-01", s)
}
