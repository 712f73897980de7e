package node

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/node/events"
)

// Every node of a 3-node org posts to the same webhook (node.yaml
// notify), and the webhook gets the job's job.done once, from the
// submitting machine, and each item's item.done once, from the machine
// that ran it: each node sends only what it is the one to send.
func TestWebhookJobDoneOnceFromThreeNodes(t *testing.T) {
	var mu sync.Mutex
	got := map[string][]string{} // "type job item" -> the machines that sent it
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var p struct {
			Text    string `json:"text"`
			Type    string `json:"type"`
			Job     string `json:"job"`
			Item    *int64 `json:"item"`
			Machine string `json:"machine"`
		}
		if err := json.Unmarshal(b, &p); err != nil || !strings.HasPrefix(p.Text, "cshare: "+p.Type) || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("webhook post %q (%v): want JSON with a text line", b, err)
		}
		key := p.Type + " " + p.Job
		if p.Item != nil {
			key += fmt.Sprintf(" %d", *p.Item)
		}
		mu.Lock()
		got[key] = append(got[key], p.Machine)
		mu.Unlock()
	}))
	defer srv.Close()
	m := newMesh(t, meshConfig{n: 3, interval: 250 * time.Millisecond, slots: 2, runFor: 20 * time.Millisecond,
		conf: "notify:\n  - webhook: " + srv.URL + "/hook\n    events: [job.done, item.done]\n"})
	m.formOrg()
	m.waitAllStatus(30*time.Second, StatusAvailable, m.ids()...)
	ctx := ctxT(t)
	sub := m.nodes[1].Node
	js, err := sub.jobs.SubmitJob(ctx, api.JobSubmit{Cmd: []string{"true"}, RangeStart: ptr[int64](1), RangeEnd: ptr[int64](6), CPUs: 3})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "every node saw job.done and posted what it had to", func() string {
		for _, mn := range m.nodes {
			if st := ledgerJobState(mn.Node, js.ID); st != ledger.JobDone {
				return fmt.Sprintf("%s: job %q", mn.name, st)
			}
			recent, _ := mn.ev.bus.Recent(events.Topics{events.TopicJobs}, 0)
			seen := false
			for _, e := range recent {
				seen = seen || (e.Type == events.JobDone && e.Job == js.ID)
			}
			if !seen {
				return mn.name + " published no job.done"
			}
			if !mn.ev.notify.Idle() {
				return mn.name + " still posting"
			}
		}
		return ""
	})
	mu.Lock()
	defer mu.Unlock()
	if s := got["job.done "+js.ID]; len(s) != 1 || s[0] != sub.idStr {
		t.Fatalf("job.done posted by %v, want once by the submitting machine %s; all posts: %v", s, sub.idStr, got)
	}
	var ran []string // the machine that ran each item, as the ledger counts it
	sub.rep.View(func(st *ledger.State) {
		for _, it := range st.Jobs[js.ID].Items.Slice() {
			ran = append(ran, it.Machine)
		}
	})
	for i, by := range ran {
		if s := got[fmt.Sprintf("item.done %s %d", js.ID, i+1)]; len(s) != 1 || s[0] != by {
			t.Errorf("item %d done posted by %v, want once by %s, which ran it", i+1, s, by)
		}
	}
	if len(got) != 1+len(ran) {
		t.Errorf("posts: %v, want job.done and %d item.done", got, len(ran))
	}
}

func ledgerJobState(n *Node, id string) (state string) {
	n.rep.View(func(st *ledger.State) {
		if j := st.Jobs[id]; j != nil {
			state = j.State
		}
	})
	return state
}
