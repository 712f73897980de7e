package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/node/sched"
	"github.com/cshare/cshare/runtime"
)

// TestExplainOnAMesh: GET /v1/jobs/{id}/explain on real nodes says, per
// machine, why a job waits: a job no machine has the memory for, and a
// machine that went offline.
func TestExplainOnAMesh(t *testing.T) {
	m := newMesh(t, meshConfig{n: 2, interval: 200 * time.Millisecond, slots: 1, runFor: runtime.FakeManual})
	m.formOrg()
	n0 := m.nodes[0].Node
	n0ID, n1ID := n0.ID().String(), m.nodes[1].ID().String()
	huge := submit(t, n0, api.JobSubmit{Name: "huge", Cmd: []string{"true"}, MemoryMB: 16 << 20})
	cl := api.NewClient(n0.APIAddr(), n0.Token())
	reasons := func(x api.JobExplain) map[string]string {
		out := map[string]string{}
		for _, mw := range x.Machines {
			for _, r := range mw.Reasons {
				out[mw.Machine] += r.Code + " "
			}
		}
		return out
	}
	eventually(t, 30*time.Second, "huge lacks memory on both", func() string {
		x, err := cl.ExplainJob(ctxT(t), "huge")
		if err != nil {
			return err.Error()
		}
		if r := reasons(x); x.Job != huge.ID || r[n0ID] != sched.WhyLacksMemory+" " || r[n1ID] != sched.WhyLacksMemory+" " {
			return fmt.Sprintf("%+v", r)
		}
		return ""
	})
	if _, err := cl.ExplainJob(ctxT(t), "nosuchjob"); statusCode(err) != 404 {
		t.Errorf("explain of no job: %v, want 404", err)
	}
	m.stop(1)
	eventually(t, 30*time.Second, "n1 offline in the explanation", func() string {
		x, err := cl.ExplainJob(ctxT(t), huge.ID)
		if err != nil {
			return err.Error()
		}
		if r := reasons(x); r[n1ID] != sched.WhyOffline+" " {
			return fmt.Sprintf("%+v", r)
		}
		return ""
	})
}
