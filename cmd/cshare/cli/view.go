package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/node/api"
)

// Every command that prints a value (a show, or what a change made) goes
// through showCmd, and every listing through listCmd: they own the --json
// flag, and print either exactly one JSON value (printJSON; a listing's
// array written row by row) or the human view, whose tables, key-value
// lines and echoed names are escaped (table, kv, text.Escape).

// showCmd completes c, a command that prints a value: get computes it
// (from the node or from this machine), then it is printed with --json as
// exactly one JSON value, else with human. Flags that are checked before
// anything is asked of the node are checked in c.PreRunE.
func showCmd[T any](a *app, c *cobra.Command, jsonHelp string,
	get func(cmd *cobra.Command, args []string) (T, error), human func(T) error) *cobra.Command {
	var asJSON bool
	c.RunE = func(cmd *cobra.Command, args []string) error {
		v, err := get(cmd, args)
		if err != nil {
			return err
		}
		if asJSON {
			return printJSON(a.stdout, v)
		}
		return human(v)
	}
	c.Flags().BoolVar(&asJSON, "json", false, jsonHelp)
	return c
}

// viewCmd is showCmd for a value from the node: fetch asks it. IDs and
// names in args go to the node as given; the node resolves them.
func viewCmd[T any](a *app, c *cobra.Command, jsonHelp string,
	fetch func(ctx context.Context, cl *api.Client, args []string) (T, error), human func(T) error) *cobra.Command {
	return showCmd(a, c, jsonHelp, func(cmd *cobra.Command, args []string) (T, error) {
		cl, err := a.client()
		if err != nil {
			var zero T
			return zero, err
		}
		return fetch(cmd.Context(), cl, args)
	}, human)
}

// asJSON says whether c, a showCmd or listCmd, was given --json.
func asJSON(c *cobra.Command) bool {
	on, _ := c.Flags().GetBool("json")
	return on
}

// listCmd completes c, a listing that grows with a job or the org: it
// reads the rows from the node one at a time as they come (fetch calls
// emit for each) and prints each at once, so that a listing of any size
// (a million items) goes through in little memory. With --json it prints
// one JSON array, written row by row: the bytes viewCmd prints for the
// whole slice. Else a table (streamTable) of header and row(T). --limit
// and --after page it; cursor(T) is a row's cursor for --after, and a full
// page ends with a hint on stderr (the table only).
func listCmd[T any](a *app, c *cobra.Command, what string, header []string,
	fetch func(ctx context.Context, cl *api.Client, args []string, p api.Page, emit func(T) error) error,
	row func(T) []string, cursor func(T) string) *cobra.Command {
	var asJSON bool
	var limit, after string
	c.RunE = func(cmd *cobra.Command, args []string) error {
		var p api.Page
		if cmd.Flags().Changed("limit") {
			n, err := strconv.ParseInt(strings.TrimSpace(limit), 10, 64)
			if err != nil || n < 1 || n > api.MaxLimit {
				return usagef(cmd, "--limit: %s; allowed: a whole number from 1 to %d", text.Quote(api.Ellipsize(limit)), api.MaxLimit)
			}
			p.Limit = n
		}
		if cmd.Flags().Changed("after") {
			if after == "" {
				return usagef(cmd, "--after: empty; give the cursor the last page ended with")
			}
			p.After = after
		}
		cl, err := a.client()
		if err != nil {
			return err
		}
		out := bufio.NewWriterSize(a.stdout, 64<<10)
		var rows int
		var last T
		arr := jsonArray{w: out}
		tab := streamTable{w: out}
		if !asJSON {
			_ = tab.row(header...)
		}
		err = fetch(cmd.Context(), cl, args, p, func(v T) error {
			rows++
			last = v
			if asJSON {
				return arr.add(v)
			}
			return tab.row(row(v)...)
		})
		if err != nil {
			_ = out.Flush()
			var se *api.StatusError
			if errors.As(err, &se) && (se.Field == "limit" || se.Field == "after") {
				return usagef(cmd, "--%s", se.Msg) // "after: ..." names the flag
			}
			return err
		}
		if asJSON {
			err = arr.close()
		} else {
			err = tab.close()
		}
		if err != nil {
			return err
		}
		if err := out.Flush(); err != nil {
			return err
		}
		if !asJSON && p.Limit > 0 && int64(rows) == p.Limit {
			fmt.Fprintf(a.stderr, "more may follow: %s --after %s --limit %d\n", text.Escape(strings.TrimSpace(cmd.CommandPath()+" "+quoteArgs(args))), text.Escape(cursor(last)), p.Limit)
		}
		return nil
	}
	f := c.Flags()
	f.BoolVar(&asJSON, "json", false, "print the "+what+" as a JSON array (written row by row as the node sends them)")
	f.StringVar(&limit, "limit", "", "print at most this many "+what)
	f.StringVar(&after, "after", "", "start after this cursor: the last ID (or item number) of the page before")
	return c
}
