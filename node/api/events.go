package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cshare/cshare/node/events"
)

// EventsAPI is the node's event bus (*events.Bus).
type EventsAPI interface {
	Subscribe(topics events.Topics, after uint64, replay bool) (backlog []events.Event, gap bool, s *events.Sub)
	Unsubscribe(s *events.Sub)
}

// KeepAlive is how often an idle event stream sends a comment, so that
// proxies and the client see it alive.
const KeepAlive = 15 * time.Second

// EventQuery is what GET /v1/events takes: ?topics=a,b (every topic when
// none), where to resume (the Last-Event-ID header, or ?after=ID: the
// ring's events above it are sent first; without either the stream starts
// now), and ?follow=false to send the ring's events and end.
type EventQuery struct {
	Topics events.Topics
	After  uint64
	Replay bool
	Follow bool
}

// ParseEventQuery reads r's EventQuery, or a 400 naming the field at fault.
func ParseEventQuery(r *http.Request) (EventQuery, error) {
	q := r.URL.Query()
	var eq EventQuery
	var err error
	if eq.Topics, err = events.ParseTopics(q.Get("topics")); err != nil {
		return eq, FieldErrorf(http.StatusBadRequest, "topics", "%v", err)
	}
	after, field := r.Header.Get("Last-Event-ID"), "Last-Event-ID"
	if after == "" && q.Has("after") {
		after, field = q.Get("after"), "after"
	}
	if after != "" {
		if eq.After, err = strconv.ParseUint(strings.TrimSpace(after), 10, 64); err != nil {
			return eq, FieldErrorf(http.StatusBadRequest, field, "%s: %q is not an event ID (a whole number of 0 or more)", field, Ellipsize(after))
		}
		eq.Replay = true
	}
	eq.Follow = true
	if f := q.Get("follow"); f != "" {
		if eq.Follow, err = strconv.ParseBool(f); err != nil {
			return eq, FieldErrorf(http.StatusBadRequest, "follow", "follow: %q is not true or false", Ellipsize(f))
		}
		if !eq.Follow {
			eq.Replay = true
		}
	}
	return eq, nil
}

func eventRoutes(svc EventsAPI) []route {
	return []route{
		{"GET /v1/events", noBody(func(ctx context.Context, r *http.Request) (streamer, error) {
			eq, err := ParseEventQuery(r)
			if err != nil {
				return nil, err
			}
			return func(w http.ResponseWriter) { streamEvents(ctx, w, svc, eq) }, nil
		})},
	}
}

// streamEvents writes the events eq asks for as server-sent events: for
// each, "id: N", "event: TYPE" and "data: JSON" (one line); a comment
// every KeepAlive while idle. It ends with ctx, with the bus (the node
// stops), when the client falls too far behind (it resumes with
// Last-Event-ID), or after the backlog without eq.Follow.
func streamEvents(ctx context.Context, w http.ResponseWriter, svc EventsAPI, eq EventQuery) {
	backlog, gap, sub := svc.Subscribe(eq.Topics, eq.After, eq.Replay)
	defer svc.Unsubscribe(sub)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if gap {
		fmt.Fprintf(w, ": gap: events after %d have left the node's ring (it keeps the last %d)\n\n", eq.After, events.RingSize)
	}
	for _, e := range backlog {
		if writeEvent(w, e) != nil {
			return
		}
	}
	if !eq.Follow {
		return
	}
	fmt.Fprint(w, ": stream\n\n")
	_ = rc.Flush()
	tick := time.NewTicker(KeepAlive)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-sub.C:
			if !ok {
				return
			}
			if writeEvent(w, e) != nil {
				return
			}
		case <-tick.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
		}
		if rc.Flush() != nil {
			return
		}
	}
}

func writeEvent(w io.Writer, e events.Event) error {
	data, err := json.Marshal(e)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", e.ID, e.Type, data)
	return err
}

// ReadEvents reads a server-sent event stream from r and calls fn with
// each event's data decoded, until r ends, fn fails, or an event does not
// decode.
func ReadEvents(r io.Reader, fn func(events.Event) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var data strings.Builder
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if data.Len() == 0 {
				continue
			}
			var e events.Event
			if err := json.Unmarshal([]byte(data.String()), &e); err != nil {
				return fmt.Errorf("event stream: %w", err)
			}
			data.Reset()
			if err := fn(e); err != nil {
				return err
			}
		case strings.HasPrefix(line, "data:"):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	return sc.Err()
}

// Events streams the node's events of topics (every topic when empty) to
// fn: the node's recent events (its ring), then, with follow, those that
// follow until ctx ends.
func (c *Client) Events(ctx context.Context, topics string, follow bool, fn func(events.Event) error) error {
	q := "?after=0&topics=" + url.QueryEscape(topics)
	if !follow {
		q += "&follow=false"
	}
	resp, err := c.untimed().send(ctx, http.MethodGet, "/v1/events"+q, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	err = ReadEvents(resp.Body, fn)
	if ctx.Err() != nil {
		return nil
	}
	return err
}
