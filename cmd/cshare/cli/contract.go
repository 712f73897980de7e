package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cshare/cshare/internal/regauth"
	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/ledger/jobspec"
	"github.com/cshare/cshare/market"
	"github.com/cshare/cshare/node/api"
)

func (a *app) contractCmd() *cobra.Command {
	return group("contract", "Rent part of a machine from an offer, and manage the rental",
		a.contractCreateCmd(), a.contractLsCmd(), a.contractShowCmd(),
		a.contractActionCmd(api.ContractStop, "Stop a running contract's instance, freeing its GPUs (the renter)"),
		a.contractActionCmd(api.ContractStart, "Start a stopped contract's instance again, when its GPUs are free (the renter)"),
		a.contractExtendCmd(),
		a.contractActionCmd(api.ContractRm, "Delete a contract's instance and disk now (the renter or the host)"),
		a.contractUsageCmd(), a.contractSSHCmd(), a.contractSSHURLCmd(), a.contractCpCmd())
}

func (a *app) contractCreateCmd() *cobra.Command {
	var image, disk, forS, onstart, sshKey, mode, entrypoint string
	var env []string
	var gpus, cpus int64
	var direct bool
	var req api.ContractCreate
	var regAuthFile string
	var regAuth *regauth.Creds
	c := &cobra.Command{
		Use:   "create OFFER_ID --image IMG [--gpus N] [--cpus N] [--disk SIZE] [--for DURATION] [--env K=V]... [--mode entrypoint|ssh|jupyter] [--direct] [--entrypoint CMD] [--onstart CMD] [--ssh-key FILE.pub] [-- ARGS...]",
		Short: "Request part of an offer; the host's node accepts or rejects it. Prints the contract's ID",
		Args:  cobra.ArbitraryArgs,
		PreRunE: func(cmd *cobra.Command, args []string) error {
			var cmdArgs []string
			if dash := cmd.ArgsLenAtDash(); dash >= 0 {
				args, cmdArgs = args[:dash], args[dash:]
			}
			if len(args) != 1 {
				return usagef(cmd, "give one OFFER_ID (see cshare offer ls), then -- and the command, if any")
			}
			if strings.TrimSpace(image) == "" {
				return usagef(cmd, "--image is required: the Docker image the contract runs")
			}
			req = api.ContractCreate{Offer: args[0], Image: image, GPUs: gpus, CPUs: cpus, OnStart: onstart, Cmd: cmdArgs,
				Mode: mode, Entrypoint: entrypoint, Direct: direct}
			switch mode {
			case "", "entrypoint":
			case "ssh":
				if len(cmdArgs) > 0 || entrypoint != "" {
					return usagef(cmd, "--mode ssh runs no command or --entrypoint: it keeps the instance up itself (use --onstart, or --mode entrypoint)")
				}
			case "jupyter":
			default:
				return usagef(cmd, "--mode: %s; allowed: entrypoint, ssh, jupyter", text.Quote(text.Clip(mode)))
			}
			if direct && mode != "jupyter" {
				return usagef(cmd, "--direct: only with --mode jupyter")
			}
			if entrypoint != "" {
				if err := jobspec.CheckCmd([]string{entrypoint}); err != nil {
					return usagef(cmd, "%v", flagErr(err, "--entrypoint"))
				}
			}
			if sshKey != "" {
				var err error
				if req.SSHKey, err = readSSHKey(cmd, "--ssh-key", sshKey); err != nil {
					return err
				}
			}
			var err error
			if regAuth, err = readRegistryAuth(cmd, regAuthFile, strings.TrimSpace(image)); err != nil {
				return err
			}
			// The node's checks (ledger.ValidateContractSpec), said here
			// naming the flags: JSON would turn a byte that is not UTF-8
			// into U+FFFD on the way.
			if err := jobspec.CheckImage(strings.TrimSpace(image)); err != nil {
				return usagef(cmd, "%v", flagErr(err, "--image"))
			}
			if len(cmdArgs) > 0 {
				if err := jobspec.CheckCmd(cmdArgs); err != nil {
					return usagef(cmd, "%v", err)
				}
			}
			if i := text.InvalidAt(onstart); i >= 0 {
				return usagef(cmd, "--onstart: %s is not valid UTF-8 at byte %d; allowed: UTF-8 text", text.Echo(onstart), i)
			}
			if gpus < 0 || cpus < 0 {
				return usagef(cmd, "--gpus and --cpus: a positive number")
			}
			if req.Env, err = jobspec.ParseEnv(env); err != nil {
				return usagef(cmd, "%v", flagErr(err, "--env"))
			}
			if err := specText(cmdArgs, req.Env); err != nil {
				return usagef(cmd, "%v", err)
			}
			if disk != "" {
				if req.DiskMB, err = jobspec.ParseSizeMB("--disk", disk); err != nil {
					return usagef(cmd, "%v", err)
				}
			}
			if forS != "" {
				d, err := parseDuration(forS)
				if err != nil {
					return usagef(cmd, "--for: %v", err)
				}
				req.ForMS = d.Milliseconds()
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&image, "image", "", "the Docker image to run (required)")
	f.Int64Var(&gpus, "gpus", 0, "GPUs to rent, on an offer with GPUs (default: all the offer's)")
	f.Int64Var(&cpus, "cpus", 0, "CPUs to rent, on an offer without GPUs (default: all the offer's)")
	f.StringVar(&disk, "disk", "", "disk, like 50g, fixed for the contract's life (default: the share of the offer's)")
	f.StringVar(&forS, "for", "", "how long, like 2h or 7d (default: until the offer ends)")
	f.StringArrayVar(&env, "env", nil, "NAME=VALUE for the instance's environment, repeatable")
	f.StringVar(&onstart, "onstart", "", "a shell command run when the instance starts")
	f.StringVar(&mode, "mode", "", "how the instance runs: entrypoint (the default: the image's entrypoint, or --entrypoint, with the arguments after --), ssh (kept up for cshare contract ssh; --onstart runs at each start) or jupyter (--onstart, then the image's jupyter, or --entrypoint and the arguments after --, on port 8888; kept up; contract show prints its URL)")
	f.BoolVar(&direct, "direct", false, "with --mode jupyter: publish Jupyter's port on a port of the host instead of the host's HTTPS proxy")
	f.StringVar(&entrypoint, "entrypoint", "", "the program to run instead of the image's entrypoint; its arguments after --")
	f.StringVar(&sshKey, "ssh-key", "", "FILE.pub: a public key that enters this contract alone through the SSH gateway (your own keys do too: cshare user ssh-key add)")
	f.StringVar(&regAuthFile, "registry-auth", "", "FILE: credentials for a private --image, a Docker config JSON or a line user:token; sent sealed to the host machine's key")
	return viewCmd(a, c, "print the contract as JSON",
		func(ctx context.Context, cl *api.Client, _ []string) (api.ContractInfo, error) {
			if regAuth != nil {
				var err error
				if req.Offer, req.RegistryAuth, err = sealForOffer(ctx, cl, *regAuth, req.Offer); err != nil {
					return api.ContractInfo{}, err
				}
			}
			return cl.CreateContract(ctx, req)
		},
		func(info api.ContractInfo) error {
			_, err := fmt.Fprintln(a.stdout, info.ID)
			return err
		})
}

func (a *app) contractLsCmd() *cobra.Command {
	c := &cobra.Command{Use: "ls", Aliases: []string{"list"}, Short: "List the org's contracts", Args: exactArgs()}
	return listCmd(a, c, "contracts", []string{"ID", "STATE", "HOST", "RENTER", "GPUS", "CPUS", "MEM", "DISK", "END", "COST", "REASON"},
		func(ctx context.Context, cl *api.Client, _ []string, p api.Page, emit func(api.ContractInfo) error) error {
			return cl.EachContract(ctx, p, emit)
		},
		func(c api.ContractInfo) []string {
			return []string{c.ID, c.State, orDash(c.MachineName), orDash(c.RenterName), fmt.Sprint(c.GPUs), fmt.Sprintf("%.1f", c.CPUs),
				mib(c.MemoryMB), mib(c.DiskMB), orDash(c.End), fmt.Sprintf("$%.4f", c.Cost), orDash(c.Reason)}
		},
		func(c api.ContractInfo) string { return c.ID })
}

func (a *app) contractShowCmd() *cobra.Command {
	c := &cobra.Command{Use: "show ID", Short: "Show a contract: state, resources, times, cost, and the risk of bursting", Args: exactArgs("ID")}
	return viewCmd(a, c, "print the contract as JSON",
		func(ctx context.Context, cl *api.Client, args []string) (api.ContractInfo, error) {
			return cl.Contract(ctx, args[0])
		},
		a.printContract)
}

func (a *app) printContract(c api.ContractInfo) error {
	var t table
	t.row("id", c.ID)
	t.row("state", c.State)
	if c.Reason != "" {
		t.row("reason", c.Reason)
	}
	t.row("offer", c.Offer)
	t.row("host", fmt.Sprintf("%s (machine %s)", orDash(c.HostName), orDash(c.MachineName)))
	t.row("renter", orDash(c.RenterName))
	t.row("image", c.Image)
	t.row("mode", orDash(c.Mode))
	if c.Entrypoint != "" {
		t.row("entrypoint", c.Entrypoint)
	}
	if c.Mode == "jupyter" {
		t.row("jupyter", jupyterText(c))
	}
	gpus := "-"
	if c.GPUs > 0 {
		gpus = fmt.Sprintf("%d (devices %s)", c.GPUs, strings.Trim(strings.Join(strings.Fields(fmt.Sprint(c.GPUDevices)), ","), "[]"))
	}
	t.row("gpus", gpus)
	t.row("cpus", fmt.Sprintf("%.2f baseline, up to %.2f", c.CPUs, c.CPUCeiling))
	t.row("memory", fmt.Sprintf("%s baseline, up to %s", mib(c.MemoryMB), mib(c.MemoryCeilingMB)))
	t.row("shm", mib(c.ShmMB))
	t.row("disk", mib(c.DiskMB))
	if c.OOMRisk != "" {
		t.row("oom risk", c.OOMRisk)
	}
	t.row("start", orDash(c.Start))
	t.row("end", orDash(c.End))
	t.row("price", fmt.Sprintf("$%.4f/hour, $%.4f/GB-month of disk", c.Price, c.DiskPrice))
	t.row("running", (time.Duration(c.RunningSeconds*1000) * time.Millisecond).String())
	t.row("cost", fmt.Sprintf("$%.6f (compute $%.6f, storage $%.6f)", c.Cost, c.ComputeCost, c.StorageCost))
	return t.write(a.stdout)
}

func (a *app) contractActionCmd(action, short string) *cobra.Command {
	c := &cobra.Command{Use: action + " ID", Short: short, Args: exactArgs("ID")}
	if action == api.ContractRm {
		c.Aliases = []string{"remove"}
	}
	return viewCmd(a, c, "print the contract as JSON",
		func(ctx context.Context, cl *api.Client, args []string) (api.ContractInfo, error) {
			return cl.ContractAction(ctx, args[0], action)
		},
		func(c api.ContractInfo) error {
			_, err := fmt.Fprintf(a.stdout, "contract %s: %s\n", c.ID, c.State)
			return err
		})
}

func (a *app) contractExtendCmd() *cobra.Command {
	var forS string
	c := &cobra.Command{Use: "extend ID --for DURATION", Short: "Move a contract's end later (the host only)", Args: exactArgs("ID")}
	c.Flags().StringVar(&forS, "for", "", "how much longer, like 2h or 1d (required)")
	return viewCmd(a, c, "print the contract as JSON",
		func(ctx context.Context, cl *api.Client, args []string) (api.ContractInfo, error) {
			if forS == "" {
				return api.ContractInfo{}, usagef(c, "--for is required: how much longer, like 2h")
			}
			d, err := parseDuration(forS)
			if err != nil {
				return api.ContractInfo{}, usagef(c, "--for: %v", err)
			}
			if d.Milliseconds() > market.MaxDuration {
				return api.ContractInfo{}, usagef(c, "--for: %s; at most 10 years (3650d)", market.FormatDuration(d.Milliseconds()))
			}
			return cl.ExtendContract(ctx, args[0], api.ContractExtendRequest{ForMS: d.Milliseconds()})
		},
		func(c api.ContractInfo) error {
			_, err := fmt.Fprintf(a.stdout, "contract %s: %s until %s\n", c.ID, c.State, c.End)
			return err
		})
}

func (a *app) contractUsageCmd() *cobra.Command {
	var at string
	c := &cobra.Command{Use: "usage", Short: "Contract costs summed per renter and per host, from the ledger", Args: exactArgs()}
	c.Flags().StringVar(&at, "at", "", "compute the costs at this time (RFC 3339; default now), so every node prints the same")
	return viewCmd(a, c, "print the usage as JSON",
		func(ctx context.Context, cl *api.Client, _ []string) (api.ContractUsage, error) {
			var ms int64
			if at != "" {
				t, err := parseOfferTime(at)
				if err != nil {
					return api.ContractUsage{}, usagef(c, "--at: %v", err)
				}
				ms = t.UnixMilli()
			}
			return cl.ContractUsage(ctx, ms)
		},
		func(u api.ContractUsage) error {
			var t table
			t.row("ROLE", "PERSON", "CONTRACTS", "COMPUTE", "STORAGE", "TOTAL")
			for _, x := range []struct {
				role string
				as   []api.UsageAccount
			}{{"renter", u.Renters}, {"host", u.Hosts}} {
				for _, ac := range x.as {
					t.row(x.role, orDash(ac.Name), fmt.Sprint(ac.Contracts), fmt.Sprintf("$%.6f", ac.ComputeCost),
						fmt.Sprintf("$%.6f", ac.StorageCost), fmt.Sprintf("$%.6f", ac.Cost))
				}
			}
			if err := t.write(a.stdout); err != nil {
				return err
			}
			_, err := fmt.Fprintf(a.stdout, "at %s\n", u.At)
			return err
		})
}

// jupyterText is contract show's jupyter line: the URL with its token, or
// why there is none.
func jupyterText(c api.ContractInfo) string {
	switch {
	case c.JupyterURL != "":
		return c.JupyterURL
	case c.State != "running":
		return "- (when it runs)"
	case c.Direct:
		return "- (the renter sees the URL once the host announces its published port)"
	default:
		return "- (the renter sees the URL while the host machine announces its jupyter proxy: node.yaml jupyter.listen)"
	}
}
