package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cshare/cshare/node/events"
)

// eventsCmd is `cshare events`: the node's event stream (GET /v1/events).
func (a *app) eventsCmd() *cobra.Command {
	var follow, asJSON bool
	var topics string
	c := &cobra.Command{
		Use:   "events [--follow] [--json] [--topics machines,jobs,ledger,contracts,org]",
		Short: "Print the node's recent events; --follow keeps printing them as they come",
		Long: `Print the events the node keeps (its last ` + fmt.Sprint(events.RingSize) + `: ledger entries, machines
going online and offline, pending, approved and removed, jobs submitted,
done, failed and cancelled, items done and failed, contracts created,
started, stopped and ending, members joining and removed, settings changed),
then exit; with --follow, keep printing them as they come until Ctrl-C.
--topics picks some of: ` + strings.Join(events.AllTopics, ", ") + ` (default all).
--json prints one JSON array, or with --follow one JSON object per line,
each as GET /v1/events sends it.`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := events.ParseTopics(topics); err != nil {
				return usagef(cmd, "--%v", err)
			}
			cl, err := a.client()
			if err != nil {
				return err
			}
			arr := jsonArray{w: a.stdout}
			err = cl.Events(cmd.Context(), topics, follow, func(e events.Event) error {
				switch {
				case asJSON && follow:
					b, err := json.Marshal(e)
					if err != nil {
						return err
					}
					_, err = fmt.Fprintf(a.stdout, "%s\n", b)
					return err
				case asJSON:
					return arr.add(e)
				}
				_, err := fmt.Fprintln(a.stdout, eventLine(e))
				return err
			})
			if err == nil && asJSON && !follow {
				err = arr.close()
			}
			return err
		},
	}
	f := c.Flags()
	f.BoolVarP(&follow, "follow", "f", false, "keep printing events as they come")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	f.StringVar(&topics, "topics", "", "comma-separated topics: "+strings.Join(events.AllTopics, ", ")+" (default all)")
	return c
}

// eventLine is one event as a line: its time and events.Summary.
func eventLine(e events.Event) string {
	return e.Time.Local().Format(time.DateTime) + " " + events.Summary(e)
}
