package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/node/api"
)

// defaultHistoryFile is where org export-history writes without --out.
const defaultHistoryFile = "cshare-ledger-history.bin"

func (a *app) orgExportHistoryCmd() *cobra.Command {
	var out, abs string
	c := &cobra.Command{
		Use:   "export-history [--out FILE]",
		Short: "Write the ledger entries this node still has to a file (admins), before ledger.retain prunes them",
		Long: `Write the ledger entries this node still has to a new file on this machine
(admins): those below its newest checkpoints, kept on disk, and those after
them. With org set ledger.retain=DURATION, entries below a checkpoint older
than that are pruned (but the genesis, roles, removals, org key rotations,
machine approvals and checkpoints); export them first.

The file is "cshare-ledger-history/1": that line, then each entry's signed
bytes (canonical CBOR, as in the ledger) after its length as an unsigned
varint. Reading it back checks every entry's CID and signature (docs/design.md
§7.3).`,
		Args: exactArgs(),
		PreRunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(out) == "" {
				return usagef(cmd, "--out: empty; give the file to write (a path that does not exist yet)")
			}
			var err error
			if abs, err = filepath.Abs(out); err != nil {
				return usagef(cmd, "--out: %v", err)
			}
			return nil
		},
	}
	c.Flags().StringVar(&out, "out", defaultHistoryFile, "the file to write (a path that does not exist yet)")
	return viewCmd(a, c, "print what was written as JSON",
		func(ctx context.Context, cl *api.Client, _ []string) (api.HistoryExported, error) {
			return cl.ExportHistory(ctx, api.HistoryExport{Out: abs})
		},
		func(h api.HistoryExported) error {
			_, err := fmt.Fprintf(a.stdout, "wrote %d ledger entries (%d bytes, %s) to %s\n", h.Entries, h.Bytes, h.Format, text.Quote(h.Path))
			return err
		})
}
