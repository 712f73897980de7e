//go:build e2e

package e2e

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"testing"
	"time"
)

// eventsInterval is the heartbeat interval of TestEventsMachineOfflineAfterKill9:
// long enough that a loaded host's scheduling is small beside it.
const eventsInterval = 3 * time.Second

// A machine killed with SIGKILL is announced offline on another node's
// event stream (cshare events --follow, GET /v1/events) within 2
// heartbeat intervals: its connections close with the process, and the
// node calls it offline once it has stayed silent for an interval and a
// quarter after that, not after the 3 intervals of heartbeats alone.
func TestEventsMachineOfflineAfterKill9(t *testing.T) {
	ps := mesh(t, 3, "--heartbeat-interval", eventsInterval.String())
	var victim status
	ps[2].json(&victim, "node", "status")
	// The watcher calls no machine on- or offline for 3 intervals after it
	// starts (it has not heard from its peers yet): wait them out.
	eventually(t, 60*time.Second, "the watcher past its first 3 intervals", func() bool {
		var st struct {
			Uptime float64 `json:"uptime_seconds"`
		}
		ps[0].json(&st, "node", "status")
		return st.Uptime > 3*eventsInterval.Seconds()+1
	})
	cmd := exec.Command(ps[0].bin, "--data-dir", ps[0].dir, "events", "--follow", "--json", "--topics", "machines")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	type ev struct {
		ID      uint64 `json:"id"`
		Type    string `json:"type"`
		Topic   string `json:"topic"`
		Machine string `json:"machine"`
		at      time.Time
	}
	evs := make(chan ev, 100)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var e ev
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				e.at = time.Now()
				evs <- e
			}
		}
		close(evs)
	}()
	// The stream replays the node's ring first: the joins (machine.pending,
	// machine.approved) are in it, so a first event says it is live.
	select {
	case e := <-evs:
		if e.Topic != "machines" || e.ID == 0 {
			t.Fatalf("first event: %+v", e)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("no event replayed from the ring within 60 s")
	}
	ps[2].kill9()
	killed := time.Now()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case e, ok := <-evs:
			if !ok {
				t.Fatal("the event stream ended")
			}
			if e.Type == "machine.offline" && e.Machine == victim.ID {
				took := e.at.Sub(killed)
				t.Logf("machine.offline %s after the kill", took)
				if took > 2*eventsInterval {
					t.Fatalf("machine.offline came %s after the kill, more than 2 heartbeat intervals (%s)", took, 2*eventsInterval)
				}
				return
			}
			if e.Type == "machine.offline" {
				t.Fatalf("machine.offline of %s, a machine that was not killed", e.Machine)
			}
		case <-deadline:
			t.Fatal("no machine.offline of the killed machine within 60 s")
		}
	}
}
