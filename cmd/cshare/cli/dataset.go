package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/docker/go-units"
	"github.com/spf13/cobra"

	"github.com/cshare/cshare/dataset"
	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/node/api"
)

func (a *app) datasetCmd() *cobra.Command {
	return group("dataset", "Add, list, show, fetch and remove datasets (UnixFS DAGs addressed by CID)",
		a.datasetAddCmd(), a.datasetLsCmd(), a.datasetShowCmd(), a.datasetAccessCmd(), a.datasetRmCmd(), a.datasetGetCmd(),
		a.datasetExportCmd(), a.datasetImportCmd())
}

// datasetAdded is dataset add's --json output: exactly these four keys
// (Access is for the human view only).
type datasetAdded struct {
	CID    string `json:"cid"`
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	Blocks int64  `json:"blocks"`
	Access string `json:"-"`
}

func added(d api.DatasetInfo, err error) (datasetAdded, error) {
	return datasetAdded{CID: d.CID, Name: d.Name, Size: d.Size, Blocks: d.Blocks, Access: d.Access}, err
}

// printAdded is what dataset add and import print: verb is added or imported.
func (a *app) printAdded(verb string) func(datasetAdded) error {
	return func(d datasetAdded) error {
		_, err := fmt.Fprintf(a.stdout, "%s dataset %s: %s in %d blocks, %s\n%s\n", verb, text.Quote(d.Name),
			units.BytesSize(float64(d.Size)), d.Blocks, accessWords(d.Access), d.CID)
		return err
	}
}

func (a *app) datasetAddCmd() *cobra.Command {
	var name, path string
	var private bool
	c := &cobra.Command{
		Use:   "add PATH",
		Short: "Import a file or directory as a dataset and print its root CID on the last line",
		Long: `Import a file or directory as a dataset. The node (on this machine) reads
PATH and stores its blocks, with kubo's CIDv1 defaults (raw leaves, sha2-256,
256 KiB chunks, balanced layout), so the root CID is the one
ipfs add -r --cid-version 1 prints; hidden files inside a directory are left
out, as ipfs add leaves them. The ledger records the dataset only once every
block is stored; an interrupted add leaves no dataset, and running it again
reuses the blocks already stored. --private: only you and the admins may read
it.`,
		Args: exactArgs("PATH"),
		PreRunE: func(cmd *cobra.Command, args []string) (err error) {
			if path, err = filepath.Abs(args[0]); err != nil {
				return usagef(cmd, "PATH: %v", err)
			}
			return nil
		},
	}
	c.Flags().StringVar(&name, "name", "", "the dataset's name (default: the last element of PATH)")
	c.Flags().BoolVar(&private, "private", false, "only you and the org's admins may read it")
	return viewCmd(a, c, `print {"cid","name","size","blocks"} as JSON`,
		func(ctx context.Context, cl *api.Client, _ []string) (datasetAdded, error) {
			req := api.DatasetAdd{Path: path, Name: strings.TrimSpace(name), Private: private}
			stop := func() {}
			if !asJSON(c) && isTerminal(a.stderr) {
				req.Progress = newProgressID()
				stop = a.showProgress(ctx, cl, req.Progress, contentSize(path))
			}
			defer stop()
			return added(cl.AddDataset(ctx, req))
		},
		a.printAdded("added"))
}

func accessWords(access string) string {
	if access == "private" {
		return "private to you and the admins"
	}
	return "readable by the whole org"
}

func newProgressID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// contentSize is the bytes of regular files under path that an import
// reads (hidden entries inside directories left out), for the progress bar.
func contentSize(path string) int64 {
	var n int64
	_ = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if p != path && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// showProgress draws a progress bar on stderr until the returned stop is
// called.
func (a *app) showProgress(ctx context.Context, cl *api.Client, id string, total int64) func() {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				fmt.Fprint(a.stderr, "\r\x1b[K")
				return
			case <-t.C:
			}
			p, err := cl.DatasetProgress(ctx, id)
			if err != nil {
				continue
			}
			fmt.Fprintf(a.stderr, "\r\x1b[K%s", progressBar(p.Done, total))
		}
	}()
	return func() { close(done); <-finished }
}

// progressBar is "[=====>    ]  45%  123 MB of 456 MB".
func progressBar(done, total int64) string {
	const width = 30
	if total <= 0 {
		total = 1
	}
	frac := min(float64(done)/float64(total), 1)
	n := int(frac * width)
	bar := strings.Repeat("=", n)
	if n < width {
		bar += ">" + strings.Repeat(" ", width-n-1)
	}
	return fmt.Sprintf("[%s] %3.0f%%  %s of %s", bar, frac*100, units.HumanSize(float64(done)), units.HumanSize(float64(total)))
}

func (a *app) datasetLsCmd() *cobra.Command {
	c := &cobra.Command{Use: "ls", Aliases: []string{"list"}, Short: "List the datasets you may read", Args: exactArgs()}
	return listCmd(a, c, "datasets", []string{"NAME", "CID", "SIZE", "BLOCKS", "ACCESS", "OWNER", "HERE", "ADDED"},
		func(ctx context.Context, cl *api.Client, _ []string, p api.Page, emit func(api.DatasetInfo) error) error {
			return cl.EachDataset(ctx, p, emit)
		},
		func(d api.DatasetInfo) []string {
			return []string{d.Name, d.CID, units.BytesSize(float64(d.Size)), itoa(d.Blocks), d.Access,
				orDash(d.OwnerName), yesNo(d.Local), a.ago(d.Added)}
		},
		func(d api.DatasetInfo) string { return d.CID })
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func (a *app) datasetShowCmd() *cobra.Command {
	c := &cobra.Command{Use: "show NAME|CID", Short: "Show a dataset, and which online machines hold it", Args: exactArgs("NAME|CID")}
	return viewCmd(a, c, "print the dataset as JSON",
		func(ctx context.Context, cl *api.Client, args []string) (api.DatasetInfo, error) {
			return cl.Dataset(ctx, args[0])
		},
		func(d api.DatasetInfo) error {
			holders := "-"
			if len(d.Holders) > 0 {
				holders = strings.Join(d.Holders, ", ")
			}
			return kv(a.stdout,
				[2]string{"name", d.Name},
				[2]string{"cid", d.CID},
				[2]string{"size", fmt.Sprintf("%s (%d bytes)", units.BytesSize(float64(d.Size)), d.Size)},
				[2]string{"blocks", itoa(d.Blocks)},
				[2]string{"access", d.Access},
				[2]string{"owner", personRef(d.Owner, d.OwnerName)},
				[2]string{"added", a.ago(d.Added)},
				[2]string{"here", yesNo(d.Local)},
				[2]string{"held by", holders})
		})
}

// datasetAccessCmd is `dataset access NAME|CID org|private`: who may read
// the dataset (its owner or an admin changes it).
func (a *app) datasetAccessCmd() *cobra.Command {
	c := &cobra.Command{Use: "access NAME|CID org|private",
		Short: "Set who may read a dataset: every member (org) or its owner and the admins (private); its owner or an admin",
		Args:  exactArgs("NAME|CID", "org|private"),
		PreRunE: func(cmd *cobra.Command, args []string) error {
			if args[1] != "org" && args[1] != "private" {
				return usagef(cmd, "access: %s; allowed: org (every member reads it), private (its owner and the admins)", text.Quote(args[1]))
			}
			return nil
		}}
	return viewCmd(a, c, "print the dataset as JSON",
		func(ctx context.Context, cl *api.Client, args []string) (api.DatasetInfo, error) {
			return cl.SetDatasetAccess(ctx, args[0], args[1])
		},
		func(d api.DatasetInfo) error {
			who := "org: every member of the org reads it"
			if d.Access == "private" {
				who = "private: its owner and the admins read it"
			}
			_, err := fmt.Fprintf(a.stdout, "dataset %s (%s) is now %s\n", text.Quote(d.Name), d.CID, who)
			return err
		})
}

func (a *app) datasetRmCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rm NAME|CID",
		Short: "Remove a dataset (its owner or an admin); blocks no dataset uses are deleted",
		Args:  exactArgs("NAME|CID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := a.client()
			if err != nil {
				return err
			}
			d, err := cl.RemoveDataset(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "removed dataset %s (%s)\n", text.Quote(d.Name), d.CID)
			return err
		},
	}
}

func (a *app) datasetGetCmd() *cobra.Command {
	var out string
	c := &cobra.Command{
		Use:   "get NAME|CID --out PATH",
		Short: "Fetch a dataset from the org's machines and write it to PATH (which must not exist)",
		Args:  exactArgs("NAME|CID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(out) == "" {
				return usagef(cmd, "--out is required: where to write the dataset (a path that does not exist yet)")
			}
			abs, err := filepath.Abs(out)
			if err != nil {
				return usagef(cmd, "--out: %v", err)
			}
			cl, err := a.client()
			if err != nil {
				return err
			}
			d, err := cl.GetDataset(cmd.Context(), args[0], api.DatasetGet{Out: abs})
			if err != nil {
				return err
			}
			if _, err = fmt.Fprintf(a.stdout, "wrote dataset %s (%s) to %s\n", text.Quote(d.Name), units.BytesSize(float64(d.Size)), text.Quote(abs)); err != nil {
				return err
			}
			if len(d.Relayed) > 0 {
				names := make([]string, len(d.Relayed))
				for i, m := range d.Relayed {
					names[i] = short(text.Escape(m))
				}
				_, err = fmt.Fprintf(a.stdout, "fetched partly through a relay: no direct connection yet to %s, which hold it\n", strings.Join(names, ", "))
			}
			return err
		},
	}
	c.Flags().StringVar(&out, "out", "", "where to write the dataset: a path that does not exist yet (required)")
	return c
}

func (a *app) datasetExportCmd() *cobra.Command {
	var car string
	c := &cobra.Command{
		Use:   "export NAME|CID --car FILE",
		Short: "Write a dataset as a CARv1 file (fetched from the org's machines first if need be)",
		Args:  exactArgs("NAME|CID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(car) == "" {
				return usagef(cmd, "--car is required: the CAR file to write (a path that does not exist yet)")
			}
			abs, err := filepath.Abs(car)
			if err != nil {
				return usagef(cmd, "--car: %v", err)
			}
			cl, err := a.client()
			if err != nil {
				return err
			}
			d, err := cl.ExportDataset(cmd.Context(), args[0], api.DatasetExport{Car: abs})
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "wrote dataset %s (%d blocks) to %s\n", text.Quote(d.Name), d.Blocks, text.Quote(abs))
			return err
		},
	}
	c.Flags().StringVar(&car, "car", "", "the CAR file to write: a path that does not exist yet (required)")
	return c
}

func (a *app) datasetImportCmd() *cobra.Command {
	var name, path string
	var private bool
	c := &cobra.Command{
		Use:   "import FILE.car [--name N] [--private]",
		Short: "Import a CAR file (one root, a UnixFS DAG) as a dataset; the root CID is on the last line",
		Args:  exactArgs("FILE.car"),
		PreRunE: func(cmd *cobra.Command, args []string) (err error) {
			if path, err = filepath.Abs(args[0]); err != nil {
				return usagef(cmd, "FILE.car: %v", err)
			}
			// The node opens only a regular file; one that is not is
			// refused here before the node is asked (a path this machine
			// cannot see is the node's to judge).
			if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
				return usagef(cmd, "FILE.car: %s is %s; allowed: a regular file (a CAR)", text.Quote(api.Ellipsize(args[0])), dataset.KindOf(fi.Mode()))
			}
			return nil
		},
	}
	c.Flags().StringVar(&name, "name", "", "the dataset's name (default: the file's name without .car)")
	c.Flags().BoolVar(&private, "private", false, "only you and the org's admins may read it")
	return viewCmd(a, c, `print {"cid","name","size","blocks"} as JSON`,
		func(ctx context.Context, cl *api.Client, _ []string) (datasetAdded, error) {
			return added(cl.ImportDataset(ctx, api.DatasetImport{Path: path, Name: strings.TrimSpace(name), Private: private}))
		},
		a.printAdded("imported"))
}
