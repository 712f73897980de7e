package cli

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/cshare/cshare/node/api"
)

func (f *fakeNode) CreateContract(_ context.Context, req api.ContractCreate) (api.ContractInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.contract = &req
	f.calls = append(f.calls, fmt.Sprintf("contract create %s %s gpus=%d disk=%d for=%d env=%v onstart=%q cmd=%q",
		req.Offer, req.Image, req.GPUs, req.DiskMB, req.ForMS, req.Env, req.OnStart, req.Cmd))
	return api.ContractInfo{ID: "c0123456789ab", State: "requested"}, nil
}

func (f *fakeNode) Contracts(context.Context) ([]api.ContractInfo, error) { return nil, nil }

func (f *fakeNode) Contract(_ context.Context, id string) (api.ContractInfo, error) {
	return api.ContractInfo{ID: id, State: "running", GPUs: 1, GPUDevices: []int64{3}, OOMRisk: "none"}, nil
}

func (f *fakeNode) ContractAction(_ context.Context, id, action string) (api.ContractInfo, error) {
	return api.ContractInfo{ID: id, State: action + "ped"}, nil
}

func (f *fakeNode) ExtendContract(_ context.Context, id string, _ api.ContractExtendRequest) (api.ContractInfo, error) {
	return api.ContractInfo{}, api.Errorf(http.StatusForbidden, "only the host (bob) may extend contract %s; ask them to", id)
}

func (f *fakeNode) ContractUsage(context.Context, int64) (api.ContractUsage, error) {
	return api.ContractUsage{Renters: []api.UsageAccount{{Name: "alice", Contracts: 1, Cost: 0.5}}, Hosts: []api.UsageAccount{}}, nil
}

func TestContractCLI(t *testing.T) {
	n := startNode(t)
	r := n.run("contract", "create", "0123", "--image", "busybox", "--gpus", "1", "--disk", "1g", "--for", "2h",
		"--env", "A=1", "--onstart", "echo hi", "--", "sleep", "60")
	if r.code != 0 || r.lastLine() != "c0123456789ab" {
		t.Fatalf("contract create: %+v", r)
	}
	n.mu.Lock()
	calls := strings.Join(n.calls, "; ")
	n.mu.Unlock()
	if want := `contract create 0123 busybox gpus=1 disk=1024 for=7200000 env=map[A:1] onstart="echo hi" cmd=["sleep" "60"]`; !strings.Contains(calls, want) {
		t.Fatalf("calls %s; want %s", calls, want)
	}
	if r := n.run("contract", "show", "c0123", "--json"); r.code != 0 || !strings.Contains(r.stdout, `"gpu_devices": [`) || !strings.Contains(r.stdout, `"memory_mb"`) {
		t.Fatalf("contract show --json: %+v", r)
	}
	if r := n.run("contract", "stop", "c0123"); r.code != 0 || !strings.Contains(r.stdout, "stopped") {
		t.Fatalf("contract stop: %+v", r)
	}
	if r := n.run("contract", "usage"); r.code != 0 || !strings.Contains(r.stdout, "alice") {
		t.Fatalf("contract usage: %+v", r)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"contract", "create", "0123"}, "--image is required"},
		{[]string{"contract", "create", "--image", "x"}, "give one OFFER_ID"},
		{[]string{"contract", "create", "0123", "--image", "x", "--for", "soon"}, "--for"},
		{[]string{"contract", "create", "0123", "--image", "x", "--env", "1=2"}, "--env"},
		{[]string{"contract", "create", "0123", "--image", "x", "--mode", "vnc"}, "--mode: \"vnc\"; allowed: entrypoint, ssh, jupyter"},
		{[]string{"contract", "create", "0123", "--image", "x", "--direct"}, "--direct: only with --mode jupyter"},
		{[]string{"contract", "extend", "c0123"}, "--for is required"},
		{[]string{"contract", "extend", "c0123", "--for", "1h"}, "only the host (bob) may extend"},
		{[]string{"contract", "extend", "c0123", "--for", "2000000h"}, "--for: 2000000h; at most 10 years"},
		{[]string{"contract", "usage", "--at", "yesterday"}, "--at"},
	} {
		r := n.run(tc.args...)
		if r.code == 0 || !strings.Contains(r.stderr, tc.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") > 1 {
			t.Errorf("%v: code %d, stderr %q; want an error with %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
}
