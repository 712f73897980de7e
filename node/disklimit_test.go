package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/runtime"
)

// TestDiskRequests: a job's --disk counts against the machine's
// disk_limit in placement (512 MB per instance on a machine offering
// 1024 MB and 4 slots: two instances); the heartbeat's free disk is the
// limit less what cshare's files use; and a run that writes more than its
// request is stopped, its item failing with an error naming the disk.
func TestDiskRequests(t *testing.T) {
	m := newMesh(t, meshConfig{n: 1, interval: 200 * time.Millisecond, slots: 4, runFor: runtime.FakeManual})
	conf := filepath.Join(t.TempDir(), "node.yaml")
	if err := os.WriteFile(conf, []byte("resources:\n  max_concurrent_jobs: 4\n  disk_limit: 1024\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m.stop(0)
	m.nodes[0].opts.ConfigPath = conf
	m.restart(0)
	m.formOrg()
	n := m.nodes[0].Node
	id := n.ID().String()
	eventually(t, 30*time.Second, "the disk limit in the ledger", func() string {
		var d int64
		n.rep.View(func(st *ledger.State) {
			if mc := st.Machines[id]; mc != nil {
				d = mc.Limits.DiskLimit
			}
		})
		if d != 1024 {
			return fmt.Sprintf("disk_limit %d", d)
		}
		return ""
	})
	eventually(t, 30*time.Second, "machine show's free disk below the limit", func() string {
		mi, err := n.orgs.Machine(ctxT(t), id)
		if err != nil {
			return err.Error()
		}
		if mi.Free == nil || mi.Usage == nil || mi.Usage.DiskUsedMB <= 0 || mi.Free.DiskMB != 1024-mi.Usage.DiskUsedMB {
			return fmt.Sprintf("free %+v, usage %+v", mi.Free, mi.Usage)
		}
		return ""
	})

	j := submit(t, n, api.JobSubmit{Name: "diskful", CPUs: 4, DiskMB: 512, RangeStart: ptr[int64](1), RangeEnd: ptr[int64](8)})
	eventually(t, 30*time.Second, "two instances planned", func() string {
		if p, s, _ := planned(n, j.ID); p+s != 2 {
			return fmt.Sprintf("%d+%d planned", p, s)
		}
		if r := m.nodes[0].drv.Running(); len(r) != 2 {
			return fmt.Sprintf("%d runs", len(r))
		}
		return ""
	})
	// One run writes 600 MB: stopped, its item fails (retries 0).
	runs := m.nodes[0].drv.Running()
	sp, _ := m.nodes[0].drv.Spec(runs[0])
	m.nodes[0].drv.SetDiskUsage(runs[0], 600<<20)
	eventually(t, 30*time.Second, "the item failed naming the disk", func() string {
		ji := jobState(t, n, j.ID)
		if ji.Items.Failed != 1 || !strings.Contains(ji.Error, "past its disk request of 512 MiB") || !strings.Contains(ji.Error, fmt.Sprintf("item %d failed", sp.Item)) {
			return fmt.Sprintf("%+v: %q", ji.Items, ji.Error)
		}
		return ""
	})
}
