package config

import (
	"fmt"
	"net/url"

	"gopkg.in/yaml.v3"

	"github.com/cshare/cshare/node/events"
)

// Notify is one entry of notify: a webhook and the event types posted to
// it (docs/design.md §26).
type Notify struct {
	Webhook string
	Events  []string
}

func (p *parser) notify(n *yaml.Node, path string) ([]Notify, error) {
	if isNull(n) {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, p.errf(n, path, "is %s; expected a list of {webhook: URL, events: [TYPE, ...]}", kindName(n))
	}
	var out []Notify
	for i, item := range n.Content {
		ipath := fmt.Sprintf("%s[%d]", path, i)
		entries, err := p.mapping(item, ipath, "webhook", "events")
		if err != nil {
			return nil, err
		}
		var nt Notify
		for _, e := range entries {
			switch e.name {
			case "webhook":
				if e.value.Kind != yaml.ScalarNode {
					return nil, p.errf(e.value, e.path, "is %s; expected an http or https URL", kindName(e.value))
				}
				u, err := url.Parse(e.value.Value)
				if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					return nil, p.errf(e.value, e.path, "%q is not an http or https URL", clip(e.value.Value))
				}
				nt.Webhook = e.value.Value
			case "events":
				if e.value.Kind != yaml.SequenceNode {
					return nil, p.errf(e.value, e.path, "is %s; expected a list of event types", kindName(e.value))
				}
				for _, v := range e.value.Content {
					if v.Kind != yaml.ScalarNode {
						return nil, p.errf(v, e.path, "holds %s; expected event types", kindName(v))
					}
					nt.Events = append(nt.Events, v.Value)
				}
				if err := events.CheckTypes(e.path, nt.Events); err != nil {
					return nil, p.errf(e.value, e.path, "%s", err.Error()[len(e.path)+2:])
				}
			}
		}
		switch {
		case nt.Webhook == "":
			return nil, p.errf(item, ipath+".webhook", "is missing; give the URL to post to")
		case nt.Events == nil:
			return nil, p.errf(item, ipath+".events", "is missing; list the event types to post, e.g. [job.done, job.failed, machine.offline]")
		}
		out = append(out, nt)
	}
	return out, nil
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
