package cli

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/jobspec"
	"github.com/cshare/cshare/node/api"
)

// testNow is the fixed clock of every test.
var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	ownerID = "12D3KooWOwnerOwnerOwnerOwnerOwnerOwnerOwnerAAAAAAAAAAAA"
	m1ID    = "12D3KooWMachineOneMachineOneMachineOne111111111111aaaa"
	m2ID    = "12D3KooWMachineTwoMachineTwoMachineTwo222222222222bbbb"
	personB = "12D3KooWPersonBobPersonBobPersonBobPersonBob55555dddd"
	m3ID    = "12D3KooWMachineThrMachineThrMachineThr333333333333cccc"
	jobID   = "bafyreijobjobjobjobjobjobjobjobjobjobjobjobjobjob0001"
	job2ID  = "bafyreijobjobjobjobjobjobjobjobjobjobjobjobjobjob0002"
	orgKey  = "cshare-org-KEY-abcdef0123456789"
	invite  = "cshare-invite-CODE-0123456789"
)

// fakeNode implements every service's API (api.Services) and records what
// the CLI asked for.
type fakeNode struct {
	mu       sync.Mutex
	calls    []string
	submit   *api.JobSubmit
	invite   *api.InviteRequest
	settings *api.SettingsRequest
	join     *api.JoinRequest
	create   *api.OrgCreate
	modify   *api.JobModify
	role     string
	fail     error // returned by every call when set
	onStop   func()
	left     int // > 0 after leave or delete: status shows no org once this many statuses were asked
	leave    *api.LeaveRequest
	del      *api.OrgDeleteRequest

	org      api.OrgInfo
	machines []api.MachineInfo
	members  []api.MemberInfo
	jobs     []api.JobInfo
	items    []api.ItemInfo
	datasets []api.DatasetInfo
	dsAdd    *api.DatasetAdd
	dsGet    *api.DatasetGet
	offers   []api.OfferInfo     // what offer ls lists (none unless a test sets them)
	contract *api.ContractCreate // the last contract create
}

func newFake() *fakeNode {
	return &fakeNode{
		org: api.OrgInfo{ID: "bafyorg", Name: "acme", Owner: ownerID, OwnerName: "alice", StateHash: "abc123", Entries: 12, Heads: []string{"bafyhead1"},
			Settings: ledger.DefaultSettings(), Members: 2, Machines: 4},
		machines: []api.MachineInfo{
			{ID: m1ID, Name: "office-gpu-1", Status: "available", Owner: ownerID, LastHeartbeat: api.FormatTime(testNow.Add(-12 * time.Second)),
				Hardware: ledger.Hardware{CPUs: 16, MemoryMB: 65536, DiskMB: 1 << 20, GPUs: []ledger.GPU{{Index: 0, UUID: "GPU-1", Name: "A100", MemoryMB: 40960}}},
				Limits:   ledger.Limits{CPULimit: 100, MemoryLimit: 65536, DiskLimit: 1 << 20, MaxConcurrentJobs: 16},
				Free:     &api.Resources{Cores: 1500, MemoryMB: 1536, DiskMB: 4096, GPUs: 1, Slots: 3}},
			{ID: m2ID, Name: "render-2", Status: "busy", Owner: ownerID, LastHeartbeat: api.FormatTime(testNow.Add(-3 * time.Minute)), RunningJobs: 2, TotalJobs: 7,
				Hardware: ledger.Hardware{CPUs: 8, MemoryMB: 16384}},
			{ID: m3ID, Name: "laptop", Status: "pending", Owner: personB, OwnerName: "bob",
				History: []api.MachineEvent{{Status: "pending", Time: api.FormatTime(testNow.Add(-2 * time.Hour)), By: personB},
					{Status: "removed", Time: api.FormatTime(testNow.Add(-90 * time.Minute)), By: ownerID},
					{Status: "pending", Time: api.FormatTime(testNow.Add(-time.Hour)), By: "bob\x1b[2J"}}},
			{ID: "12D3KooWOfflineOfflineOfflineOfflineOfflineOffline9999", Name: "old", Status: "offline", Owner: ownerID,
				LastHeartbeat: api.FormatTime(testNow.Add(-50 * time.Hour))},
		},
		members: []api.MemberInfo{
			{ID: ownerID, Role: "owner", Name: "alice", Machines: []string{m1ID, m2ID, "12D3KooWOfflineOfflineOfflineOfflineOfflineOffline9999"},
				Joined: api.FormatTime(testNow.Add(-48 * time.Hour))},
			{ID: personB, Role: "admin", Name: "bob", Machines: []string{m3ID}, Joined: api.FormatTime(testNow.Add(-time.Hour))},
		},
		jobs: []api.JobInfo{
			{ID: jobID, Name: "render", Submitter: ownerID, State: "running", Priority: 5, CPUs: 2, MaxCPUs: "10", Driver: "docker",
				Cmd: []string{"sh", "-c", "echo $CSHARE_ITEM"}, Range: "1-100", Cores: 500, MemoryMB: 512, GPUs: 1, Items: api.Items{Total: 100, Done: 40, Failed: 1, Running: 3, Pending: 56},
				Instances: []api.InstanceInfo{
					{Machine: m1ID, MachineName: "office-gpu-1", Slot: 0, Kind: "primary", State: "running", Item: 41},
					{Machine: m1ID, MachineName: "office-gpu-1", Slot: 1, Kind: "primary", State: "running", Item: 42},
					{Machine: m2ID, MachineName: "render-2", Slot: 0, Kind: "secondary", State: "starting", Relayed: true},
				},
				Reason: "preempted by a higher priority job", Submitted: api.FormatTime(testNow.Add(-5 * time.Minute))},
			{ID: job2ID, Submitter: m3ID, State: "queued", Priority: 9999, CPUs: 1, MaxCPUs: "*", Driver: "exec", Cmd: []string{"true"}, Range: "1",
				Items: api.Items{Total: 1, Pending: 1}, Submitted: api.FormatTime(testNow.Add(-3 * 24 * time.Hour))},
		},
		items: []api.ItemInfo{
			{Item: 1, Status: "done", Attempts: 1, Code: 0, DurationMS: 1500, OutputSize: 2048, Machine: m1ID},
			{Item: 2, Status: "failed", Attempts: 2, Code: 3, DurationMS: 20, OutputSize: 10, Machine: m2ID},
			{Item: 3, Status: "pending"},
		},
	}
}

func (f *fakeNode) call(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, name)
	return f.fail
}

func (f *fakeNode) called() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeNode) Status(ctx context.Context) (api.NodeStatus, error) {
	st := api.NodeStatus{ID: m1ID, Name: "office-gpu-1", Org: "bafyorg", OrgName: "acme", Status: "available", Role: "owner", Person: ownerID, PersonName: "alice",
		Peers: 2, PeerIDs: []string{m1ID, m2ID}, Heads: []string{"bafyhead1"}, Entries: 12, StateHash: "abc123", Uptime: "1m0s",
		UptimeSeconds: 60, Version: "0.1.0-test", PlanHash: "p1", PlanAgree: 2, PlanPeers: 2, API: "127.0.0.1:1", DataDir: "/x",
		Reachability: "private", PublicAddrs: []string{"/ip4/203.0.114.7/tcp/4001"},
		Connections: []api.Connection{{Machine: m2ID, Path: "relayed", Addr: "/ip4/203.0.114.9/tcp/4001/p2p/" + ownerID + "/p2p-circuit"}}}
	f.mu.Lock()
	if f.left > 0 {
		if f.left--; f.left == 0 {
			st.Org, st.OrgName, st.Status, st.Role = "", "", "no org", ""
		}
	}
	f.mu.Unlock()
	return st, f.call("status")
}

func (f *fakeNode) Stop(ctx context.Context) error {
	err := f.call("stop")
	if f.onStop != nil {
		f.onStop()
	}
	return err
}

func (f *fakeNode) CreateOrg(ctx context.Context, req api.OrgCreate) (api.KeyResult, error) {
	f.mu.Lock()
	f.create = &req
	f.mu.Unlock()
	return api.KeyResult{Org: "bafyorg", Key: orgKey}, f.call("create:" + req.Name + ":" + req.Description)
}

func (f *fakeNode) Org(ctx context.Context) (api.OrgInfo, error) {
	return f.org, f.call("org")
}

func (f *fakeNode) OrgKey(ctx context.Context, rotate bool) (api.KeyResult, error) {
	if rotate {
		return api.KeyResult{Org: "bafyorg", Key: orgKey + "-rotated"}, f.call("rotate")
	}
	return api.KeyResult{Org: "bafyorg", Key: orgKey}, f.call("key")
}

func (f *fakeNode) Invite(ctx context.Context, req api.InviteRequest) (api.KeyResult, error) {
	f.mu.Lock()
	f.invite = &req
	f.mu.Unlock()
	return api.KeyResult{Org: "bafyorg", Key: invite, Role: req.Role, Expires: "2026-03-04T12:00:00Z", Uses: req.Uses}, f.call("invite")
}

func (f *fakeNode) SetSettings(ctx context.Context, req api.SettingsRequest) (api.OrgInfo, error) {
	f.mu.Lock()
	f.settings = &req
	f.mu.Unlock()
	if err := f.call("settings"); err != nil {
		return api.OrgInfo{}, err
	}
	return f.Org(ctx)
}

func (f *fakeNode) Join(ctx context.Context, req api.JoinRequest) (api.JoinResult, error) {
	f.mu.Lock()
	f.join = &req
	f.mu.Unlock()
	if req.OrgKey == invite {
		return api.JoinResult{Org: "bafyorg", OrgName: "acme", Machine: m3ID, Status: "approved", Role: "admin"}, f.call("join")
	}
	return api.JoinResult{Org: "bafyorg", OrgName: "acme", Machine: m3ID, Status: "pending"}, f.call("join")
}

func (f *fakeNode) Machines(ctx context.Context) ([]api.MachineInfo, error) {
	return f.machines, f.call("machines")
}

// resolve stands in for the node's resolver: the CLI sends references as
// given, and the node answers 404 or, for an ambiguous one, 409.
func resolve[T any](kind, ref string, items []T, idName func(T) (string, string)) (T, error) {
	var hits []T
	var ids []string
	for _, it := range items {
		if id, _ := idName(it); id == ref {
			return it, nil
		}
	}
	for _, it := range items {
		id, name := idName(it)
		if name == ref || strings.HasPrefix(id, ref) || strings.HasSuffix(id, ref) {
			hits = append(hits, it)
			ids = append(ids, id)
		}
	}
	var zero T
	switch len(hits) {
	case 0:
		return zero, api.Errorf(http.StatusNotFound, "unknown %s %q", kind, ref)
	case 1:
		return hits[0], nil
	}
	return zero, api.Errorf(http.StatusConflict, "%s %q is ambiguous: it matches %d %ss: %s", kind, ref, len(hits), kind, strings.Join(ids, ", "))
}

func (f *fakeNode) Machine(ctx context.Context, id string) (api.MachineInfo, error) {
	if err := f.call("machine:" + id); err != nil {
		return api.MachineInfo{}, err
	}
	return resolve("machine", id, f.machines, func(m api.MachineInfo) (string, string) { return m.ID, m.Name })
}

func (f *fakeNode) MachineAction(ctx context.Context, id, action string) (api.MachineInfo, error) {
	m, err := f.Machine(ctx, id)
	if err != nil {
		return m, err
	}
	m.Status = map[string]string{"approve": "available", "reject": "rejected", "remove": "removed"}[action]
	return m, f.call(action + ":" + id)
}

func (f *fakeNode) Members(ctx context.Context) ([]api.MemberInfo, error) {
	return f.members, f.call("members")
}

func (f *fakeNode) member(id string) (api.MemberInfo, error) {
	return resolve("member", id, f.members, func(m api.MemberInfo) (string, string) { return m.ID, m.Name })
}

func (f *fakeNode) SetRole(ctx context.Context, id, role string) (api.MemberInfo, error) {
	m, err := f.member(id)
	if err != nil {
		return api.MemberInfo{}, err
	}
	f.mu.Lock()
	f.role = role
	f.mu.Unlock()
	m.Role = role
	return m, f.call("role:" + id)
}

func (f *fakeNode) RemoveMember(ctx context.Context, id string) (string, error) {
	m, err := f.member(id)
	if err != nil {
		return "", err
	}
	return m.ID, f.call("remove-member:" + id)
}

// Leave and DeleteOrg: the fake reports no org from the third status on,
// as a node does once it has started again.
func (f *fakeNode) Leave(ctx context.Context, req api.LeaveRequest) (api.LeftOrg, error) {
	f.mu.Lock()
	f.leave, f.left = &req, 3
	f.mu.Unlock()
	return fakeLeft(req.Purge), f.call("leave")
}

func (f *fakeNode) DeleteOrg(ctx context.Context, req api.OrgDeleteRequest) (api.LeftOrg, error) {
	if req.Confirm != "acme" {
		return api.LeftOrg{}, api.FieldErrorf(http.StatusBadRequest, "confirm", "--confirm: %s does not match the org's name acme", req.Confirm)
	}
	f.mu.Lock()
	f.del, f.left = &req, 3
	f.mu.Unlock()
	return fakeLeft(req.Purge), f.call("delete")
}

func fakeLeft(purge bool) api.LeftOrg {
	if purge {
		return api.LeftOrg{Org: "bafyorg", OrgName: "acme", Purged: true}
	}
	return api.LeftOrg{Org: "bafyorg", OrgName: "acme", Archive: "/data/orgs/bafyorg"}
}

func (f *fakeNode) ExportHistory(ctx context.Context, req api.HistoryExport) (api.HistoryExported, error) {
	return api.HistoryExported{Path: req.Out, Format: "cshare-ledger-history/1", Entries: 1234, Bytes: 567890}, nil
}

func (f *fakeNode) TransferOrg(ctx context.Context, to string) (api.OrgInfo, error) {
	m, err := f.member(to)
	if err != nil {
		return api.OrgInfo{}, err
	}
	if m.Role != "admin" {
		return api.OrgInfo{}, api.Errorf(http.StatusConflict, "person %s (%s) is a member: ownership goes to an admin only; make them an admin first: cshare member set-role %s admin", m.Name, m.ID, m.ID)
	}
	o := f.org
	o.Owner, o.OwnerName = m.ID, m.Name
	return o, f.call("transfer:" + to)
}

// fakeUnfit is the fake's warning for a job asking for more than 1 GPU.
const fakeUnfit = "no approved machine of the org can run one instance of this job yet: 2 GPUs per instance, above the largest machine's 1"

func (f *fakeNode) SubmitJob(ctx context.Context, req api.JobSubmit) (api.JobSubmitted, error) {
	f.mu.Lock()
	f.submit = &req
	f.mu.Unlock()
	maxc := "default"
	if req.MaxCPUs != nil {
		maxc = jobspec.FormatMaxCPUs(*req.MaxCPUs)
	}
	var warnings []string
	if req.GPUs > 1 {
		warnings = []string{fakeUnfit}
	}
	return api.JobSubmitted{JobInfo: api.JobInfo{ID: jobID, Name: req.Name, State: "queued", Priority: req.Priority, CPUs: req.CPUs, MaxCPUs: maxc,
		Cmd: req.Cmd, Range: fmt.Sprintf("%d-%d", *req.RangeStart, *req.RangeEnd)}, Warnings: warnings}, f.call("submit")
}

func (f *fakeNode) Jobs(ctx context.Context) ([]api.JobInfo, error) { return f.jobs, f.call("jobs") }

func (f *fakeNode) ListJobs(ctx context.Context, p api.Page, emit func(api.JobInfo) error) error {
	js, err := f.Jobs(ctx)
	if err != nil {
		return err
	}
	return api.EmitRows(js, p, func(j api.JobInfo) string { return j.ID }, emit)
}

// ListJobItems pages JobItems by item number, as the node does.
func (f *fakeNode) ListJobItems(ctx context.Context, id string, p api.Page, emit func(api.ItemInfo) error) error {
	items, err := f.JobItems(ctx, id)
	if err != nil {
		return err
	}
	after, ok, err := api.ItemCursor(p.After)
	if err != nil {
		return err
	}
	var n int64
	for _, it := range items {
		if ok && it.Item <= after {
			continue
		}
		if p.Limit > 0 && n == p.Limit {
			break
		}
		n++
		if err := emit(it); err != nil {
			return err
		}
	}
	return nil
}

func (f *fakeNode) Job(ctx context.Context, id string) (api.JobInfo, error) {
	if err := f.call("job:" + id); err != nil {
		return api.JobInfo{}, err
	}
	return resolve("job", id, f.jobs, func(j api.JobInfo) (string, string) { return j.ID, j.Name })
}

func (f *fakeNode) ExplainJob(ctx context.Context, id string) (api.JobExplain, error) {
	j, err := f.Job(ctx, id)
	if err != nil {
		return api.JobExplain{}, err
	}
	return api.JobExplain{Job: j.ID, Name: j.Name, State: j.State, Reason: j.Reason, Wanted: 4, Planned: 3, PendingItems: 59,
		Machines: []api.MachineWaits{
			{Machine: m1ID, Name: "render-1", Status: "approved", Online: true, Instances: 3, Reasons: []api.WaitReason{}},
			{Machine: m2ID, Name: "render-2", Status: "approved", Online: false, Reasons: []api.WaitReason{{Code: "offline", Text: "no heartbeat from it within 3 intervals"}}},
			{Machine: m3ID, Name: "gpu-box", Status: "pending", Reasons: []api.WaitReason{{Code: "not_approved", Text: "it waits for an admin to approve it"}}},
		}}, nil
}

func (f *fakeNode) ModifyJob(ctx context.Context, id string, req api.JobModify) (api.JobInfo, error) {
	j, err := f.Job(ctx, id)
	if err != nil {
		return j, err
	}
	f.mu.Lock()
	f.modify = &req
	f.mu.Unlock()
	if req.Priority != nil {
		j.Priority = *req.Priority
	}
	if req.MaxCPUs != nil {
		j.MaxCPUs = jobspec.FormatMaxCPUs(*req.MaxCPUs)
	}
	return j, f.call("modify:" + id)
}

func (f *fakeNode) CancelJob(ctx context.Context, id string) (api.JobInfo, error) {
	j, err := f.Job(ctx, id)
	j.State = "cancelled"
	return j, err
}

func (f *fakeNode) JobLogs(ctx context.Context, id string, item int64) ([]byte, error) {
	if _, err := f.Job(ctx, id); err != nil {
		return nil, err
	}
	return []byte("raw output of item " + itoa(item) + "\nline two\n"), f.call("logs")
}

func (f *fakeNode) JobItems(ctx context.Context, id string) ([]api.ItemInfo, error) {
	j, err := f.Job(ctx, id)
	if err != nil {
		return nil, err
	}
	if j.ID == job2ID {
		return []api.ItemInfo{{Item: 1, Status: "pending"}}, nil
	}
	return f.items, f.call("items")
}

// testNode is a fake node behind the real API handler, and a data dir that
// points at it.
type testNode struct {
	*fakeNode
	srv     *httptest.Server
	dataDir string
}

func startNode(t *testing.T) *testNode {
	t.Helper()
	const token = "test-token"
	f := newFake()
	srv := httptest.NewServer(api.Handler(api.Services{Node: f, Org: f, Leave: f, Jobs: f, Market: f, Datasets: f, Usage: f, History: f, Dashboard: f}, token))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, api.AddrFile), strings.TrimPrefix(srv.URL, "http://")+"\n")
	writeFile(t, filepath.Join(dir, api.TokenFile), token+"\n")
	return &testNode{fakeNode: f, srv: srv, dataDir: dir}
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// result is one run of the CLI.
type result struct {
	stdout, stderr string
	code           int
}

// lastLine is the last line of stdout.
func (r result) lastLine() string {
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	return lines[len(lines)-1]
}

func runCLI(args ...string) result { return runCLIWith(nil, args...) }

// runCLIWith runs the CLI with the test clock and a short `node stop`
// poll, after set (if not nil) adjusts the app.
func runCLIWith(set func(*app), args ...string) result {
	var out, errb bytes.Buffer
	a := newApp(&out, &errb)
	a.now = func() time.Time { return testNow }
	a.stopInterval = 10 * time.Millisecond
	a.loginName = func() string { return "" }
	if set != nil {
		set(a)
	}
	code := a.run(args)
	return result{stdout: out.String(), stderr: errb.String(), code: code}
}

// run runs the CLI against n's data dir.
func (n *testNode) run(args ...string) result {
	return runCLI(append([]string{"--data-dir", n.dataDir}, args...)...)
}

// closedAddr is a loopback address where nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// SignInCode is the dashboard's sign-in code (node dashboard).
func (f *fakeNode) SignInCode(context.Context) (api.SignInCode, error) {
	return api.SignInCode{Code: "c0de", Path: "/login?code=c0de", Expires: "2026-01-01T00:00:00Z"}, nil
}
