package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/node/api"
)

// contract cp and job cp (issue 31): files and directories in and out of
// a container through the node's API, whatever the image holds (Docker's
// archive API, no scp in it); the node carries the copy to the machine
// that runs the container.

// splitRemote reads ID:PATH, the container's side of a copy. A local path
// has no colon, or a slash before its first one (./a:b).
func splitRemote(arg string) (ref, path string, ok bool) {
	i := strings.IndexByte(arg, ':')
	if i <= 0 || strings.ContainsRune(arg[:i], '/') {
		return "", "", false
	}
	return arg[:i], arg[i+1:], true
}

// copyArgs checks SRC DST: exactly one is ID:PATH. in says the copy goes
// into the container.
func copyArgs(cmd *cobra.Command, args []string) (t api.ArchiveTarget, local string, in bool, err error) {
	if len(args) != 2 {
		return t, "", false, usagef(cmd, "give SRC and DST, one of them ID:PATH in the container")
	}
	sref, spath, sremote := splitRemote(args[0])
	dref, dpath, dremote := splitRemote(args[1])
	switch {
	case sremote == dremote:
		return t, "", false, usagef(cmd, "one of SRC and DST is ID:PATH in the container, the other a path here")
	case dremote:
		t.Ref, t.Path, local, in = dref, dpath, args[0], true
	default:
		t.Ref, t.Path, local = sref, spath, args[1]
	}
	if t.Path == "" {
		return t, "", false, usagef(cmd, "give the path in the container after the colon: ID:/root/data")
	}
	return t, local, in, nil
}

// runCopy copies as copyArgs says and prints what it did.
func (a *app) runCopy(cmd *cobra.Command, t api.ArchiveTarget, local string, in bool) error {
	cl, err := a.client()
	if err != nil {
		return err
	}
	remote := t.Ref + ":" + t.Path
	if in {
		res, err := cl.CopyIn(cmd.Context(), t, local)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(a.stdout, "copied %s to %s (%d bytes of archive)\n", text.Escape(local), text.Escape(remote), res.Bytes)
		return err
	}
	n, err := cl.CopyOut(cmd.Context(), t, local)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(a.stdout, "copied %s to %s (%d bytes of archive)\n", text.Escape(remote), text.Escape(local), n)
	return err
}

func (a *app) contractCpCmd() *cobra.Command {
	return &cobra.Command{Use: "cp SRC DST", Short: "Copy files or directories between here and a contract's container: ID:/path names the container's side",
		Long: `Copy a file or a directory into a contract's container (cshare contract cp ./data ID:/root)
or out of it (cshare contract cp ID:/root/out ./out), through the node's API and
Docker's archive API: any image, no scp or rsync in it, while the contract has
its container (running, stopped or expired). A directory DST receives the copy
inside it; another DST is the copy's new name.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			t, local, in, err := copyArgs(cmd, args)
			if err != nil {
				return err
			}
			return a.runCopy(cmd, t, local, in)
		}}
}

func (a *app) jobCpCmd() *cobra.Command {
	var item int64
	c := &cobra.Command{Use: "cp SRC DST --item N", Short: "Copy files or directories between here and the container running an item of a job: JOB_ID:/path names its side",
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			t, local, in, err := copyArgs(cmd, args)
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("item") {
				return usagef(cmd, "--item is required: the item whose container to copy to or from")
			}
			t.Job, t.Item = true, item
			return a.runCopy(cmd, t, local, in)
		}}
	c.Flags().Int64Var(&item, "item", 0, "the agenda item whose container to copy to or from (required)")
	return c
}
