package node

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cshare/cshare/ledger"
)

// TestLimitsChangedWhileDownReachTheLedger: a machine's node.yaml limits
// changed while its node was stopped are in every node's ledger once it is
// started again (they were written only on joining).
func TestLimitsChangedWhileDownReachTheLedger(t *testing.T) {
	m := newMesh(t, meshConfig{n: 2, interval: 200 * time.Millisecond, slots: 2})
	m.formOrg()
	id := m.nodes[1].ID().String()
	limitsOn := func(n *Node) (l ledger.Limits) {
		n.rep.View(func(st *ledger.State) {
			if mc := st.Machines[id]; mc != nil {
				l = mc.Limits
			}
		})
		return l
	}
	eventually(t, 30*time.Second, "n0 has n1's first limits", func() string {
		if got := limitsOn(m.nodes[0].Node).MaxConcurrentJobs; got != 2 {
			return fmt.Sprintf("max_concurrent_jobs %d", got)
		}
		return ""
	})
	m.stop(1)
	conf := filepath.Join(t.TempDir(), "node.yaml")
	if err := os.WriteFile(conf, []byte("resources:\n  max_concurrent_jobs: 5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m.nodes[1].opts.ConfigPath = conf
	m.restart(1)
	eventually(t, 30*time.Second, "n0 has n1's new limits", func() string {
		if got := limitsOn(m.nodes[0].Node).MaxConcurrentJobs; got != 5 {
			return fmt.Sprintf("max_concurrent_jobs %d", got)
		}
		return ""
	})
}
