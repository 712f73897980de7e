package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/node/api"
)

// EnvDataDir names the environment variable that sets the default data dir.
const EnvDataDir = "CSHARE_DATA_DIR"

// Main runs the CLI with args (without the program name), writing to stdout
// and stderr, and returns the process exit code: 0 on success, 1 on a runtime
// error, 2 on a usage error.
func Main(args []string, stdout, stderr io.Writer) int {
	return newApp(stdout, stderr).run(args)
}

// newApp is the state of one run of the CLI, with the real clock.
func newApp(stdout, stderr io.Writer) *app {
	return &app{stdout: stdout, stderr: stderr, now: time.Now, runNode: runNodeDaemon, loginName: loginName,
		stopTimeout: 30 * time.Second, stopInterval: 200 * time.Millisecond}
}

// run runs the CLI with args and returns the process exit code, as Main.
func (a *app) run(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := a.rootCmd()
	root.SetArgs(args)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	return a.report(cmd, err)
}

// app is the state one run of the CLI shares between its commands.
type app struct {
	stdout, stderr io.Writer
	dataDir        string           // --data-dir, defaulted in the root's PersistentPreRun
	apiAddr        string           // --api
	now            func() time.Time // the clock of relative times (age, ago); tests replace it
	// runNode is what `node run` runs (runNodeDaemon; tests replace it).
	runNode func(ctx context.Context, o runOptions) error
	// stopTimeout and stopInterval: how `node stop` waits for the API to
	// go away (tests shorten them).
	stopTimeout, stopInterval time.Duration
	// loginName is the login name of the user running the CLI, the default
	// person name after $USER (tests replace it).
	loginName func() string
}

// usageError is a mistake in how the command was called: exit 2.
type usageError struct {
	cmd string // command path, for the --help hint
	msg string
}

func (e *usageError) Error() string { return e.msg }

// usagef builds a usage error for cmd.
func usagef(cmd *cobra.Command, format string, a ...any) error {
	return &usageError{cmd: cmd.CommandPath(), msg: fmt.Sprintf(format, a...)}
}

// exitError carries its own exit code. quiet: another program (ssh) has
// said all there is to say, and the CLI prints nothing more.
type exitError struct {
	code  int
	err   error
	quiet bool
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}
func (e *exitError) Unwrap() error { return e.err }

// report prints err as one line on stderr and returns the exit code. The
// line is escaped: errors echo names and references, some of them other
// members'.
func (a *app) report(cmd *cobra.Command, err error) int {
	var ue *usageError
	var ee *exitError
	switch {
	case errors.As(err, &ee) && ee.quiet:
		return ee.code
	case errors.As(err, &ue):
		fmt.Fprintf(a.stderr, "cshare: %s (see %s --help)\n", text.Escape(oneLine(ue.msg)), ue.cmd)
		return 2
	case errors.As(err, &ee):
		fmt.Fprintf(a.stderr, "cshare: %s\n", text.Escape(oneLine(a.explain(cmd, ee.err))))
		return ee.code
	default:
		fmt.Fprintf(a.stderr, "cshare: %s\n", text.Escape(oneLine(a.explain(cmd, err))))
		return 1
	}
}

// explain turns an error from the API client into what the user should
// read: an error about one field of the request names cmd's flag for it.
func (a *app) explain(cmd *cobra.Command, err error) string {
	if errors.Is(err, api.ErrInterrupted) {
		return "interrupted before the node answered; the node drops the request unless it had finished it"
	}
	if errors.Is(err, api.ErrNodeNotRunning) || errors.Is(err, syscall.ECONNREFUSED) {
		if a.apiAddr != "" {
			return fmt.Sprintf("no node answers at %s (--api) for data dir %s; start one with: cshare node run --data-dir %s --api %s",
				a.apiAddr, a.dataDir, a.dataDir, a.apiAddr)
		}
		return fmt.Sprintf("no node running for data dir %s; start one with: cshare node run --data-dir %s", a.dataDir, a.dataDir)
	}
	var se *api.StatusError
	if errors.As(err, &se) {
		return flagMessage(cmd, se)
	}
	return err.Error()
}

// oneLine folds a message onto one line.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	s = strings.ReplaceAll(s, "\r\n", "\n")
	return strings.ReplaceAll(s, "\n", "; ")
}

// defaultDataDir is $CSHARE_DATA_DIR, else ~/.cshare.
func defaultDataDir() string {
	if d := os.Getenv(EnvDataDir); d != "" {
		return d
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".cshare")
	}
	return ".cshare"
}

// expandHome expands a leading "~/" (for a quoted --data-dir "~/x").
func expandHome(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if h, err := os.UserHomeDir(); err == nil {
			return filepath.Join(h, p[1:])
		}
	}
	return p
}

// client dials the node of the data dir.
func (a *app) client() (*api.Client, error) {
	return api.DialDataDir(a.dataDir, a.apiAddr)
}

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "cshare",
		Short: "cshare: a peer-to-peer compute mesh",
		Long: `cshare runs one node per machine of an organization; nodes gossip, share
one signed ledger and schedule jobs together. Every command except
"node run", "smartshare plan", "user" and "version" talks to the local node.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.ArbitraryArgs,
		RunE:          groupRun,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			if a.dataDir == "" {
				a.dataDir = defaultDataDir()
			}
			a.dataDir = expandHome(a.dataDir)
			return nil
		},
	}
	root.CompletionOptions.HiddenDefaultCmd = true
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		if c.Name() == "submit" && strings.Contains(err.Error(), "unknown") {
			return usagef(c, "%v; put the job's command after --, e.g. cshare job submit -- CMD ARGS", err)
		}
		return usagef(c, "%v", err)
	})
	pf := root.PersistentFlags()
	pf.StringVar(&a.dataDir, "data-dir", "", "the node's data dir (default $"+EnvDataDir+", else ~/.cshare)")
	pf.StringVar(&a.apiAddr, "api", "", "the node API's HOST:PORT, instead of the data dir's api.addr (node run: where to listen, default 127.0.0.1:7480)")

	root.AddCommand(
		a.nodeCmd(),
		a.orgCmd(),
		a.machineCmd(),
		a.memberCmd(),
		a.jobCmd(),
		a.smartshareCmd(),
		a.offerCmd(),
		a.contractCmd(),
		a.userCmd(),
		a.versionCmd(),
		a.datasetCmd(),
		a.eventsCmd(),
	)
	a.completeRefs(root)
	return root
}

// group builds a command that only holds subcommands.
func group(use, short string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ArbitraryArgs,
		RunE:  groupRun,
	}
	c.AddCommand(subs...)
	return c
}

// groupRun is the RunE of commands that only hold subcommands: help without
// arguments, a usage error for an unknown subcommand.
func groupRun(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return cmd.Help()
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return &usageError{cmd: cmd.CommandPath(), msg: msg}
}

// exactArgs requires the named positional arguments.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == len(names) {
			for i, a := range args {
				if strings.TrimSpace(a) == "" {
					return usagef(cmd, "%s must not be empty", names[i])
				}
			}
			return nil
		}
		if len(args) < len(names) {
			return usagef(cmd, "missing %s", strings.Join(names[len(args):], " and "))
		}
		if len(names) == 0 {
			return usagef(cmd, "unexpected argument %q", args[0])
		}
		return usagef(cmd, "too many arguments: want %s, got %d", strings.Join(names, " "), len(args))
	}
}
