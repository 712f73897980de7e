package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/internal/userkey"
)

// The user commands work on the data dir's user.key directly: no node needs
// to run.

func (a *app) userCmd() *cobra.Command {
	return group("user", "This machine's person: create, show, export and import the key in user.key",
		a.userInitCmd(), a.userShowCmd(), a.userExportCmd(), a.userImportCmd(), a.userSSHKeyCmd())
}

// userInfo is what `user show --json` and `user init --json` print.
type userInfo struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// personText is "NAME (ID)", escaped for a terminal.
func personText(k *userkey.Key) string { return text.Escape(k.Name) + " (" + k.ID + ")" }

// existingPerson loads the data dir's key for a command that would replace
// it: nil when there is none, and without force an error naming the person
// there and what --force would do (what is the action, e.g. "importing
// alice (ID)").
func (a *app) existingPerson(force bool, what string) (*userkey.Key, error) {
	old, err := userkey.Load(a.dataDir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil && force:
		return nil, nil // unreadable: --force replaces it
	case err != nil:
		return nil, fmt.Errorf("%v; %s replaces it only with --force", err, what)
	case force:
		return old, nil
	}
	return old, fmt.Errorf("this data dir already has person %s; %s changes who this machine acts for: pass --force to replace it",
		personText(old), what)
}

func (a *app) userInitCmd() *cobra.Command {
	var name string
	var force bool
	var old *userkey.Key
	c := &cobra.Command{
		Use:   "init --name NAME",
		Short: "Create this person's key (user.key in the data dir); prints the person's ID last",
		Long: `Create this person's key: an Ed25519 key and a name, kept in user.key in the
data dir (mode 0600). The machine acts for this person in the orgs it joins;
the same key on several machines (cshare user export, cshare user import) makes
them one member. The person's ID is the last line of the output.`,
		Args: exactArgs(),
	}
	c.Flags().StringVar(&name, "name", "", "your name as the org's members see it (required)")
	c.Flags().BoolVar(&force, "force", false, "replace the data dir's person with a new one (this machine then acts for the new person)")
	return showCmd(a, c, "print the person as JSON",
		func(cmd *cobra.Command, _ []string) (userInfo, error) {
			name = strings.TrimSpace(name)
			if name == "" {
				return userInfo{}, usagef(cmd, "--name is required: your name as the org's members see it, e.g. --name alice")
			}
			if err := text.CheckName("--name", name); err != nil {
				return userInfo{}, usagef(cmd, "%v", err)
			}
			var err error
			if old, err = a.existingPerson(force, "creating a new person"); err != nil {
				return userInfo{}, err
			}
			k, err := userkey.New(name)
			if err != nil {
				return userInfo{}, err
			}
			if err := userkey.Save(a.dataDir, k, true); err != nil {
				return userInfo{}, err
			}
			return userInfo{ID: k.ID, Name: k.Name}, nil
		},
		func(k userInfo) error {
			if old != nil {
				fmt.Fprintf(a.stdout, "replaced person %s: this machine now acts for the new person\n", personText(old))
			}
			fmt.Fprintf(a.stdout, "created person %s in %s (keep it private; carry it to another machine with cshare user export). The person's ID:\n",
				text.Escape(k.Name), userkey.Path(a.dataDir))
			_, err := fmt.Fprintln(a.stdout, k.ID)
			return err
		})
}

// noPerson is the error of a command that needs the data dir's person.
func (a *app) noPerson(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no person key in data dir %s; create one with: cshare user init --name NAME, or bring one with: cshare user import FILE", a.dataDir)
	}
	return err
}

func (a *app) userShowCmd() *cobra.Command {
	c := &cobra.Command{Use: "show", Short: "Show this machine's person: ID and name", Args: exactArgs()}
	return showCmd(a, c, "print the person as JSON",
		func(*cobra.Command, []string) (userInfo, error) {
			k, err := userkey.Load(a.dataDir)
			if err != nil {
				return userInfo{}, a.noPerson(err)
			}
			return userInfo{ID: k.ID, Name: k.Name}, nil
		},
		func(k userInfo) error { return kv(a.stdout, [2]string{"id", k.ID}, [2]string{"name", k.Name}) })
}

// passphrase reads --passphrase-file when it was given; a bad file is a
// usage error naming the flag.
func passphrase(cmd *cobra.Command, path string) ([]byte, error) {
	if !cmd.Flags().Changed("passphrase-file") {
		return nil, nil
	}
	if strings.TrimSpace(path) == "" {
		return nil, usagef(cmd, "--passphrase-file: give the path of a file that holds the passphrase")
	}
	p, err := userkey.ReadPassphrase(path)
	if err != nil {
		return nil, usagef(cmd, "--passphrase-file: %v", err)
	}
	return p, nil
}

// samePath reports whether a and b name the same file path.
func samePath(a, b string) bool {
	aa, err1 := filepath.Abs(a)
	bb, err2 := filepath.Abs(b)
	return err1 == nil && err2 == nil && aa == bb
}

func (a *app) userExportCmd() *cobra.Command {
	var out, passFile string
	var force bool
	c := &cobra.Command{
		Use:   "export --out FILE",
		Short: "Write this machine's person to FILE (mode 0600), for cshare user import on another machine",
		Long: `Write this machine's person (ID, name and key) to FILE, mode 0600, for
cshare user import on another machine. With --passphrase-file F the key is
encrypted with the passphrase in F (scrypt and XChaCha20-Poly1305); without it
anyone who can read FILE can act as this person.`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(out) == "" {
				return usagef(cmd, "--out is required: the file to write, e.g. --out alice.cshare-person")
			}
			if samePath(out, userkey.Path(a.dataDir)) {
				return usagef(cmd, "--out: %s is the data dir's own user.key; write the export elsewhere", out)
			}
			pass, err := passphrase(cmd, passFile)
			if err != nil {
				return err
			}
			k, err := userkey.Load(a.dataDir)
			if err != nil {
				return a.noPerson(err)
			}
			b, err := userkey.Export(k, pass)
			if err != nil {
				return err
			}
			if err := userkey.WriteExport(out, b, force); err != nil {
				return err
			}
			how := "not encrypted: anyone who can read it can act as this person (pass --passphrase-file F to encrypt it)"
			if pass != nil {
				how = "encrypted with the passphrase in " + passFile
			}
			_, err = fmt.Fprintf(a.stdout, "wrote person %s to %s (mode 0600), %s\n", personText(k), out, how)
			return err
		},
	}
	c.Flags().StringVar(&out, "out", "", "the file to write (required)")
	c.Flags().StringVar(&passFile, "passphrase-file", "", "encrypt with the passphrase in this file (one trailing newline is dropped)")
	c.Flags().BoolVar(&force, "force", false, "overwrite FILE if it exists")
	return c
}

func (a *app) userImportCmd() *cobra.Command {
	var passFile string
	var force bool
	c := &cobra.Command{
		Use:   "import FILE",
		Short: "Make the person in FILE (from cshare user export) this machine's person; prints the ID last",
		Args:  exactArgs("FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			file := args[0]
			pass, err := passphrase(cmd, passFile)
			if err != nil {
				return err
			}
			k, err := userkey.ImportFile(file, pass)
			var pe *fs.PathError
			switch {
			case errors.As(err, &pe):
				return err // names the file
			case err != nil:
				return fmt.Errorf("%s: %w", file, err)
			}
			old, err := a.existingPerson(force, "importing "+personText(k))
			switch {
			case old != nil && old.ID == k.ID:
				// The same person again: no --force needed.
				if old.Name == k.Name {
					fmt.Fprintf(a.stdout, "this data dir already has person %s; nothing changed\n", personText(k))
					_, err := fmt.Fprintln(a.stdout, k.ID)
					return err
				}
			case err != nil:
				return err
			}
			if err := userkey.Save(a.dataDir, k, true); err != nil {
				return err
			}
			switch {
			case old != nil && old.ID == k.ID:
				fmt.Fprintf(a.stdout, "this data dir already has person %s; renamed %s to %s\n", k.ID, text.Escape(old.Name), text.Escape(k.Name))
			case old != nil:
				fmt.Fprintf(a.stdout, "replaced person %s with %s: this machine now acts for %s\n", personText(old), personText(k), text.Escape(k.Name))
			default:
				fmt.Fprintf(a.stdout, "imported person %s into %s: this machine now acts for %s\n", personText(k), userkey.Path(a.dataDir), text.Escape(k.Name))
			}
			_, err = fmt.Fprintln(a.stdout, k.ID)
			return err
		},
	}
	c.Flags().StringVar(&passFile, "passphrase-file", "", "decrypt with the passphrase in this file (one trailing newline is dropped)")
	c.Flags().BoolVar(&force, "force", false, "replace a different person already in the data dir (this machine then acts for the imported one)")
	return c
}

// addUserName adds --user-name to c (org create, node join, member join).
func addUserName(c *cobra.Command, p *string) {
	c.Flags().StringVar(p, "user-name", "", "your name as a person, when the node creates user.key (default $USER when it is a valid name, else the node picks)")
}

// userName is the user_name to send: --user-name when given (checked as a
// name), else $USER, else the login name, when valid, else "" (the node
// picks).
func (a *app) userName(cmd *cobra.Command, v string) (string, error) {
	if !cmd.Flags().Changed("user-name") {
		return defaultUserName(a.loginName), nil
	}
	v = strings.TrimSpace(v)
	if err := text.CheckName("--user-name", v); err != nil {
		return "", usagef(cmd, "%v", err)
	}
	return v, nil
}

// defaultUserName is $USER when it is a valid name, else the login name of
// the user running the CLI (containers and services often have no $USER),
// else "" (the node then picks one).
func defaultUserName(login func() string) string {
	u := strings.TrimSpace(os.Getenv("USER"))
	if u == "" && login != nil {
		u = strings.TrimSpace(login())
	}
	if text.CheckName("user", u) != nil {
		return ""
	}
	return u
}

// loginName is the name of the user running the process, or "".
func loginName() string {
	if cur, err := user.Current(); err == nil {
		return cur.Username
	}
	return ""
}
