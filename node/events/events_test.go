package events

import (
	"strings"
	"testing"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/market"
)

func TestParseTopics(t *testing.T) {
	ts, err := ParseTopics(" machines,jobs,machines")
	if err != nil || len(ts) != 2 || !ts.Has("jobs") || ts.Has("org") {
		t.Fatalf("ParseTopics: %v %v", ts, err)
	}
	if ts, err := ParseTopics(""); err != nil || !ts.Has("org") {
		t.Fatalf("empty topics: %v %v", ts, err)
	}
	for _, bad := range []string{"machine", "jobs,,org", "jobs;org", strings.Repeat("x", 100)} {
		_, err := ParseTopics(bad)
		if err == nil || !strings.HasPrefix(err.Error(), "topics: ") || !strings.Contains(err.Error(), "allowed: machines, jobs, ledger, contracts, org") || len(err.Error()) > 200 {
			t.Errorf("ParseTopics(%q): %v", bad, err)
		}
	}
	if err := CheckTypes("notify[0].events", []string{"job.done", "machine.offline"}); err != nil {
		t.Fatal(err)
	}
	if err := CheckTypes("notify[0].events", []string{"job.finished"}); err == nil || !strings.Contains(err.Error(), `notify[0].events: "job.finished" is not an event type`) {
		t.Fatalf("CheckTypes: %v", err)
	}
	for _, typ := range Types() {
		if TopicOf(typ) == "" {
			t.Errorf("%s has no topic", typ)
		}
	}
}

func TestBusReplayAndFollow(t *testing.T) {
	now := time.Unix(1700000000, 0)
	b := NewBus(func() time.Time { return now })
	b.Publish(Event{Type: MachineOffline, Machine: "m1"}, Event{Type: JobDone, Job: "j1"})
	recent, gap := b.Recent(nil, 0)
	if len(recent) != 2 || gap || recent[1].ID != recent[0].ID+1 || recent[0].Topic != TopicMachines || !recent[0].Time.Equal(now) {
		t.Fatalf("recent: %+v gap %v", recent, gap)
	}
	first := recent[0].ID
	backlog, _, sub := b.Subscribe(Topics{TopicJobs}, first, true)
	if len(backlog) != 1 || backlog[0].Job != "j1" {
		t.Fatalf("backlog after %d: %+v", first, backlog)
	}
	b.Publish(Event{Type: MachineOnline, Machine: "m1"}, Event{Type: ItemDone, Job: "j1"})
	if e := <-sub.C; e.Type != ItemDone || e.ID != first+3 {
		t.Fatalf("followed: %+v", e)
	}
	var hooked []string
	b.OnPublish(func(e Event) { hooked = append(hooked, e.Type) })
	// A subscriber that falls SubBuffer behind is cut off; the bus goes on.
	for i := 0; i < SubBuffer+1; i++ {
		b.Publish(Event{Type: JobSubmitted})
	}
	n := 0
	for range sub.C {
		n++
	}
	if n != SubBuffer || !sub.Lagged() || len(hooked) != SubBuffer+1 {
		t.Fatalf("lagging subscriber got %d (lagged %v), hook %d", n, sub.Lagged(), len(hooked))
	}
	// The ring keeps RingSize: an old ID resumes with a gap.
	for i := 0; i < RingSize; i++ {
		b.Publish(Event{Type: LedgerEntry})
	}
	recent, gap = b.Recent(nil, first)
	if len(recent) != RingSize || !gap {
		t.Fatalf("after overflow: %d events, gap %v", len(recent), gap)
	}
	_, _, s2 := b.Subscribe(nil, 0, false)
	b.Close()
	if _, ok := <-s2.C; ok {
		t.Fatal("Close left a subscription open")
	}
	// A new bus numbers above the old one's (a restarted node).
	if b2 := NewBus(func() time.Time { return now.Add(time.Second) }); b2.next <= b.next {
		t.Fatalf("restart numbering: %d after %d", b2.next, b.next)
	}
}

func newState() *ledger.State {
	return &ledger.State{Org: "o", Name: "acme", Members: map[string]*ledger.Member{"p1": {ID: "p1", Role: ledger.RoleOwner}},
		Machines: map[string]*ledger.Machine{"a": {ID: "a", Status: ledger.MachineApproved}, "b": {ID: "b", Status: ledger.MachineApproved}, "c": {ID: "c", Status: ledger.MachineApproved}},
		Jobs:     map[string]*ledger.Job{}, Contracts: map[string]*ledger.Contract{}}
}

func types(es []Event) (out []string) {
	for _, e := range es {
		out = append(out, e.Type)
	}
	return out
}

// Every node derives the same events from the same changes, and exactly
// one of them is the one that sends each (Mine).
func TestTrackerEventsOnceAcrossTheOrg(t *testing.T) {
	nodes := []string{"a", "b", "c"}
	trackers := make([]*Tracker, len(nodes))
	states := make([]*ledger.State, len(nodes))
	now := time.UnixMilli(1_000_000)
	allOnline := func(string) bool { return true }
	for i := range nodes {
		trackers[i], states[i] = &Tracker{}, newState()
		trackers[i].Baseline(states[i])
		trackers[i].Peers(states[i], allOnline, nodes[i], now, true)
	}
	// skip: a node that is down (it sees nothing), or the machine that
	// sends (machine.pending: the registering one, not among nodes).
	skip := ""
	step := func(what string, change func(st *ledger.State), online func(string) bool, want ...string) {
		t.Helper()
		mine := map[string]int{}
		for i, n := range nodes {
			change(states[i])
			if n == skip {
				continue
			}
			var got []Event
			if online == nil {
				got = trackers[i].Ledger(states[i], nil, n).Events()
			} else {
				got = trackers[i].Peers(states[i], online, n, now, false)
			}
			if strings.Join(types(got), " ") != strings.Join(want, " ") {
				t.Fatalf("%s on %s: %v, want %v", what, n, types(got), want)
			}
			for _, e := range got {
				if e.Mine {
					mine[e.Type]++
				}
			}
		}
		for _, w := range want {
			if w == MachinePending {
				continue // d, which is not among nodes, sends it
			}
			if mine[w] != 1 {
				t.Fatalf("%s: %s sent by %d nodes, want 1", what, w, mine[w])
			}
		}
	}
	step("submit", func(st *ledger.State) {
		st.Jobs["j1"] = &ledger.Job{ID: "j1", Machine: "b", State: ledger.JobActive, Items: ledger.NewItemList(2)}
	}, nil, JobSubmitted)
	step("done", func(st *ledger.State) { st.Jobs["j1"].State = ledger.JobDone; st.Jobs["j1"].Done = 2 }, nil, JobDone)
	step("nothing", func(*ledger.State) {}, nil)
	step("register", func(st *ledger.State) { st.Machines["d"] = &ledger.Machine{ID: "d", Status: ledger.MachinePending} }, nil, MachinePending)
	step("approve", func(st *ledger.State) { st.Machines["d"].Status = ledger.MachineApproved }, nil, MachineApproved)
	step("d online", func(*ledger.State) {}, allOnline, MachineOnline)
	step("join", func(st *ledger.State) { st.Members["p2"] = &ledger.Member{ID: "p2", Role: ledger.RoleMember} }, nil, MemberJoined)
	step("settings", func(st *ledger.State) { st.Settings.RequireMachineApproval = true }, nil, SettingsChanged)
	step("contract", func(st *ledger.State) {
		st.Contracts["c1"] = &ledger.Contract{Contract: market.Contract{ID: "c1", Running: true, End: now.Add(time.Hour).UnixMilli()}, Machine: "c"}
	}, nil, ContractCreated, ContractStarted)
	// The lowest machine (a) goes offline: b, the lowest online, says so;
	// a itself (it sees itself online) says nothing of the others.
	noA := func(id string) bool { return id != "a" }
	skip = "a"
	step("a offline", func(*ledger.State) {}, noA, MachineOffline)
	step("a back", func(st *ledger.State) {}, allOnline, MachineOnline)
	skip = ""
	now = now.Add(50 * time.Minute)
	step("contract ending", func(*ledger.State) {}, allOnline, ContractEnding)
	step("ending said once", func(*ledger.State) {}, allOnline)
	step("capped", func(st *ledger.State) {
		st.Budgets = map[string]ledger.Budget{"c": {Ineffective: 65, Capped: &ledger.OrderKey{Clock: 9, CID: "x"}}}
	}, nil, MachineCapped)
	step("capped said once", func(*ledger.State) {}, nil)
	step("a new window", func(st *ledger.State) { st.Budgets = nil }, nil)
	step("remove", func(st *ledger.State) { delete(st.Members, "p2"); st.Machines["d"].Status = ledger.MachineRemoved }, nil, MachineRemoved, MemberRemoved)
}
