package cli

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/docker/go-units"
	"github.com/spf13/cobra"

	"github.com/cshare/cshare/node/api"
)

// Job submission defaults and bounds (Qube's, as seed 003 describes them).
const (
	defaultPriority = 9999
	minPriority     = 1
	maxPriority     = 9999
	minMemory       = 4 * 1024 * 1024 // bytes; Docker's own floor is 6 MB, 4 MB is ours
)

func (a *app) jobCmd() *cobra.Command {
	return group("job", "Submit, list, show, modify and cancel jobs; read their items and logs",
		a.jobSubmitCmd(), a.jobLsCmd(), a.jobShowCmd(), a.jobModifyCmd(), a.jobCancelCmd(),
		a.jobLogsCmd(), a.jobItemsCmd())
}

func jobCandidates(cl *api.Client) func(context.Context) ([]candidate, error) {
	return func(ctx context.Context) ([]candidate, error) {
		js, err := cl.Jobs(ctx)
		if err != nil {
			return nil, err
		}
		out := make([]candidate, len(js))
		for i, j := range js {
			out[i] = candidate{ID: j.ID, Name: j.Name}
		}
		return out, nil
	}
}

var rangeRE = regexp.MustCompile(`^([0-9]+)(?:-([0-9]+))?$`)

// parseRange checks --range ("1-100" or "7") and returns it with its number
// of items.
func parseRange(s string) (string, int64, error) {
	s = strings.TrimSpace(s)
	m := rangeRE.FindStringSubmatch(s)
	if m == nil {
		return "", 0, fmt.Errorf("--range: %q is not a range; use START-END or one number, e.g. 1-100 or 7", s)
	}
	start, err1 := strconv.ParseInt(m[1], 10, 64)
	end := start
	var err2 error
	if m[2] != "" {
		end, err2 = strconv.ParseInt(m[2], 10, 64)
	}
	if err1 != nil || err2 != nil {
		return "", 0, fmt.Errorf("--range: %q is out of range; numbers must be below %d", s, int64(math.MaxInt64))
	}
	if start > end {
		return "", 0, fmt.Errorf("--range: %s is empty; the start must not exceed the end", s)
	}
	return s, end - start + 1, nil
}

// parseMemory checks --memory, read as Docker reads sizes (64m = 64MB =
// 64MiB), at least 4 MB.
func parseMemory(s string) (string, error) {
	s = strings.TrimSpace(s)
	n, err := units.RAMInBytes(s)
	if err != nil || n < 0 {
		return "", fmt.Errorf("--memory: %q is not a size; use e.g. 512m, 2g or 4GiB", s)
	}
	if n < minMemory {
		return "", fmt.Errorf("--memory: %s is under the minimum of 4MB", s)
	}
	return s, nil
}

// parseCores checks --cores: CPU cores per instance, e.g. 0.5 or 2.
func parseCores(s string) (string, error) {
	s = strings.TrimSpace(s)
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return "", fmt.Errorf("--cores: %q is not a number of CPU cores; use e.g. 0.5 or 2", s)
	}
	if f <= 0 {
		return "", fmt.Errorf("--cores: %s is not allowed; give more than 0", s)
	}
	return s, nil
}

// parseMaxCPUs checks --max-cpus: a number >= -1, or * (both mean the org's
// max_cpus_limit for -1 and *; 0 means no secondary instances).
func parseMaxCPUs(flag, s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "*" {
		return s, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < -1 {
		return "", fmt.Errorf("%s: %q is not allowed; give a number >= -1, or * for the org's max_cpus_limit", flag, s)
	}
	return strconv.FormatInt(n, 10), nil
}

// checkPriority checks --priority: 1 (highest) to 9999 (lowest).
func checkPriority(p int64) error {
	if p < minPriority || p > maxPriority {
		return fmt.Errorf("--priority: %d is outside %d..%d (1 is the highest)", p, minPriority, maxPriority)
	}
	return nil
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// parseEnv reads --env K=V flags; a later K wins, as in docker run.
func parseEnv(kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	env := make(map[string]string, len(kvs))
	for _, s := range kvs {
		k, v, ok := strings.Cut(s, "=")
		if !ok || !envName.MatchString(k) {
			return nil, fmt.Errorf("--env: %q is not NAME=VALUE with a name like MY_VAR", s)
		}
		env[k] = v
	}
	return env, nil
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
	gpus, priority, cpus, instances, retries                       int64
	env                                                            []string
	asJSON                                                         bool
}

// request checks the flags and the command and builds the API request.
func (s *submitFlags) request(cmd *cobra.Command, args []string) (api.JobSubmit, int64, error) {
	var req api.JobSubmit
	fail := func(err error) (api.JobSubmit, int64, error) { return req, 0, err }
	dash := cmd.ArgsLenAtDash()
	if dash > 0 {
		return fail(fmt.Errorf("unexpected argument %q before --; the job's command goes after --", args[0]))
	}
	if len(args) == 0 || strings.TrimSpace(args[0]) == "" {
		return fail(fmt.Errorf("missing command: give the job's command after --, e.g. cshare job submit --range 1-10 -- sleep 5"))
	}
	req.Cmd = args
	if s.driver != "docker" && s.driver != "exec" {
		return fail(fmt.Errorf("--driver: %q is not a driver; use docker or exec", s.driver))
	}
	req.Driver = s.driver
	req.Image = strings.TrimSpace(s.image)
	req.Name = strings.TrimSpace(s.name)
	rng, items, err := parseRange(s.rng)
	if err != nil {
		return fail(err)
	}
	req.Range = rng
	if cmd.Flags().Changed("cores") {
		if req.Cores, err = parseCores(s.cores); err != nil {
			return fail(err)
		}
	}
	if cmd.Flags().Changed("memory") {
		if req.Memory, err = parseMemory(s.memory); err != nil {
			return fail(err)
		}
	}
	if s.gpus < 0 {
		return fail(fmt.Errorf("--gpus: %d is not allowed; give 0 or more", s.gpus))
	}
	req.GPUs = s.gpus
	if err := checkPriority(s.priority); err != nil {
		return fail(err)
	}
	req.Priority = s.priority
	cpus, err := aliased(cmd, "cpus", "instances", s.cpus, s.instances)
	if err != nil {
		return fail(err)
	}
	if cpus < 1 {
		return fail(fmt.Errorf("--cpus: %d is not allowed; a job has at least 1 primary instance", cpus))
	}
	req.CPUs = cpus
	f := cmd.Flags()
	if f.Changed("max-cpus") || f.Changed("max-instances") {
		var mc, mi string
		if f.Changed("max-cpus") {
			if mc, err = parseMaxCPUs("--max-cpus", s.maxCPUs); err != nil {
				return fail(err)
			}
		}
		if f.Changed("max-instances") {
			if mi, err = parseMaxCPUs("--max-instances", s.maxInstances); err != nil {
				return fail(err)
			}
		}
		if req.MaxCPUs, err = aliased(cmd, "max-cpus", "max-instances", mc, mi); err != nil {
			return fail(err)
		}
	}
	if s.retries < 0 {
		return fail(fmt.Errorf("--retries: %d is not allowed; give 0 or more", s.retries))
	}
	req.Retries = s.retries
	if req.Env, err = parseEnv(s.env); err != nil {
		return fail(err)
	}
	return req, items, nil
}

func (a *app) jobSubmitCmd() *cobra.Command {
	var s submitFlags
	c := &cobra.Command{
		Use:   "submit [flags] -- CMD ARGS...",
		Short: "Submit a job; the last line of output is its ID",
		Long: `Submit a job to the org. Each agenda item of --range runs CMD once, in an
instance that gets CSHARE_JOB_ID, CSHARE_ITEM, CSHARE_INSTANCE and
CSHARE_MACHINE. --cpus primary instances are guaranteed (given free slots);
SmartShare adds secondary ones up to --max-cpus.

  cshare job submit --priority 5 --cpus 10 --max-cpus 50 --range 1-100 -- sleep 60`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			req, items, err := s.request(cmd, args)
			if err != nil {
				return usagef(cmd, "%v", err)
			}
			cl, err := a.client()
			if err != nil {
				return err
			}
			j, err := cl.SubmitJob(cmd.Context(), req)
			if err != nil {
				return err
			}
			if s.asJSON {
				return printJSON(a.stdout, j)
			}
			what := "job"
			if j.Name != "" {
				what = fmt.Sprintf("job %q", j.Name)
			}
			maxc := req.MaxCPUs
			if maxc == "" {
				maxc = "org default"
			}
			plural := "s"
			if items == 1 {
				plural = ""
			}
			fmt.Fprintf(a.stdout, "submitted %s: %d item%s (%s), priority %d, cpus %d, max_cpus %s\n",
				what, items, plural, req.Range, req.Priority, req.CPUs, maxc)
			fmt.Fprintf(a.stdout, "follow it with: cshare job show %s\n", short(j.ID))
			_, err = fmt.Fprintln(a.stdout, j.ID)
			return err
		},
	}
	f := c.Flags()
	f.StringVar(&s.image, "image", "", "container image (docker driver; default: the node's default image)")
	f.StringVar(&s.driver, "driver", "docker", "docker or exec (exec must be enabled in the machine's node.yaml)")
	f.StringVar(&s.cores, "cores", "", "CPU cores per instance, e.g. 0.5 or 2")
	f.StringVar(&s.memory, "memory", "", "memory per instance, read as Docker does: 512m, 2g, 4GiB (at least 4MB)")
	f.Int64Var(&s.gpus, "gpus", 0, "GPUs per instance")
	f.StringVar(&s.rng, "range", "1", "agenda items, START-END or N, e.g. 1-100")
	f.Int64Var(&s.priority, "priority", defaultPriority, "1 (highest) to 9999 (lowest)")
	f.Int64Var(&s.cpus, "cpus", 1, "primary instances (alias --instances)")
	f.Int64Var(&s.instances, "instances", 1, "same as --cpus")
	f.StringVar(&s.maxCPUs, "max-cpus", "", "most instances, primaries included: N, -1 or * = the org's max_cpus_limit, 0 = no secondaries (default: the org's default_max_cpus; alias --max-instances)")
	f.StringVar(&s.maxInstances, "max-instances", "", "same as --max-cpus")
	f.Int64Var(&s.retries, "retries", 0, "how many times a failed item is retried")
	f.StringVar(&s.name, "name", "", "the job's name")
	f.StringArrayVar(&s.env, "env", nil, "NAME=VALUE for the instances' environment, repeatable")
	f.BoolVar(&s.asJSON, "json", false, "print the submitted job as JSON")
	return c
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
	var asJSON bool
	c := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the org's jobs",
		Args:    exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := a.client()
			if err != nil {
				return err
			}
			js, err := cl.Jobs(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(a.stdout, js)
			}
			var t table
			t.row("ID", "NAME", "STATE", "PRIORITY", "INSTANCES", "ITEMS", "FAILED", "SUBMITTER", "AGE")
			for _, j := range js {
				t.row(short(j.ID), orDash(j.Name), j.State, itoa(j.Priority), instances(j),
					fmt.Sprintf("%d/%d", j.Items.Done, j.Items.Total), itoa(j.Items.Failed),
					orDash(short(j.Submitter)), age(j.Submitted))
			}
			return t.write(a.stdout)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the jobs as a JSON array")
	return c
}

// getJob fetches a job by ID, name, or unique ID prefix/suffix.
func getJob(ctx context.Context, cl *api.Client, want string, call func(id string) (api.JobInfo, error)) (api.JobInfo, error) {
	var j api.JobInfo
	err := withID(ctx, "job", want, jobCandidates(cl), func(id string) error {
		var err error
		j, err = call(id)
		return err
	})
	return j, err
}

func (a *app) jobShowCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "show ID",
		Short: "Show a job: spec, progress, instances, and why it has no more",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := a.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			j, err := getJob(ctx, cl, args[0], func(id string) (api.JobInfo, error) { return cl.Job(ctx, id) })
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(a.stdout, j)
			}
			return printJob(a, j)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the job as JSON")
	return c
}

func printJob(a *app, j api.JobInfo) error {
	res := []string{}
	if j.Cores > 0 {
		res = append(res, fmt.Sprintf("%d cores", j.Cores))
	}
	if j.MemoryMB > 0 {
		res = append(res, mib(j.MemoryMB)+" memory")
	}
	if j.GPUs > 0 {
		res = append(res, fmt.Sprintf("%d gpus", j.GPUs))
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
		{"items", fmt.Sprintf("%d/%d done, %d failed, %d running, %d pending", it.Done, it.Total, it.Failed, it.Running, it.Pending)},
		{"duplicate runs", itoa(j.DuplicateRuns)},
		{"instances", instances(j) + " (running/primaries+secondaries)"},
		{"submitter", orDash(j.Submitter)},
		{"submitted", orDash(j.Submitted)},
	}
	if j.Ended != "" {
		pairs = append(pairs, [2]string{"ended", j.Ended})
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
	t.row("MACHINE", "NAME", "SLOT", "KIND", "STATE", "ITEM")
	for _, in := range j.Instances {
		item := "-"
		if in.Item != 0 {
			item = itoa(in.Item)
		}
		t.row(short(in.Machine), orDash(in.MachineName), fmt.Sprint(in.Slot), in.Kind, in.State, item)
	}
	return t.write(a.stdout)
}

func (a *app) jobModifyCmd() *cobra.Command {
	var maxCPUs, maxInstances string
	var priority int64
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
			if f.Changed("max-cpus") || f.Changed("max-instances") {
				var mc, mi string
				var err error
				if f.Changed("max-cpus") {
					if mc, err = parseMaxCPUs("--max-cpus", maxCPUs); err != nil {
						return usagef(cmd, "%v", err)
					}
				}
				if f.Changed("max-instances") {
					if mi, err = parseMaxCPUs("--max-instances", maxInstances); err != nil {
						return usagef(cmd, "%v", err)
					}
				}
				if req.MaxCPUs, err = aliased(cmd, "max-cpus", "max-instances", mc, mi); err != nil {
					return usagef(cmd, "%v", err)
				}
			}
			if f.Changed("priority") {
				if err := checkPriority(priority); err != nil {
					return usagef(cmd, "%v", err)
				}
				req.Priority = priority
			}
			cl, err := a.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			j, err := getJob(ctx, cl, args[0], func(id string) (api.JobInfo, error) { return cl.ModifyJob(ctx, id, req) })
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "modified job %s: priority %d, max_cpus %s\n", j.ID, j.Priority, orDash(j.MaxCPUs))
			return err
		},
	}
	c.Flags().StringVar(&maxCPUs, "max-cpus", "", "new max_cpus: N, -1 or * = the org's max_cpus_limit, 0 = no secondaries (alias --max-instances)")
	c.Flags().StringVar(&maxInstances, "max-instances", "", "same as --max-cpus")
	c.Flags().Int64Var(&priority, "priority", 0, "new priority, 1 (highest) to 9999 (lowest)")
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
			ctx := cmd.Context()
			j, err := getJob(ctx, cl, args[0], func(id string) (api.JobInfo, error) { return cl.CancelJob(ctx, id) })
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
		Short: "Print the output of one agenda item of a job",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := a.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			return withID(ctx, "job", args[0], jobCandidates(cl), func(id string) error {
				n := item
				if !cmd.Flags().Changed("item") {
					items, err := cl.JobItems(ctx, id)
					if err != nil {
						return err
					}
					if len(items) != 1 {
						return usagef(cmd, "--item is required: the job has %d items (list them with: cshare job items %s)", len(items), args[0])
					}
					n = items[0].Item
				}
				out, err := cl.JobLogs(ctx, id, n)
				if err != nil {
					return err
				}
				_, err = a.stdout.Write(out)
				return err
			})
		},
	}
	c.Flags().Int64Var(&item, "item", 0, "the agenda item, e.g. the frame number (optional for a one-item job)")
	return c
}

func (a *app) jobItemsCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "items ID",
		Short: "List a job's agenda items: status, attempts, exit code, duration",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := a.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var items []api.ItemInfo
			err = withID(ctx, "job", args[0], jobCandidates(cl), func(id string) error {
				var err error
				items, err = cl.JobItems(ctx, id)
				return err
			})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(a.stdout, items)
			}
			var t table
			t.row("ITEM", "STATUS", "ATTEMPTS", "CODE", "DURATION", "OUTPUT", "MACHINE")
			for _, it := range items {
				code, dur, out := "-", "-", "-"
				if it.Attempts > 0 && it.Status != "pending" && it.Status != "running" {
					code = itoa(it.Code)
				}
				if it.DurationMS > 0 {
					dur = (time.Duration(it.DurationMS) * time.Millisecond).String()
				}
				if it.OutputSize > 0 {
					out = units.BytesSize(float64(it.OutputSize))
				}
				t.row(itoa(it.Item), it.Status, itoa(it.Attempts), code, dur, out, orDash(short(it.Machine)))
			}
			return t.write(a.stdout)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the items as a JSON array")
	return c
}
