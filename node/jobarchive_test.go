package node

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/store"
	"github.com/cshare/cshare/node/api"
)

// TestFinishedJobsLeaveTheState (docs/design.md §5.7): two nodes run two
// jobs to the end; at the checkpoint written after, both jobs leave every
// node's State for a summary (the same State hash on both), and job show
// and job items answer with the same JSON as before, from the disk; a
// restarted node agrees. A node without the items on its disk says where
// they are. jobs.retain then drops them from both States at a checkpoint
// time past it.
func TestFinishedJobsLeaveTheState(t *testing.T) {
	var skew atomic.Int64 // ms the mesh's clock is ahead
	clock := func() time.Time { return time.Now().Add(time.Duration(skew.Load()) * time.Millisecond) }
	m := newMesh(t, meshConfig{n: 2, interval: 300 * time.Millisecond, slots: 2, runFor: 5 * time.Millisecond, onePerson: true, now: clock})
	m.formOrg()
	n0 := m.nodes[0].Node
	ctx := ctxT(t)
	var ids []string
	for k := 0; k < 2; k++ {
		end := int64(6)
		if k == 0 {
			end = 2500 // pages of ledger.ArchivePage on disk
		}
		ji := submit(t, n0, api.JobSubmit{Name: fmt.Sprintf("j%d", k), Driver: "exec", Cmd: []string{"true"}, RangeEnd: &end, Retries: int64(k)})
		ids = append(ids, ji.ID)
	}
	// Done, and quiet: no instance left, no result (a stopped run's) still
	// to reach the ledger, one State hash.
	eventually(t, 60*time.Second, "both jobs done and every result in the ledger on both nodes", func() string {
		for _, mn := range m.nodes {
			for _, id := range ids {
				if j, err := jobOf(mn.Node, id); err != nil || j.State != ledger.JobDone {
					return fmt.Sprintf("%s: job %s: %v", mn.name, id, err)
				}
			}
			if k, p := len(mn.sched.View().Instances), mn.sched.Probe().PendingResults(); k+p > 0 {
				return fmt.Sprintf("%s: %d instances, %d results not in the ledger", mn.name, k, p)
			}
		}
		if count, msg := m.hashes(); len(count) != 1 {
			return msg
		}
		return ""
	})
	show := func(n *Node, id string) string {
		t.Helper()
		ji, err := n.jobs.Job(ctx, id)
		if err != nil {
			t.Fatalf("job show %s: %v", id, err)
		}
		items, err := n.jobs.JobItems(ctx, id)
		if err != nil {
			t.Fatalf("job items %s: %v", id, err)
		}
		b, _ := json.Marshal(struct {
			Job   api.JobInfo
			Items []api.ItemInfo
		}{ji, items})
		return string(b)
	}
	before := map[string]string{}
	for _, mn := range m.nodes {
		for _, id := range ids {
			before[mn.name+id] = show(mn.Node, id)
		}
	}

	if _, err := n0.rep.WriteCheckpoint(ctx); err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	left := func(want string) func() string {
		return func() string {
			for _, mn := range m.live() {
				for _, id := range ids {
					j, err := jobOf(mn.Node, id)
					switch {
					case want == "gone" && err == nil:
						return fmt.Sprintf("%s still has job %s", mn.name, id)
					case want == "archived" && (err != nil || j.Archived == nil):
						return fmt.Sprintf("%s: job %s has not left the State (%v)", mn.name, id, err)
					}
				}
			}
			if count, msg := m.hashes(); len(count) != 1 {
				return msg
			}
			return ""
		}
	}
	eventually(t, 30*time.Second, "jobs archived on both nodes, one State hash", left("archived"))
	for _, mn := range m.nodes {
		for _, id := range ids {
			if got := show(mn.Node, id); got != before[mn.name+id] {
				t.Errorf("%s: job %s reads otherwise once archived:\n got  %s\n want %s", mn.name, id, got, before[mn.name+id])
			}
		}
	}

	// A part of the list, across pages on disk, is that part of the whole.
	var whole struct{ Items []api.ItemInfo }
	if err := json.Unmarshal([]byte(before["n0"+ids[0]]), &whole); err != nil {
		t.Fatal(err)
	}
	var part []api.ItemInfo
	err := n0.jobs.ListJobItems(ctx, ids[0], api.Page{After: "998", Limit: 1003}, func(it api.ItemInfo) error {
		it.Runs = append([]api.RunInfo{}, it.Runs...) // emit's Runs is reused
		part = append(part, it)
		return nil
	})
	if got, want := mustJSON(t, part), mustJSON(t, whole.Items[998:998+1003]); err != nil || got != want {
		t.Fatalf("items after 998, 1003 of them: %v\n got  %.300s\n want %.300s", err, got, want)
	}

	// A restarted node folds the same and reads the same.
	m.stop(1)
	n1 := m.restart(1)
	eventually(t, 30*time.Second, "the restarted node agrees", left("archived"))
	for _, id := range ids {
		if got := show(n1, id); got != before["n1"+id] {
			t.Errorf("restarted n1: job %s reads otherwise:\n got  %s\n want %s", id, got, before["n1"+id])
		}
	}

	// A run reported after the job left (a late duplicate) is listed after
	// the item's others, on every node, as for a job in the State.
	if _, err := n0.rep.Write(ctx, ledger.KindJobResults, ledger.JobResults{Job: ids[1],
		Results: []ledger.ItemResult{{Item: 2, Instance: "late", DurationMS: 7}}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the late run on both nodes", func() string {
		for _, mn := range m.nodes {
			items, err := mn.jobs.JobItems(ctx, ids[1])
			if err != nil {
				return err.Error()
			}
			var was struct{ Items []api.ItemInfo }
			_ = json.Unmarshal([]byte(before[mn.name+ids[1]]), &was)
			it, old := items[1], was.Items[1]
			if len(it.Runs) != len(old.Runs)+1 || it.Attempts != old.Attempts+1 {
				return fmt.Sprintf("%s: item 2 has %d runs, %d attempts; want %d, %d", mn.name, len(it.Runs), it.Attempts, len(old.Runs)+1, old.Attempts+1)
			}
			if last := it.Runs[len(it.Runs)-1]; last.Instance != "late" || last.Counted {
				return fmt.Sprintf("%s: item 2's last run %+v", mn.name, last)
			}
		}
		if count, msg := m.hashes(); len(count) != 1 {
			return msg
		}
		return ""
	})

	// Items not on this machine's disk (it joined after they left):
	// job show answers from the summary, job items says where they are.
	if err := n1.store.PutJobs([]store.JobOp{{ID: ids[0]}}); err != nil {
		t.Fatal(err)
	}
	if _, err := n1.jobs.Job(ctx, ids[0]); err != nil {
		t.Fatalf("job show without items on disk: %v", err)
	}
	if _, err := n1.jobs.JobItems(ctx, ids[0]); statusCode(err) != 404 || !strings.Contains(err.Error(), "kept only on the machines that were members") {
		t.Fatalf("job items without items on disk: %v", err)
	}

	// jobs.retain: at a checkpoint 2h later, jobs that ended more than 1h
	// before leave every State.
	o, err := n0.orgs.SetSettings(ctx, api.SettingsRequest{Set: map[string]string{"jobs.retain": "1h"}})
	if err != nil || o.Settings.Jobs.RetainMS != 3_600_000 {
		t.Fatalf("org set jobs.retain=1h: %+v, %v", o.Settings.Jobs, err)
	}
	if _, err := n0.orgs.SetSettings(ctx, api.SettingsRequest{Set: map[string]string{"jobs.retain": "1m"}}); err == nil || !strings.HasPrefix(err.Error(), "jobs.retain:") {
		t.Fatalf("org set jobs.retain=1m: %v", err)
	}
	skew.Store(2 * 3_600_000)
	if _, err := n0.rep.WriteCheckpoint(ctx); err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	eventually(t, 30*time.Second, "jobs dropped on both nodes, one State hash", left("gone"))
	if _, err := n0.jobs.Job(ctx, ids[1]); statusCode(err) != 404 {
		t.Fatalf("job show of a dropped job: %v", err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
