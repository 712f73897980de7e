package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cshare/cshare/internal/atomicfile"
	"github.com/cshare/cshare/node/api"
)

// ssh into a contract or a job's running item through the SSH gateway of
// the machine that runs it (issue 31): the node says where that gateway
// is and what its host key is (from the machine's signed heartbeat); the
// system's ssh does the rest, checking the host key against that.

// sshFlags are what contract ssh and job ssh pass to ssh.
type sshFlags struct {
	identity string
	opts     []string
}

func (f *sshFlags) add(c *cobra.Command) {
	c.Flags().StringVarP(&f.identity, "identity", "i", "", "the private key ssh signs with (ssh -i)")
	c.Flags().StringArrayVarP(&f.opts, "ssh-opt", "o", nil, "an option for ssh, like ServerAliveInterval=30 (ssh -o), repeatable")
}

// knownHostsFile is where the CLI keeps the host keys of the gateways it
// reached, one line per machine under the alias cshare-MACHINE.
func (a *app) knownHostsFile() string { return filepath.Join(a.dataDir, "ssh", "known_hosts") }

// hostAlias is the name a machine's gateway key goes by in knownHostsFile.
func hostAlias(machine string) string { return "cshare-" + machine }

// rememberHostKey writes t's host key into file under its machine's alias,
// replacing what it had for that machine: the key comes from the
// machine's signed heartbeat, so it is the machine's own.
func rememberHostKey(file string, t api.SSHTarget) error {
	if t.HostKey == "" || strings.ContainsAny(t.HostKey, "\n\r") || strings.ContainsAny(t.Machine, " \n\r") {
		return fmt.Errorf("machine %s announces no usable SSH host key", t.Machine)
	}
	alias := hostAlias(t.Machine)
	var keep []string
	if b, err := os.ReadFile(file); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if l != "" && !strings.HasPrefix(l, alias+" ") {
				keep = append(keep, l)
			}
		}
	}
	keep = append(keep, alias+" "+t.HostKey)
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(file, []byte(strings.Join(keep, "\n")+"\n"), 0o600)
}

// sshArgs is ssh's command line to t, checking its host key in
// knownHosts, with f's identity and options, then the remote command if
// any (ssh joins its words with spaces for the remote shell).
func sshArgs(t api.SSHTarget, knownHosts string, f sshFlags, remote []string) []string {
	args := []string{"-p", strconv.Itoa(t.Port), "-o", "HostKeyAlias=" + hostAlias(t.Machine),
		"-o", "UserKnownHostsFile=" + knownHosts, "-o", "StrictHostKeyChecking=yes"}
	if f.identity != "" {
		args = append(args, "-i", f.identity)
	}
	for _, o := range f.opts {
		args = append(args, "-o", o)
	}
	args = append(args, "--", t.User+"@"+t.Host)
	return append(args, remote...)
}

// runSSH runs the system's ssh to t, on this terminal, and exits with
// its exit code.
func (a *app) runSSH(cmd *cobra.Command, t api.SSHTarget, f sshFlags, remote []string) error {
	bin, err := exec.LookPath("ssh")
	if err != nil {
		return errors.New("no ssh on this machine's PATH; install OpenSSH's client (apt-get install openssh-client), or use: cshare contract ssh-url")
	}
	file := a.knownHostsFile()
	if err := rememberHostKey(file, t); err != nil {
		return err
	}
	c := exec.CommandContext(cmd.Context(), bin, sshArgs(t, file, f, remote)...)
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, a.stdout, a.stderr
	err = c.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return &exitError{code: ee.ExitCode(), quiet: true}
	}
	return err
}

// remoteArgs splits a command's arguments at --: the IDs before, the
// remote command after.
func remoteArgs(cmd *cobra.Command, args []string) ([]string, []string) {
	if dash := cmd.ArgsLenAtDash(); dash >= 0 {
		return args[:dash], args[dash:]
	}
	return args, nil
}

func (a *app) contractSSHCmd() *cobra.Command {
	var f sshFlags
	c := &cobra.Command{Use: "ssh ID [-i KEY] [-o OPT]... [-- CMD ARGS...]",
		Short: "Open a shell (or run CMD) inside a contract's container, through its host's SSH gateway",
		Long: `Open a shell, or run CMD, inside a running contract's container with the system's
ssh, through the SSH gateway of its host machine (node.yaml ssh: {listen: ":2222"}).
Your keys in the ledger (cshare user ssh-key add) or the contract's own key
(contract create --ssh-key) let you in; the gateway's host key comes from its
machine's signed heartbeat. ssh's exit code is this command's.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, remote := remoteArgs(cmd, args)
			if len(ids) != 1 || strings.TrimSpace(ids[0]) == "" {
				return usagef(cmd, "give one contract ID, then -- and the command, if any")
			}
			cl, err := a.client()
			if err != nil {
				return err
			}
			t, err := cl.ContractSSH(cmd.Context(), ids[0])
			if err != nil {
				return err
			}
			return a.runSSH(cmd, t, f, remote)
		}}
	f.add(c)
	return c
}

func (a *app) contractSSHURLCmd() *cobra.Command {
	c := &cobra.Command{Use: "ssh-url ID", Short: "Print ssh://ID@HOST:PORT, the contract's SSH gateway address", Args: exactArgs("ID")}
	return viewCmd(a, c, "print the gateway's address, user and host key as JSON",
		func(ctx context.Context, cl *api.Client, args []string) (api.SSHTarget, error) {
			return cl.ContractSSH(ctx, args[0])
		},
		func(t api.SSHTarget) error {
			_, err := fmt.Fprintln(a.stdout, t.URL)
			return err
		})
}

func (a *app) jobSSHCmd() *cobra.Command {
	var f sshFlags
	var item int64
	c := &cobra.Command{Use: "ssh ID --item N [-i KEY] [-o OPT]... [-- CMD ARGS...]",
		Short: "Open a shell (or run CMD) inside the container running an item of a job, through its machine's SSH gateway",
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, remote := remoteArgs(cmd, args)
			if len(ids) != 1 || strings.TrimSpace(ids[0]) == "" {
				return usagef(cmd, "give one job ID, then -- and the command, if any")
			}
			if !cmd.Flags().Changed("item") {
				return usagef(cmd, "--item is required: the item whose container to enter")
			}
			cl, err := a.client()
			if err != nil {
				return err
			}
			t, err := cl.JobSSH(cmd.Context(), ids[0], item)
			if err != nil {
				return err
			}
			return a.runSSH(cmd, t, f, remote)
		}}
	c.Flags().Int64Var(&item, "item", 0, "the agenda item whose container to enter (required)")
	f.add(c)
	return c
}
