package cli

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
)

// The person's SSH keys in the ledger (issue 31): every node's SSH gateway
// lets them into their contracts and jobs.

func (a *app) userSSHKeyCmd() *cobra.Command {
	return group("ssh-key", "Your SSH public keys in the org's ledger: they enter your contracts and jobs through any node's SSH gateway",
		a.sshKeyAddCmd(), a.sshKeyLsCmd(), a.sshKeyRmCmd())
}

// readSSHKey reads and checks the public key in file (a FILE.pub), for
// flag or argument what: the key's canonical line.
func readSSHKey(cmd *cobra.Command, what, file string) (string, error) {
	fi, err := os.Stat(file)
	if err != nil {
		return "", usagef(cmd, "%s: %v", what, err)
	}
	if fi.Size() > ledger.MaxSSHKeySize+1 {
		return "", usagef(cmd, "%s: %s is %d bytes; a public key is at most %d", what, text.Quote(file), fi.Size(), ledger.MaxSSHKeySize)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", usagef(cmd, "%s: %v", what, err)
	}
	k, err := ledger.CheckSSHKey(what, string(b))
	if err != nil {
		return "", usagef(cmd, "%v", err)
	}
	return k.Line, nil
}

func (a *app) sshKeyAddCmd() *cobra.Command {
	var key string
	c := &cobra.Command{Use: "add FILE.pub", Short: "Record an SSH public key for you in the ledger; prints its fingerprint", Args: exactArgs("FILE.pub"),
		PreRunE: func(cmd *cobra.Command, args []string) (err error) {
			key, err = readSSHKey(cmd, "FILE.pub", args[0])
			return err
		}}
	return viewCmd(a, c, "print the key as JSON",
		func(ctx context.Context, cl *api.Client, _ []string) (api.SSHKeyInfo, error) {
			return cl.AddSSHKey(ctx, key)
		},
		func(k api.SSHKeyInfo) error {
			_, err := fmt.Fprintf(a.stdout, "added %s key %s\n%s\n", k.Type, text.Escape(k.Comment), k.Fingerprint)
			return err
		})
}

func (a *app) sshKeyLsCmd() *cobra.Command {
	c := &cobra.Command{Use: "ls", Aliases: []string{"list"}, Short: "List your SSH keys in the ledger", Args: exactArgs()}
	return listCmd(a, c, "keys", []string{"FINGERPRINT", "TYPE", "COMMENT", "ADDED"},
		func(ctx context.Context, cl *api.Client, _ []string, _ api.Page, emit func(api.SSHKeyInfo) error) error {
			ks, err := cl.SSHKeys(ctx)
			if err != nil {
				return err
			}
			for _, k := range ks {
				if err := emit(k); err != nil {
					return err
				}
			}
			return nil
		},
		func(k api.SSHKeyInfo) []string {
			return []string{k.Fingerprint, k.Type, orDash(k.Comment), a.ago(k.Added)}
		},
		func(k api.SSHKeyInfo) string { return k.Fingerprint })
}

func (a *app) sshKeyRmCmd() *cobra.Command {
	c := &cobra.Command{Use: "rm FINGERPRINT", Aliases: []string{"remove"}, Short: "Remove one of your SSH keys from the ledger: it stops working at once",
		Args: exactArgs("FINGERPRINT"),
		PreRunE: func(cmd *cobra.Command, args []string) error {
			if err := ledger.CheckSSHFingerprint("FINGERPRINT", args[0]); err != nil {
				return usagef(cmd, "%v", err)
			}
			return nil
		}}
	return viewCmd(a, c, "print the removed key as JSON",
		func(ctx context.Context, cl *api.Client, args []string) (api.SSHKeyInfo, error) {
			return cl.RemoveSSHKey(ctx, args[0])
		},
		func(k api.SSHKeyInfo) error {
			_, err := fmt.Fprintf(a.stdout, "removed %s\n", k.Fingerprint)
			return err
		})
}
