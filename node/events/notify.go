package events

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cshare/cshare/internal/text"
)

// Notify's bounds.
const (
	// QueueSize is how many posts a Notifier holds; a new one past it
	// drops the oldest (cshare_notify_dropped_total).
	QueueSize = 256
	// Attempts is how many times a post is tried before it is given up
	// (cshare_notify_failed_total), waiting Backoff, then twice that, and
	// so on, between tries.
	Attempts = 5
)

// Webhook is one node.yaml notify: entry.
type Webhook struct {
	URL    string
	Events []string
}

// Notifier posts the events this node is the one to send (Event.Mine) to
// the webhooks that ask for their type, as JSON that Slack's incoming
// webhooks take: a "text" line, and the event's fields. Offer queues
// (bounded, dropping the oldest); Run posts, retrying with backoff.
type Notifier struct {
	hooks   []Webhook
	client  *http.Client
	backoff time.Duration
	log     *slog.Logger

	mu       sync.Mutex
	queue    []post
	inFlight int
	wake     chan struct{}

	sent, failed, dropped prometheus.Counter
}

type post struct {
	url  string
	body []byte
}

// NewNotifier makes a notifier for hooks, registering its counters on reg.
// backoff is the first wait between tries (0: one second).
func NewNotifier(hooks []Webhook, reg prometheus.Registerer, backoff time.Duration, log *slog.Logger) *Notifier {
	if backoff <= 0 {
		backoff = time.Second
	}
	n := &Notifier{hooks: hooks, client: &http.Client{Timeout: 10 * time.Second}, backoff: backoff, log: log, wake: make(chan struct{}, 1),
		sent:    prometheus.NewCounter(prometheus.CounterOpts{Name: "cshare_notify_sent_total", Help: "Events posted to node.yaml's notify webhooks."}),
		failed:  prometheus.NewCounter(prometheus.CounterOpts{Name: "cshare_notify_failed_total", Help: "Event posts given up after their retries, or refused by the webhook."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "cshare_notify_dropped_total", Help: "Event posts dropped from a full notify queue (the oldest go)."}),
	}
	reg.MustRegister(n.sent, n.failed, n.dropped)
	return n
}

// Offer queues e for every webhook that asks for its type, if this node
// is the one to send it. It never blocks (a Bus hook).
func (n *Notifier) Offer(e Event) {
	if !e.Mine {
		return
	}
	var body []byte
	for _, h := range n.hooks {
		if !wants(h.Events, e.Type) {
			continue
		}
		if body == nil {
			body = Payload(e)
		}
		n.mu.Lock()
		if len(n.queue) >= QueueSize {
			n.queue = n.queue[1:]
			n.dropped.Inc()
		}
		n.queue = append(n.queue, post{url: h.URL, body: body})
		n.mu.Unlock()
		select {
		case n.wake <- struct{}{}:
		default:
		}
	}
}

// Wants says Offer would queue an event of type typ, of this node or not
// (mine): the bus hook's filter (Bus.OnPublishOf).
func (n *Notifier) Wants(typ string, mine bool) bool {
	if !mine {
		return false
	}
	for _, h := range n.hooks {
		if wants(h.Events, typ) {
			return true
		}
	}
	return false
}

func wants(types []string, t string) bool {
	for _, x := range types {
		if x == t {
			return true
		}
	}
	return false
}

// Idle says nothing is queued or being posted.
func (n *Notifier) Idle() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.queue) == 0 && n.inFlight == 0
}

// Run posts what is queued, one at a time, until ctx ends.
func (n *Notifier) Run(ctx context.Context) {
	for {
		n.mu.Lock()
		var p post
		ok := len(n.queue) > 0
		if ok {
			p, n.queue = n.queue[0], n.queue[1:]
			n.inFlight++
		}
		n.mu.Unlock()
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-n.wake:
				continue
			}
		}
		n.deliver(ctx, p)
		n.mu.Lock()
		n.inFlight--
		n.mu.Unlock()
	}
}

// deliver posts p, trying again after a network error, a 429 or a 5xx.
func (n *Notifier) deliver(ctx context.Context, p post) {
	wait := n.backoff
	for try := 1; ; try++ {
		code, err := n.send(ctx, p)
		switch {
		case err == nil && code/100 == 2:
			n.sent.Inc()
			return
		case ctx.Err() != nil:
			return
		case err == nil && code != http.StatusTooManyRequests && code < 500, try == Attempts:
			n.failed.Inc()
			n.log.Warn("notify: webhook post given up", "url", redact(p.url), "status", code, "err", err, "tries", try)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait *= 2
	}
}

func (n *Notifier) send(ctx context.Context, p post) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(p.body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := n.client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode, nil
}

// redact keeps a webhook URL's scheme and host: its path is its secret.
func redact(u string) string {
	if i := strings.Index(u, "://"); i >= 0 {
		if j := strings.IndexByte(u[i+3:], '/'); j >= 0 {
			return u[:i+3+j] + "/…"
		}
	}
	return u
}

// Payload is e as a webhook gets it: the event's JSON fields and "text",
// a one-line summary (what Slack shows).
func Payload(e Event) []byte {
	b, _ := json.Marshal(e)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	m["text"] = "cshare: " + Summary(e)
	out, _ := json.Marshal(m)
	return out
}

// Summary is e in one line: its type, what it is about and its data
// sorted by key, every string escaped (text.Escape).
func Summary(e Event) string {
	parts := []string{e.Type}
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
		if v := fmt.Sprint(e.Data[k]); v != "" {
			parts = append(parts, text.Escape(k+"="+v))
		}
	}
	return strings.Join(parts, " ")
}
