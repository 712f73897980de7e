package cli

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cshare/cshare/internal/text"
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

// eventLine is one event as a line: its time, type, what it is about and
// its data, every string escaped.
func eventLine(e events.Event) string {
	parts := []string{e.Time.Local().Format(time.DateTime), e.Type}
	for _, kv := range [][2]string{{"machine", e.Machine}, {"job", e.Job}, {"contract", e.Contract}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+"="+text.Escape(kv[1]))
		}
	}
	if e.Item != nil {
		parts = append(parts, fmt.Sprintf("item=%d", *e.Item))
	}
	keys := make([]string, 0, len(e.Data))
	for k := range e.Data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		parts = append(parts, text.Escape(fmt.Sprintf("%s=%v", k, e.Data[k])))
	}
	return strings.Join(parts, " ")
}
