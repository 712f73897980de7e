package cli

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/jobspec"
	"github.com/cshare/cshare/node/api"
)

func (a *app) orgCmd() *cobra.Command {
	return group("org", "Create an org, show it, print its key, invite, change settings and policies, transfer ownership, delete it, its usage",
		a.orgCreateCmd(), a.orgShowCmd(), a.orgKeyCmd(), a.orgInviteCmd(), a.orgSetCmd(), a.orgTransferCmd(), a.orgDeleteCmd(), a.orgUsageCmd(), a.orgExportHistoryCmd())
}

func (a *app) orgCreateCmd() *cobra.Command {
	var name, desc, user string
	var req api.OrgCreate
	c := &cobra.Command{
		Use:   "create --name NAME",
		Short: "Create an org with this node as its owner; prints the org key last",
		Args:  exactArgs(),
		PreRunE: func(cmd *cobra.Command, args []string) error {
			name = strings.TrimSpace(name)
			if name == "" {
				return usagef(cmd, "--name is required: the org's name, e.g. --name acme")
			}
			if err := text.CheckName("--name", name); err != nil {
				return usagef(cmd, "%v", err)
			}
			if err := text.CheckDescription("--description", desc); err != nil {
				return usagef(cmd, "%v", err)
			}
			userName, err := a.userName(cmd, user)
			req = api.OrgCreate{Name: name, Description: desc, UserName: userName}
			return err
		},
	}
	c.Flags().StringVar(&name, "name", "", "the org's name (required)")
	c.Flags().StringVar(&desc, "description", "", "a description of the org")
	addUserName(c, &user)
	return viewCmd(a, c, "print the result as JSON",
		func(ctx context.Context, cl *api.Client, _ []string) (api.KeyResult, error) {
			return cl.CreateOrg(ctx, req)
		},
		func(res api.KeyResult) error {
			fmt.Fprintf(a.stdout, "created org %s (%s); this node is its owner\n", text.Escape(name), res.Org)
			fmt.Fprintf(a.stdout, "machines join with: cshare node join --org-key KEY; the org key:\n")
			_, err := fmt.Fprintln(a.stdout, res.Key)
			return err
		})
}

func (a *app) orgShowCmd() *cobra.Command {
	c := &cobra.Command{Use: "show", Short: "Show the org: identity, ledger, settings", Args: exactArgs()}
	return viewCmd(a, c, "print the org as JSON",
		func(ctx context.Context, cl *api.Client, _ []string) (api.OrgInfo, error) { return cl.Org(ctx) },
		func(o api.OrgInfo) error { return printOrg(a, o) })
}

func printOrg(a *app, o api.OrgInfo) error {
	s := o.Settings
	if err := printOrgRows(a, o, s); err != nil || len(o.Capped) == 0 {
		return err
	}
	// Cut off by the ledger's budget of entries without effect (docs/design.md §5.8).
	return kv(a.stdout, [2]string{"capped machines", strings.Join(o.Capped, ", ")})
}

func printOrgRows(a *app, o api.OrgInfo, s ledger.Settings) error {
	return kv(a.stdout,
		[2]string{"id", o.ID},
		[2]string{"name", o.Name},
		[2]string{"description", orDash(o.Description)},
		[2]string{"owner", personRef(o.Owner, o.OwnerName)},
		[2]string{"created", orDash(o.Created)},
		[2]string{"members", fmt.Sprint(o.Members)},
		[2]string{"machines", fmt.Sprint(o.Machines)},
		[2]string{"state hash", orDash(o.StateHash)},
		[2]string{"entries", fmt.Sprint(o.Entries)},
		[2]string{"heads", orDash(strings.Join(o.Heads, ", "))},
		[2]string{"require_machine_approval", strconv.FormatBool(s.RequireMachineApproval)},
		[2]string{"smartshare.mode", s.SmartShare.Mode},
		[2]string{"smartshare.preempt_policy", s.SmartShare.PreemptPolicy},
		[2]string{"smartshare.default_max_cpus", itoa(s.SmartShare.DefaultMaxCPUs)},
		[2]string{"smartshare.max_cpus_limit", itoa(s.SmartShare.MaxCPUsLimit)},
		[2]string{"jobs.retain", retainText(s.Jobs.RetainMS)},
		[2]string{"policy.max_machines_per_user", policyCount(o.Policies.MaxMachinesPerUser)},
		[2]string{"policy.max_concurrent_jobs_per_user", policyCount(o.Policies.MaxConcurrentJobsPerUser)},
		[2]string{"policy.max_job_runtime", policySeconds(o.Policies.MaxJobRuntime)},
		[2]string{"policy.max_job_memory", policyMB(o.Policies.MaxJobMemory)},
		[2]string{"policy.default_item_timeout", policySeconds(o.Policies.DefaultItemTimeout)},
		[2]string{"total machines", itoa(o.Totals.Machines)},
		[2]string{"available capacity", fmt.Sprintf("%.2f CPUs, %s memory, %d GPUs", o.Totals.AvailableCPUs,
			jobspec.FormatMB(o.Totals.AvailableMemoryMB), o.Totals.AvailableGPUs)},
		[2]string{"active jobs", itoa(o.Totals.ActiveJobs)},
		[2]string{"compute time", hours(o.Totals.CPUSeconds) + " (CPU)"},
	)
}

// retainText is a jobs.retain in ms as org set takes it ("kept" for 0).
func retainText(ms int64) string {
	if ms == 0 {
		return "kept"
	}
	return (time.Duration(ms) * time.Millisecond).String()
}

func policyCount(n int64) string {
	if n == 0 {
		return "none"
	}
	return itoa(n)
}

func policySeconds(s int64) string {
	if s == 0 {
		return "none"
	}
	return (time.Duration(s) * time.Second).String()
}

func policyMB(mb int64) string {
	if mb == 0 {
		return "none"
	}
	return jobspec.FormatMB(mb)
}

func (a *app) orgKeyCmd() *cobra.Command {
	var rotate bool
	c := &cobra.Command{
		Use:   "key",
		Short: "Print the org key (last line); --rotate issues a new one and retires the old",
		Args:  exactArgs(),
	}
	c.Flags().BoolVar(&rotate, "rotate", false, "issue a new org key; the old one stops working (admins)")
	return viewCmd(a, c, "print the result as JSON",
		func(ctx context.Context, cl *api.Client, _ []string) (api.KeyResult, error) {
			return cl.OrgKey(ctx, rotate)
		},
		func(res api.KeyResult) error {
			if rotate {
				fmt.Fprintln(a.stdout, "rotated the org key; the old key is refused from now on. The new key:")
			}
			_, err := fmt.Fprintln(a.stdout, res.Key)
			return err
		})
}

// parseExpiry reads --expires: a Go duration, whole days ("7d"), or "0" or
// "never" for no expiry. It returns what the API takes ("0" = never).
func parseExpiry(s string) (string, error) {
	s = strings.TrimSpace(s)
	switch strings.ToLower(s) {
	case "0", "never", "none":
		return "0", nil
	case "":
		return "", fmt.Errorf("--expires: give a duration such as 72h or 7d, or never")
	}
	var d time.Duration
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.ParseInt(n, 10, 32)
		if err != nil {
			return "", fmt.Errorf("--expires: %q is not a duration; use e.g. 72h, 7d or never", s)
		}
		d = time.Duration(days) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return "", fmt.Errorf("--expires: %q is not a duration; use e.g. 72h, 7d or never", s)
		}
	}
	if d <= 0 {
		return "", fmt.Errorf("--expires: %s is not allowed; give a positive duration, or never", s)
	}
	return d.String(), nil
}

func (a *app) orgInviteCmd() *cobra.Command {
	var role, expires string
	var uses int64
	var req api.InviteRequest
	c := &cobra.Command{
		Use:   "invite",
		Short: "Issue an invite code (last line) for node join --org-key or member join --invite",
		Args:  exactArgs(),
		PreRunE: func(cmd *cobra.Command, args []string) error {
			if role != "member" && role != "admin" {
				return usagef(cmd, "--role: %q is not a role; use member or admin", role)
			}
			exp, err := parseExpiry(expires)
			if err != nil {
				return usagef(cmd, "%v", err)
			}
			if uses < 0 {
				return usagef(cmd, "--uses: %d is not allowed; give 1 or more, or 0 for unlimited", uses)
			}
			req = api.InviteRequest{Role: role, Expires: exp, Uses: uses}
			return nil
		},
	}
	c.Flags().StringVar(&role, "role", "member", "the role the invite grants: member or admin")
	c.Flags().StringVar(&expires, "expires", "72h", "how long the code is valid: a duration (72h, 7d), or 0/never")
	c.Flags().Int64Var(&uses, "uses", 1, "how many joins the code admits; 0 = unlimited")
	return viewCmd(a, c, "print the result as JSON",
		func(ctx context.Context, cl *api.Client, _ []string) (api.KeyResult, error) {
			return cl.Invite(ctx, req)
		},
		func(res api.KeyResult) error {
			r := orDash(res.Role)
			e := "never"
			if res.Expires != "" && res.Expires != "0" {
				e = res.Expires
			}
			u := "unlimited"
			if res.Uses > 0 {
				u = fmt.Sprint(res.Uses)
			}
			fmt.Fprintf(a.stdout, "invite for role %s, expires %s, uses %s; join with: cshare member join --invite CODE. The code:\n", r, e, u)
			_, err := fmt.Fprintln(a.stdout, res.Key)
			return err
		})
}

// settingKey is the shape of an org setting's name.
var settingKey = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$`)

// parseSettings reads KEY=VALUE arguments.
func parseSettings(args []string) (map[string]string, error) {
	set := make(map[string]string, len(args))
	for _, arg := range args {
		k, v, ok := strings.Cut(arg, "=")
		k = strings.TrimSpace(k)
		switch {
		case !ok:
			return nil, fmt.Errorf("%q is not KEY=VALUE, e.g. smartshare.mode=jobs", arg)
		case !settingKey.MatchString(k):
			return nil, fmt.Errorf("%q: %q is not a setting name; names look like smartshare.preempt_policy", arg, k)
		case v == "":
			return nil, fmt.Errorf("%q: the value is empty", arg)
		}
		switch k {
		case "name":
			v = strings.TrimSpace(v)
			if err := text.CheckName("name", v); err != nil {
				return nil, err
			}
		case "description":
			if err := text.CheckDescription("description", v); err != nil {
				return nil, err
			}
		}
		if _, dup := set[k]; dup {
			return nil, fmt.Errorf("%s is given twice", k)
		}
		set[k] = v
	}
	return set, nil
}

func (a *app) orgSetCmd() *cobra.Command {
	var set map[string]string
	c := &cobra.Command{
		Use:   "set KEY=VALUE...",
		Short: "Change org settings (admins), e.g. smartshare.preempt_policy=passive",
		Long: `Change org settings (admins). The settings:

  name=NAME, description=TEXT
  require_machine_approval=true|false
  smartshare.mode=jobs|none
  smartshare.preempt_policy=aggressive|passive|disabled
  smartshare.default_max_cpus=N      (-1 = max_cpus_limit)
  smartshare.max_cpus_limit=N
  market.delete_after=DURATION       (how long after its end a contract's container
                                      and disk are kept, like 48h; 0 = 48h)
  ledger.checkpoint_every=N|DURATION (an admin machine writes a checkpoint every N
                                      entries, 100..10000000, or every 1m..30d;
                                      0 = every 10000 entries)
  ledger.retain=DURATION             (entries below a checkpoint older than this are
                                      pruned but the authority ones; 0 = keep;
                                      cshare org export-history saves them first)
  jobs.retain=DURATION               (finished jobs that ended longer ago than this,
                                      1h..10 years like 720h or 30d, leave every
                                      node's state at the next checkpoint; 0 = kept)

Org policies (every node enforces them from the ledger; 0 or none removes one):
  policy.max_machines_per_user=N       a person's machines beyond N cannot join
  policy.max_concurrent_jobs_per_user=N  a person's jobs beyond N wait, queued
  policy.max_job_runtime=DURATION      a job running that long after its first
                                      start fails (like 24h or 2d; a bare number
                                      is seconds)
  policy.max_job_memory=SIZE           a job asking more memory per instance is
                                      refused (like 64g; a bare number is MB)
  policy.default_item_timeout=DURATION  the org's item timeout (job submit
                                      --item-timeout overrides it)

The change is one ledger entry and takes effect on every node.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef(cmd, "missing KEY=VALUE, e.g. cshare org set smartshare.preempt_policy=passive")
			}
			return nil
		},
		PreRunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if set, err = parseSettings(args); err != nil {
				return usagef(cmd, "%v", err)
			}
			return nil
		},
	}
	return viewCmd(a, c, "print the org after the change as JSON",
		func(ctx context.Context, cl *api.Client, _ []string) (api.OrgInfo, error) {
			return cl.SetSettings(ctx, api.SettingsRequest{Set: set})
		},
		func(api.OrgInfo) error {
			keys := make([]string, 0, len(set))
			for k := range set {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				fmt.Fprintf(a.stdout, "set %s=%s\n", k, text.Escape(set[k]))
			}
			return nil
		})
}

func (a *app) orgTransferCmd() *cobra.Command {
	var to string
	c := &cobra.Command{
		Use:   "transfer --to PERSON",
		Short: "Make an admin the org's owner (the owner only); the owner becomes an admin",
		Long: `Make an admin the org's owner. Only the owner may; the new owner must be an
admin already (cshare member set-role PERSON admin), and the old owner stays
an admin. PERSON is a member's ID (or a unique prefix or suffix of at least 4
characters) or name, as cshare member ls shows them.`,
		Args: exactArgs(),
		PreRunE: func(cmd *cobra.Command, args []string) error {
			to = strings.TrimSpace(to)
			if to == "" {
				return usagef(cmd, "--to is required: the admin who becomes the owner (an ID or name from cshare member ls)")
			}
			return nil
		},
	}
	c.Flags().StringVar(&to, "to", "", "the admin who becomes the owner: a person's ID or name (required)")
	return viewCmd(a, c, "print the org after the transfer as JSON",
		func(ctx context.Context, cl *api.Client, _ []string) (api.OrgInfo, error) {
			return cl.TransferOrg(ctx, to)
		},
		func(o api.OrgInfo) error {
			_, err := fmt.Fprintf(a.stdout, "transferred org %s to person %s, its owner now; the old owner is an admin\n",
				text.Escape(o.Name), text.Escape(personRef(o.Owner, o.OwnerName)))
			return err
		})
}

// msOrNone renders a duration in ms as a user writes it, "none" for 0.
func msOrNone(ms int64) string {
	if ms == 0 {
		return "none"
	}
	return jobspec.FormatMS(ms)
}
