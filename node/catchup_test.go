package node

import (
	"testing"
	"time"

	"github.com/cshare/cshare/node/api"
)

// TestCatchUpBeforeDispatch: a machine that was down while the others
// finished a job restarts with a ledger in which that job's items are still
// pending; it takes none of them (it catches up with a peer first), and it
// says so in its status meanwhile (issue 15).
func TestCatchUpBeforeDispatch(t *testing.T) {
	m := newMesh(t, meshConfig{n: 3, interval: 250 * time.Millisecond, slots: 2, runFor: 200 * time.Millisecond})
	m.formOrg()
	m.waitAllStatus(30*time.Second, StatusAvailable, m.ids()...)
	j := submit(t, m.nodes[0].Node, api.JobSubmit{CPUs: 1, MaxCPUs: ptr[int64](-1), RangeStart: ptr[int64](1), RangeEnd: ptr[int64](40)})
	const victim = 2
	vid := m.nodes[victim].ID().String()
	eventually(t, 20*time.Second, "the victim working on the job", func() string {
		if localInstances(m.nodes[victim].Node)[j.ID] == 0 {
			return "no instance of the job on it"
		}
		return ""
	})
	m.stop(victim)
	m.waitJobDone(60*time.Second, j.ID)

	restarted := time.Now()
	n := m.restart(victim)
	if st, err := n.Status(ctxT(t)); err != nil || !st.CatchingUp {
		t.Fatalf("status right after the restart: catching_up %v (%v), want true", st.CatchingUp, err)
	}
	m.waitJobDone(30*time.Second, j.ID)
	m.waitConverged(30 * time.Second)
	eventually(t, 10*time.Second, "the restarted machine caught up", func() string {
		if catching, _ := n.peers.CatchingUp(); catching {
			return "still catching up"
		}
		return ""
	})
	for _, r := range m.runs.all() {
		if r.Machine == vid && r.Job == j.ID && r.Started.After(restarted) {
			t.Errorf("after its restart the machine ran item %d of a job the others had finished", r.Item)
		}
	}
	if t.Failed() {
		t.Log(m.describeRuns(j.ID, 1))
	}
}
