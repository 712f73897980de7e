package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cshare/cshare/internal/regauth"
	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/ledger/jobspec"
	"github.com/cshare/cshare/node/api"
)

func (a *app) jobCmd() *cobra.Command {
	return group("job", "Submit, list, show, modify and cancel jobs; read their items and logs",
		a.jobSubmitCmd(), a.jobLsCmd(), a.jobShowCmd(), a.jobModifyCmd(), a.jobCancelCmd(),
		a.jobLogsCmd(), a.jobItemsCmd(), a.jobSSHCmd(), a.jobCpCmd())
}

// flagErr names a flag in a jobspec error instead of the spec's field.
func flagErr(err error, flag string) error { return jobspec.Rename(err, flag) }

// maxCPUsFlag parses --max-cpus or its alias: the value, and its text as
// the submit summary shows it.
func maxCPUsFlag(flag, s string) (int64, string, error) {
	n, err := jobspec.ParseMaxCPUs(s)
	if err != nil {
		return 0, "", flagErr(err, flag)
	}
	if strings.TrimSpace(s) == "*" {
		return n, "*", nil
	}
	return n, strconv.FormatInt(n, 10), nil
}

// maxCPUsFlags reads --max-cpus and --max-instances, which must agree.
func maxCPUsFlags(cmd *cobra.Command, maxCPUs, maxInstances string) (*int64, string, error) {
	f := cmd.Flags()
	if !f.Changed("max-cpus") && !f.Changed("max-instances") {
		return nil, "", nil
	}
	var mc, mi string
	var n, ni int64
	var err error
	if f.Changed("max-cpus") {
		if n, mc, err = maxCPUsFlag("--max-cpus", maxCPUs); err != nil {
			return nil, "", err
		}
	}
	if f.Changed("max-instances") {
		if ni, mi, err = maxCPUsFlag("--max-instances", maxInstances); err != nil {
			return nil, "", err
		}
		if !f.Changed("max-cpus") {
			n = ni
		}
	}
	text, err := aliased(cmd, "max-cpus", "max-instances", mc, mi)
	if err != nil {
		return nil, "", err
	}
	return &n, text, nil
}

// aliased returns the value of a flag that has an alias, and an error when
// both are given with different values.
func aliased[T comparable](cmd *cobra.Command, name, alias string, v, av T) (T, error) {
	f := cmd.Flags()
	switch {
	case f.Changed(name) && f.Changed(alias) && v != av:
		return v, fmt.Errorf("--%s %v and --%s %v disagree; --%s is another name for --%s, give one of them", name, v, alias, av, alias, name)
	case f.Changed(alias):
		return av, nil
	}
	return v, nil
}

// submitFlags are `job submit`'s flags.
type submitFlags struct {
	image, driver, cores, memory, rng, maxCPUs, maxInstances, name string
	entrypoint                                                     string
	gpus, priority, cpus, instances, retries                       string
	disk, gpuMemory, itemTimeout                                   string
	env                                                            []string
	datasets                                                       []string
}

// submission is a checked job submit: the request and, for the summary
// line, the range and max_cpus as the user wrote them.
type submission struct {
	req          api.JobSubmit
	rng, maxCPUs string
	items        int64
}

// request checks the flags and the command with the job spec's parsers
// (package jobspec, which the node checks the numbers with) and builds the
// API request.
func (s *submitFlags) request(cmd *cobra.Command, args []string) (submission, error) {
	var sub submission
	req := &sub.req
	dash := cmd.ArgsLenAtDash()
	if dash > 0 {
		return sub, fmt.Errorf("unexpected argument %q before --; the job's command goes after --", args[0])
	}
	req.Entrypoint = s.entrypoint
	if s.entrypoint != "" {
		if err := jobspec.CheckCmd([]string{s.entrypoint}); err != nil {
			return sub, flagErr(err, "--entrypoint")
		}
	}
	if s.entrypoint == "" || len(args) > 0 {
		if err := jobspec.CheckCmd(args); err != nil {
			return sub, err
		}
	}
	req.Cmd = args
	if err := jobspec.CheckDriver(s.driver); err != nil {
		return sub, flagErr(err, "--driver")
	}
	req.Driver = s.driver
	req.Image = strings.TrimSpace(s.image)
	if req.Image != "" {
		if err := jobspec.CheckImage(req.Image); err != nil {
			return sub, flagErr(err, "--image")
		}
	}
	req.Name = strings.TrimSpace(s.name)
	if req.Name != "" {
		if err := text.CheckName("--name", req.Name); err != nil {
			return sub, err
		}
	}
	var err error
	sub.rng = strings.TrimSpace(s.rng)
	var lo, hi int64
	if lo, hi, err = jobspec.ParseRange(sub.rng); err != nil {
		return sub, flagErr(err, "--range")
	}
	req.RangeStart, req.RangeEnd = &lo, &hi
	sub.items = hi - lo + 1
	f := cmd.Flags()
	if f.Changed("cores") {
		if req.CoresMilli, err = jobspec.ParseCores(s.cores); err != nil {
			return sub, flagErr(err, "--cores")
		}
	}
	if f.Changed("memory") {
		if req.MemoryMB, err = jobspec.ParseMemory(s.memory); err != nil {
			return sub, flagErr(err, "--memory")
		}
	}
	if req.GPUs, err = jobspec.ParseGPUs(s.gpus); err != nil {
		return sub, flagErr(err, "--gpus")
	}
	if req.Priority, err = jobspec.ParsePriority(s.priority); err != nil {
		return sub, flagErr(err, "--priority")
	}
	if f.Changed("cpus") {
		if req.CPUs, err = jobspec.ParseCPUs(s.cpus); err != nil {
			return sub, flagErr(err, "--cpus")
		}
	}
	if f.Changed("instances") {
		n, err := jobspec.ParseCPUs(s.instances)
		if err != nil {
			return sub, flagErr(err, "--instances")
		}
		if f.Changed("cpus") && n != req.CPUs {
			return sub, fmt.Errorf("--cpus %d and --instances %d disagree; --instances is another name for --cpus, give one of them", req.CPUs, n)
		}
		req.CPUs = n
	}
	if req.CPUs == 0 {
		req.CPUs = 1
	}
	if req.MaxCPUs, sub.maxCPUs, err = maxCPUsFlags(cmd, s.maxCPUs, s.maxInstances); err != nil {
		return sub, err
	}
	if req.Retries, err = jobspec.ParseRetries(s.retries); err != nil {
		return sub, flagErr(err, "--retries")
	}
	if f.Changed("disk") {
		if req.DiskMB, err = jobspec.ParseDisk(s.disk); err != nil {
			return sub, flagErr(err, "--disk")
		}
	}
	if f.Changed("gpu-memory") {
		if req.GPUMemoryMB, err = jobspec.ParseGPUMemory(s.gpuMemory); err != nil {
			return sub, flagErr(err, "--gpu-memory")
		}
		if err := jobspec.CheckGPUMemoryMB(req.GPUMemoryMB, req.GPUs); err != nil {
			return sub, flagErr(err, "--gpu-memory")
		}
	}
	if f.Changed("item-timeout") {
		if req.ItemTimeoutMS, err = jobspec.ParseItemTimeout("item_timeout", s.itemTimeout); err != nil {
			return sub, flagErr(err, "--item-timeout")
		}
	}
	if req.Env, err = jobspec.ParseEnv(s.env); err != nil {
		return sub, flagErr(err, "--env")
	}
	if err := specText(req.Cmd, req.Env); err != nil {
		return sub, err
	}
	return sub, nil
}

func (a *app) jobSubmitCmd() *cobra.Command {
	var s submitFlags
	var sub submission
	var regAuthFile string
	var regAuth *regauth.Creds
	c := &cobra.Command{
		Use:   "submit [flags] -- CMD ARGS...",
		Short: "Submit a job; the last line of output is its ID",
		Long: `Submit a job to the org. Each agenda item of --range runs CMD once, in an
instance that gets CSHARE_JOB_ID, CSHARE_ITEM, CSHARE_INSTANCE and
CSHARE_MACHINE. --cpus primary instances are guaranteed (given free slots);
SmartShare adds secondary ones up to --max-cpus.

  cshare job submit --priority 5 --cpus 10 --max-cpus 50 --range 1-100 -- sleep 60`,
		Args: cobra.ArbitraryArgs,
		PreRunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if sub, err = s.request(cmd, args); err != nil {
				return usagef(cmd, "%v", err)
			}
			for _, d := range s.datasets {
				if k := strings.Index(d, ":/"); k <= 0 {
					return usagef(cmd, "--dataset: %s; allowed: NAME|CID:/absolute/path, e.g. imagenet:/data", text.Quote(d))
				}
			}
			sub.req.Datasets = s.datasets
			if regAuthFile != "" && sub.req.Driver != "" && sub.req.Driver != "docker" {
				return usagef(cmd, "--registry-auth: only with --driver docker (it pulls the image)")
			}
			regAuth, err = readRegistryAuth(cmd, regAuthFile, sub.req.Image)
			return err
		},
	}
	f := c.Flags()
	f.StringVar(&s.image, "image", "", "container image (docker driver; default: the node's default image)")
	f.StringVar(&s.entrypoint, "entrypoint", "", "the program to run instead of the image's entrypoint; its arguments after --")
	f.StringVar(&s.driver, "driver", "docker", "docker or exec (exec must be enabled in the machine's node.yaml)")
	f.StringVar(&s.cores, "cores", "", "CPU cores per instance, e.g. 0.5 or 2")
	f.StringVar(&s.memory, "memory", "", "memory per instance, read as Docker does: 512m, 2g, 4GiB (at least 4MB)")
	f.StringVar(&s.gpus, "gpus", "0", "GPUs per instance")
	f.StringVar(&s.rng, "range", "1", "agenda items, START-END or N, e.g. 1-100")
	f.StringVar(&s.priority, "priority", strconv.Itoa(jobspec.DefaultPriority), "1 (highest) to 9999 (lowest)")
	f.StringVar(&s.cpus, "cpus", "1", "primary instances (alias --instances)")
	f.StringVar(&s.instances, "instances", "1", "same as --cpus")
	f.StringVar(&s.maxCPUs, "max-cpus", "", "most instances, primaries included: N, -1 or * = the org's max_cpus_limit, 0 = no secondaries (default: the org's default_max_cpus; alias --max-instances)")
	f.StringVar(&s.maxInstances, "max-instances", "", "same as --max-cpus")
	f.StringVar(&s.retries, "retries", "0", "how many times a failed item is retried, 0 to 100")
	f.StringVar(&s.disk, "disk", "", "disk each instance may fill (its writable layer or work dir), e.g. 20g; counted against the machines' disk_limit")
	f.StringVar(&s.gpuMemory, "gpu-memory", "", "use only GPUs with at least this much memory, e.g. 24g (with --gpus)")
	f.StringVar(&s.itemTimeout, "item-timeout", "", "stop and fail a run of an item lasting longer, e.g. 30m (retried per --retries; default: the org's policy.default_item_timeout)")
	f.StringVar(&s.name, "name", "", "the job's name")
	f.StringArrayVar(&s.env, "env", nil, "NAME=VALUE for the instances' environment, repeatable")
	f.StringArrayVar(&s.datasets, "dataset", nil, "NAME|CID:/path: mount a dataset read-only at /path in every instance, repeatable")
	f.StringVar(&regAuthFile, "registry-auth", "", "FILE: credentials for a private --image, a Docker config JSON or a line user:token; sent sealed to every approved machine's key")
	return viewCmd(a, c, "print the submitted job as JSON",
		func(ctx context.Context, cl *api.Client, _ []string) (api.JobSubmitted, error) {
			if regAuth != nil {
				var err error
				if sub.req.RegistryAuth, err = sealForMachines(ctx, cl, *regAuth); err != nil {
					return api.JobSubmitted{}, err
				}
			}
			j, err := cl.SubmitJob(ctx, sub.req)
			if err != nil {
				return j, err
			}
			for _, w := range j.Warnings {
				fmt.Fprintf(a.stderr, "warning: %s\n", oneLine(w))
			}
			return j, nil
		},
		func(j api.JobSubmitted) error {
			req, items := sub.req, sub.items
			what := "job"
			if j.Name != "" {
				what = "job " + text.Quote(j.Name)
			}
			maxc := sub.maxCPUs
			if maxc == "" {
				maxc = "org default"
			}
			plural := "s"
			if items == 1 {
				plural = ""
			}
			fmt.Fprintf(a.stdout, "submitted %s: %d item%s (%s), priority %d, cpus %d, max_cpus %s\n",
				what, items, plural, sub.rng, req.Priority, req.CPUs, maxc)
			fmt.Fprintf(a.stdout, "follow it with: cshare job show %s\n", short(j.ID))
			_, err := fmt.Fprintln(a.stdout, j.ID)
			return err
		})
}

// instances renders a job's instances as running/primaries+secondaries.
func instances(j api.JobInfo) string {
	var running, prim, sec int
	for _, in := range j.Instances {
		if in.State == "running" {
			running++
		}
		if in.Kind == "secondary" {
			sec++
		} else {
			prim++
		}
	}
	return fmt.Sprintf("%d/%d+%d", running, prim, sec)
}

func (a *app) jobLsCmd() *cobra.Command {
	c := &cobra.Command{Use: "ls", Aliases: []string{"list"}, Short: "List the org's jobs", Args: exactArgs()}
	return listCmd(a, c, "jobs", []string{"ID", "NAME", "STATE", "PRIORITY", "INSTANCES", "ITEMS", "FAILED", "SUBMITTER", "AGE"},
		func(ctx context.Context, cl *api.Client, _ []string, p api.Page, emit func(api.JobInfo) error) error {
			return cl.EachJob(ctx, p, emit)
		},
		func(j api.JobInfo) []string {
			return []string{short(j.ID), orDash(j.Name), j.State, itoa(j.Priority), instances(j),
				fmt.Sprintf("%d/%d", j.Items.Done, j.Items.Total), itoa(j.Items.Failed),
				submitterCell(j), a.age(j.Submitted)}
		},
		func(j api.JobInfo) string { return j.ID })
}

// submitterCell is a job's submitter for a table: their name, else the
// short ID.
func submitterCell(j api.JobInfo) string {
	if j.SubmitterName != "" && j.SubmitterName != j.Submitter {
		return j.SubmitterName
	}
	return orDash(short(j.Submitter))
}

func (a *app) jobModifyCmd() *cobra.Command {
	var maxCPUs, maxInstances, priority string
	c := &cobra.Command{
		Use:   "modify ID [--max-cpus N|*] [--priority P]",
		Short: "Change a job's max_cpus or priority (its submitter or an admin)",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			f := cmd.Flags()
			var req api.JobModify
			if !f.Changed("max-cpus") && !f.Changed("max-instances") && !f.Changed("priority") {
				return usagef(cmd, "nothing to change: give --max-cpus or --priority")
			}
			var err error
			if req.MaxCPUs, _, err = maxCPUsFlags(cmd, maxCPUs, maxInstances); err != nil {
				return usagef(cmd, "%v", err)
			}
			if f.Changed("priority") {
				p, err := jobspec.ParsePriority(priority)
				if err != nil {
					return usagef(cmd, "%v", flagErr(err, "--priority"))
				}
				req.Priority = &p
			}
			cl, err := a.client()
			if err != nil {
				return err
			}
			j, err := cl.ModifyJob(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "modified job %s: priority %d, max_cpus %s\n", j.ID, j.Priority, orDash(j.MaxCPUs))
			return err
		},
	}
	c.Flags().StringVar(&maxCPUs, "max-cpus", "", "new max_cpus: N, -1 or * = the org's max_cpus_limit, 0 = no secondaries (alias --max-instances)")
	c.Flags().StringVar(&maxInstances, "max-instances", "", "same as --max-cpus")
	c.Flags().StringVar(&priority, "priority", "", "new priority, 1 (highest) to 9999 (lowest)")
	return c
}

func (a *app) jobCancelCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a job and stop its instances",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := a.client()
			if err != nil {
				return err
			}
			j, err := cl.CancelJob(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "cancelled job %s; state %s\n", j.ID, j.State)
			return err
		},
	}
}

func (a *app) jobLogsCmd() *cobra.Command {
	var item int64
	c := &cobra.Command{
		Use:   "logs ID --item N",
		Short: "Print the output of one agenda item of a job, raw",
		Long: `Print the output of one agenda item of a job. The output is the job's own,
written as it was (like docker logs): it is not escaped, so control
characters in it reach the terminal. Pipe it through cat -v or less to
see them.`,
		Args: exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := a.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			id := args[0]
			n := item
			if !cmd.Flags().Changed("item") {
				// Two items say enough: the job may have a million.
				var items []api.ItemInfo
				if err := cl.EachJobItem(ctx, id, api.Page{Limit: 2}, func(it api.ItemInfo) error {
					items = append(items, it)
					return nil
				}); err != nil {
					return err
				}
				if len(items) != 1 {
					total := int64(len(items))
					if j, err := cl.Job(ctx, id); err == nil {
						total = j.Items.Total
					}
					return usagef(cmd, "--item is required: the job has %d items (list them with: cshare job items %s)", total, id)
				}
				n = items[0].Item
			}
			out, err := cl.JobLogs(ctx, id, n)
			if err != nil {
				return err
			}
			_, err = a.stdout.Write(out)
			return err
		},
	}
	c.Flags().Int64Var(&item, "item", 0, "the agenda item, e.g. the frame number (optional for a one-item job)")
	return c
}

func (a *app) jobItemsCmd() *cobra.Command {
	c := &cobra.Command{Use: "items ID", Short: "List a job's agenda items: status, attempts, exit code, duration", Args: exactArgs("ID")}
	return listCmd(a, c, "items", []string{"ITEM", "STATUS", "ATTEMPTS", "CODE", "DURATION", "OUTPUT", "MACHINE"},
		func(ctx context.Context, cl *api.Client, args []string, p api.Page, emit func(api.ItemInfo) error) error {
			if _, _, err := api.ItemCursor(p.After); err != nil {
				return err
			}
			return cl.EachJobItem(ctx, args[0], p, emit)
		},
		func(it api.ItemInfo) []string {
			code, dur, out := "-", "-", "-"
			if it.Attempts > 0 && it.Status != "pending" && it.Status != "running" {
				code = itoa(it.Code)
			}
			if it.DurationMS > 0 {
				dur = (time.Duration(it.DurationMS) * time.Millisecond).String()
			}
			if it.OutputSize > 0 {
				out = jobspec.FormatBytes(float64(it.OutputSize))
			}
			return []string{itoa(it.Item), it.Status, itoa(it.Attempts), code, dur, out, orDash(short(it.Machine))}
		},
		func(it api.ItemInfo) string { return itoa(it.Item) })
}
