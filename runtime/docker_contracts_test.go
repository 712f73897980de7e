package runtime

import (
	"context"
	"encoding/hex"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestContractHostConfig: baselines become CPU shares and a memory
// reservation under the ceilings, GPUs a device request, the disk a size.
func TestContractHostConfig(t *testing.T) {
	s := ContractSpec{Org: "o", Machine: "m", Contract: "c1", Image: TestImage, GPUs: []string{"GPU-a"}, CPUShares: 2048, NanoCPUs: 4e9,
		MemoryReservationBytes: 1 << 30, MemoryBytes: 4 << 30, ShmBytes: 512 << 20, DiskBytes: 10 << 30}
	hc, err := ContractHostConfig(s)
	if err != nil {
		t.Fatal(err)
	}
	r := hc.Resources
	if r.CPUShares != 2048 || r.NanoCPUs != 4e9 || r.MemoryReservation != 1<<30 || r.Memory != 4<<30 || hc.ShmSize != 512<<20 ||
		hc.StorageOpt["size"] != "10737418240" || len(r.DeviceRequests) != 1 || r.DeviceRequests[0].DeviceIDs[0] != "GPU-a" {
		t.Fatalf("host config %+v", hc)
	}
	for _, bad := range []ContractSpec{{Org: "o", Machine: "m", Image: TestImage}, {Org: "o", Machine: "m", Contract: "c", Image: TestImage, Env: map[string]string{EnvContract: "x"}},
		{Org: "o", Machine: "m", Contract: "c", Image: TestImage, MemoryReservationBytes: 8 << 20, MemoryBytes: 7 << 20}} {
		if _, err := ContractHostConfig(bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// TestDockerContractLifecycle runs a contract instance on the local
// engine in GPU recording mode: created stopped with its labels and
// limits and no device request, started (onstart, then the command, with
// CSHARE_CONTRACT set), listed, stopped in place (its disk kept), started
// again, and removed.
func TestDockerContractLifecycle(t *testing.T) {
	d, cli := dockerForTest(t)
	d.RecordGPUs(true)
	org, b := testContractOrg(t, cli)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := ContractSpec{Org: org, Machine: "m1", Contract: "c" + hex.EncodeToString(b[:]), Image: TestImage, GPUs: []string{"0", "1"},
		OnStart: "echo started >> /root/starts", Cmd: []string{"sleep", "600"}, Env: map[string]string{"A": "1"},
		CPUShares: 512, NanoCPUs: 1e9, MemoryReservationBytes: 32 << 20, MemoryBytes: 64 << 20, DiskBytes: 100 << 20}
	id, err := d.CreateContract(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	info, err := cli.ContainerInspect(ctx, string(id))
	if err != nil {
		t.Fatal(err)
	}
	l := info.Config.Labels
	if l[LabelContract] != s.Contract || l[LabelOrg] != org || l[LabelGPUs] != "0,1" || l[LabelGPUMode] != "record" ||
		len(info.HostConfig.DeviceRequests) != 0 || info.HostConfig.CPUShares != 512 || info.HostConfig.MemoryReservation != 32<<20 || info.State.Running {
		t.Fatalf("created: labels %v, host config %+v, running %v", l, info.HostConfig.Resources, info.State.Running)
	}
	list := func() []ContractRun {
		t.Helper()
		rs, err := d.ListContracts(ctx, org, "m1")
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	for i := 0; i < 2; i++ {
		if err := d.StartContract(ctx, id); err != nil {
			t.Fatal(err)
		}
		if rs := list(); len(rs) != 1 || !rs[0].Running || rs[0].Contract != s.Contract || strings.Join(rs[0].GPUs, ",") != "0,1" {
			t.Fatalf("listed %+v", rs)
		}
		// A stop before the onstart command has run would skip it (on a
		// loaded host the shell may not have started yet): wait for it.
		waitStarts(t, ctx, string(id), i+1)
		if err := d.StopContract(ctx, id, time.Second); err != nil {
			t.Fatal(err)
		}
		if rs := list(); len(rs) != 1 || rs[0].Running {
			t.Fatalf("after stop %+v", rs)
		}
	}
	// The disk outlived the stops: onstart ran once per start.
	if err := d.StartContract(ctx, id); err != nil {
		t.Fatal(err)
	}
	waitStarts(t, ctx, string(id), 3)
	if env := execOut(t, ctx, string(id), "sh", "-c", "echo $CSHARE_CONTRACT $A"); strings.TrimSpace(env) != s.Contract+" 1" {
		t.Fatalf("env %q", env)
	}
	if rs, _ := d.ListContracts(ctx, org, "other-machine"); len(rs) != 0 {
		t.Fatalf("another machine's list %+v", rs)
	}
	if err := d.RemoveContract(ctx, id); err != nil {
		t.Fatal(err)
	}
	if rs := list(); len(rs) != 0 {
		t.Fatalf("after remove %+v", rs)
	}
}

// waitStarts polls until the contract's onstart command has run n times
// (onstart runs in the container after the start returns).
func waitStarts(t *testing.T, ctx context.Context, id string, n int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; {
		out := execOut(t, ctx, id, "cat", "/root/starts")
		if got := strings.Count(out, "started"); got == n {
			return
		} else if got > n || time.Now().After(deadline) {
			t.Fatalf("starts file %q; want %d starts", out, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// execOut runs cmd in the container with the docker CLI.
func execOut(t *testing.T, ctx context.Context, id string, cmd ...string) string {
	t.Helper()
	out, err := exec.CommandContext(ctx, "docker", append([]string{"exec", id}, cmd...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker exec %v: %v: %s", cmd, err, out)
	}
	return string(out)
}
