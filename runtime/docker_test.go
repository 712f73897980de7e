package runtime

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/client"
)

var (
	testImageOnce sync.Once
	testImageErr  error
)

// dockerForTest returns a driver and a raw client on the local engine, with
// TestImage present. It skips only when no engine is reachable.
func dockerForTest(t *testing.T) (*Docker, *client.Client) {
	t.Helper()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Skipf("skipping: no Docker client configuration: %v", err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx); err != nil {
		t.Skipf("skipping: no Docker engine reachable: %v", err)
	}
	testImageOnce.Do(func() {
		if _, err := cli.ImageInspect(ctx, TestImage); err == nil {
			return
		}
		out, err := exec.Command("bash", filepath.Join("..", "scripts", "testimage.sh")).CombinedOutput()
		if err != nil {
			testImageErr = fmt.Errorf("scripts/testimage.sh: %v\n%s", err, out)
		}
	})
	if testImageErr != nil {
		t.Fatalf("the engine is reachable but %s cannot be built: %v", TestImage, testImageErr)
	}
	return NewDocker(cli), cli
}

// testJob returns a job ID unique to this test run and removes the test's
// containers at the end.
func testJob(t *testing.T, cli *client.Client) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	job := "test-" + strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())) + "-" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		list, _ := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", LabelJob+"="+job))})
		for _, c := range list {
			_ = cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
		}
	})
	return job
}

func dockerSpec(job string, item int, cmd ...string) Spec {
	return Spec{Org: "org1", Job: job, Instance: "inst-1", Machine: "machine-1", Item: item, Image: TestImage, Cmd: cmd}
}

func TestDockerLimitsMountLabelsEnv(t *testing.T) {
	d, cli := dockerForTest(t)
	job := testJob(t, cli)
	ctx := waitCtx(t)

	ds := t.TempDir()
	if err := os.WriteFile(filepath.Join(ds, "hello.txt"), []byte("dataset-ok\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := dockerSpec(job, 7, "sh", "-c", `echo "job=$CSHARE_JOB_ID item=$CSHARE_ITEM inst=$CSHARE_INSTANCE machine=$CSHARE_MACHINE extra=$EXTRA"
cat /data/hello.txt
if touch /data/new 2>/dev/null; then echo data-writable; else echo data-readonly; fi
echo to-stderr >&2`)
	s.Env = map[string]string{"EXTRA": "yes"}
	s.NanoCPUs = 500_000_000
	s.MemoryBytes = 64 << 20
	s.MemoryReservationBytes = 32 << 20
	s.ShmBytes = 16 << 20
	s.PidsLimit = 64
	s.Mounts = []Mount{{Source: ds, Target: "/data", ReadOnly: true}}

	id, err := d.Start(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	es, err := d.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if es.Code != 0 || es.OOMKilled || es.Err != "" {
		t.Errorf("Wait = %+v, want a clean exit", es)
	}
	logs, err := d.Logs(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		fmt.Sprintf("job=%s item=7 inst=inst-1 machine=machine-1 extra=yes", job),
		"dataset-ok", "data-readonly", "to-stderr",
	} {
		if !strings.Contains(string(logs), want) {
			t.Errorf("logs %q lack %q", logs, want)
		}
	}

	info, err := cli.ContainerInspect(ctx, string(id))
	if err != nil {
		t.Fatal(err)
	}
	hc := info.HostConfig
	if hc.Memory != s.MemoryBytes || hc.MemoryReservation != s.MemoryReservationBytes || hc.NanoCPUs != s.NanoCPUs || hc.ShmSize != s.ShmBytes {
		t.Errorf("HostConfig memory=%d reservation=%d nanocpus=%d shm=%d", hc.Memory, hc.MemoryReservation, hc.NanoCPUs, hc.ShmSize)
	}
	if hc.PidsLimit == nil || *hc.PidsLimit != 64 {
		t.Errorf("HostConfig.PidsLimit = %v, want 64", hc.PidsLimit)
	}
	if hc.Privileged || hc.NetworkMode.IsHost() || hc.AutoRemove {
		t.Errorf("HostConfig privileged=%v network=%q autoremove=%v", hc.Privileged, hc.NetworkMode, hc.AutoRemove)
	}
	var found bool
	for _, m := range info.Mounts {
		if m.Destination == "/data" {
			found = true
			if m.RW || m.Type != mount.TypeBind || m.Source != ds {
				t.Errorf("mount /data = %+v, want a read-only bind of %s", m, ds)
			}
		}
	}
	if !found {
		t.Errorf("no /data mount in %+v", info.Mounts)
	}
	for k, v := range s.Labels() {
		if info.Config.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, info.Config.Labels[k], v)
		}
	}
}

func TestDockerExitCodesStopAndRemove(t *testing.T) {
	d, cli := dockerForTest(t)
	job := testJob(t, cli)
	ctx := waitCtx(t)

	failing, err := d.Start(ctx, dockerSpec(job, 1, "sh", "-c", "exit 3"))
	if err != nil {
		t.Fatal(err)
	}
	if es, err := d.Wait(ctx, failing); err != nil || es.Code != 3 {
		t.Errorf("Wait(exit 3) = %+v, %v", es, err)
	}

	sleeper, err := d.Start(ctx, dockerSpec(job, 2, "sleep", "60"))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Remove(ctx, sleeper); !errors.Is(err, ErrRunning) {
		t.Errorf("Remove(running) = %v, want ErrRunning", err)
	}
	st, err := d.Stats(ctx, sleeper)
	if err != nil {
		t.Errorf("Stats(running) = %v", err)
	}
	t.Logf("stats of a sleeping container: %+v", st)
	start := time.Now()
	if err := d.Stop(ctx, sleeper, 0); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("Stop(grace 0) took %v", el)
	}
	if es, err := d.Wait(ctx, sleeper); err != nil || es.Code != 137 {
		t.Errorf("Wait(killed sleep) = %+v, %v; want 137", es, err)
	}
	if err := d.Stop(ctx, sleeper, 0); err != nil {
		t.Errorf("Stop(exited) = %v", err)
	}

	// With a grace period, SIGTERM reaches sleep through the init process.
	polite, err := d.Start(ctx, dockerSpec(job, 3, "sleep", "60"))
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if err := d.Stop(ctx, polite, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("Stop(grace) of a command that obeys SIGTERM took %v", el)
	}
	if es, err := d.Wait(ctx, polite); err != nil || es.Code != 143 {
		t.Errorf("Wait(terminated sleep) = %+v, %v; want 143", es, err)
	}

	if err := d.Remove(ctx, failing); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"Wait":  func() error { _, err := d.Wait(ctx, failing); return err }(),
		"Logs":  func() error { _, err := d.Logs(ctx, failing); return err }(),
		"Stop":  d.Stop(ctx, failing, 0),
		"Stats": func() error { _, err := d.Stats(ctx, failing); return err }(),
	} {
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("%s(removed) = %v, want ErrNotFound", name, err)
		}
	}
}

func TestDockerListAfterRestart(t *testing.T) {
	d, cli := dockerForTest(t)
	job := testJob(t, cli)
	ctx := waitCtx(t)

	done, err := d.Start(ctx, dockerSpec(job, 1, "sh", "-c", "exit 5"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Wait(ctx, done); err != nil {
		t.Fatal(err)
	}
	s := dockerSpec(job, 2, "sleep", "60")
	s.Instance = "inst-2"
	s.GPUUUIDs = []string{"GPU-recorded-1"} // recorded: this engine may have no GPU
	d.RecordGPUs(true)
	running, err := d.Start(ctx, s)
	if err != nil {
		t.Fatal(err)
	}

	// A fresh driver with its own client: the node after a restart.
	d2, err := NewDockerFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	runs, err := d2.List(ctx, map[string]string{LabelJob: job})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 {
		t.Fatalf("List(job) = %+v, want 2 runs", runs)
	}
	byID := map[RunID]RunInfo{runs[0].ID: runs[0], runs[1].ID: runs[1]}
	if r := byID[done]; r.Running || r.ExitCode != 5 || r.Labels[LabelItem] != "1" || r.FinishedAt.IsZero() {
		t.Errorf("exited run = %+v, want exit 5 of item 1", r)
	}
	if r := byID[running]; !r.Running || r.Labels[LabelInstance] != "inst-2" || r.StartedAt.IsZero() ||
		strings.Join(GPUsOf(r.Labels), ",") != "GPU-recorded-1" || r.Labels[LabelGPUMode] != "record" {
		t.Errorf("running run = %+v", r)
	}
	only, err := d2.List(ctx, map[string]string{LabelJob: job, LabelInstance: "inst-2"})
	if err != nil || len(only) != 1 || only[0].ID != running {
		t.Errorf("List(job, inst-2) = %+v, %v", only, err)
	}
	if err := d2.Stop(ctx, running, 0); err != nil {
		t.Fatal(err)
	}
	if es, err := d2.Wait(ctx, running); err != nil || es.Code != 137 {
		t.Errorf("Wait after Stop by the fresh driver = %+v, %v", es, err)
	}
}

func TestDockerImageNotFound(t *testing.T) {
	d, cli := dockerForTest(t)
	job := testJob(t, cli)
	ctx := waitCtx(t)

	s := dockerSpec(job, 1, "true")
	s.Image = "cshare-no-such-image:1"
	_, err := d.Start(ctx, s)
	if !errors.Is(err, ErrImageNotFound) {
		t.Fatalf("Start(unknown image) = %v, want ErrImageNotFound", err)
	}
	if !strings.Contains(err.Error(), `"cshare-no-such-image:1"`) {
		t.Errorf("error %q does not name the image", err)
	}
	t.Logf("unknown image: %v", err)
}

func TestDockerStartRejectsBadSpecs(t *testing.T) {
	d := NewDocker(&stubDocker{})
	ctx := context.Background()
	s := dockerSpec("job", 1, "true")
	s.Image = ""
	if _, err := d.Start(ctx, s); !errors.Is(err, ErrInvalidSpec) || !strings.Contains(err.Error(), "image:") {
		t.Errorf("Start without image = %v", err)
	}
	s = dockerSpec("job", 1, "true")
	s.Network = "host"
	if _, err := d.Start(ctx, s); !errors.Is(err, ErrInvalidSpec) {
		t.Errorf("Start on the host network = %v, want ErrInvalidSpec", err)
	}
}

func TestHostConfigGPUsFromNVML(t *testing.T) {
	server := dgxa100.New()
	var uuids []string
	for _, i := range []int{2, 5} {
		dev, ret := server.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			t.Fatalf("DeviceGetHandleByIndex(%d): %v", i, ret)
		}
		uuid, ret := dev.GetUUID()
		if ret != nvml.SUCCESS {
			t.Fatalf("GetUUID: %v", ret)
		}
		uuids = append(uuids, uuid)
	}
	s := dockerSpec("job", 1, "nvidia-smi")
	s.GPUUUIDs = uuids
	s.NanoCPUs, s.MemoryBytes, s.MemoryReservationBytes, s.ShmBytes, s.PidsLimit = 4e9, 8<<30, 4<<30, 1<<30, 1000
	s.Mounts = []Mount{{Source: "/srv/ds", Target: "/data", ReadOnly: true}, {Source: "/srv/out", Target: "/out"}}
	hc, err := HostConfig(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(hc.DeviceRequests) != 1 {
		t.Fatalf("DeviceRequests = %+v, want one", hc.DeviceRequests)
	}
	dr := hc.DeviceRequests[0]
	if dr.Driver != "nvidia" || !slices.Equal(dr.DeviceIDs, uuids) || dr.Count != 0 ||
		len(dr.Capabilities) != 1 || !slices.Equal(dr.Capabilities[0], []string{"gpu"}) {
		t.Errorf("DeviceRequest = %+v, want nvidia %v with [[gpu]]", dr, uuids)
	}
	if hc.Privileged || hc.NetworkMode != "bridge" || hc.AutoRemove || hc.Init == nil || !*hc.Init {
		t.Errorf("privileged=%v network=%q autoremove=%v init=%v", hc.Privileged, hc.NetworkMode, hc.AutoRemove, hc.Init)
	}
	if hc.NanoCPUs != 4e9 || hc.Memory != 8<<30 || hc.MemoryReservation != 4<<30 || hc.ShmSize != 1<<30 || *hc.PidsLimit != 1000 {
		t.Errorf("limits = %+v", hc.Resources)
	}
	wantMounts := []mount.Mount{
		{Type: mount.TypeBind, Source: "/srv/ds", Target: "/data", ReadOnly: true},
		{Type: mount.TypeBind, Source: "/srv/out", Target: "/out"},
	}
	if !slices.EqualFunc(hc.Mounts, wantMounts, func(a, b mount.Mount) bool {
		return a.Type == b.Type && a.Source == b.Source && a.Target == b.Target && a.ReadOnly == b.ReadOnly
	}) {
		t.Errorf("Mounts = %+v, want %+v", hc.Mounts, wantMounts)
	}

	// No GPUs: no device request at all; "none" network; host never.
	s.GPUUUIDs, s.Network = nil, "none"
	hc, err = HostConfig(s)
	if err != nil || len(hc.DeviceRequests) != 0 || hc.NetworkMode != "none" {
		t.Errorf("no GPUs, network none: %+v, %v", hc, err)
	}
	s.Network = "host"
	if _, err := HostConfig(s); !errors.Is(err, ErrInvalidSpec) {
		t.Errorf("HostConfig(host network) = %v, want ErrInvalidSpec", err)
	}
}

// stubDocker is a DockerAPI whose image calls fail the way an engine with no
// registry does; other methods panic via the nil embedded interface.
type stubDocker struct {
	DockerAPI
	mu       sync.Mutex
	pullOpts []image.PullOptions
	pullErr  error  // returned by ImagePull
	pullMsg  string // error message inside the pull stream
}

func (s *stubDocker) ImageInspect(ctx context.Context, ref string, _ ...client.ImageInspectOption) (image.InspectResponse, error) {
	return image.InspectResponse{}, fmt.Errorf("no such image: %s: %w", ref, cerrdefs.ErrNotFound)
}

func (s *stubDocker) ImagePull(ctx context.Context, ref string, opts image.PullOptions) (io.ReadCloser, error) {
	s.mu.Lock()
	s.pullOpts = append(s.pullOpts, opts)
	s.mu.Unlock()
	if s.pullErr != nil {
		return nil, s.pullErr
	}
	stream := `{"status":"Pulling from library/x"}` + "\n" +
		`{"errorDetail":{"message":"` + s.pullMsg + `"},"error":"` + s.pullMsg + `"}` + "\n"
	return io.NopCloser(strings.NewReader(stream)), nil
}

func TestDockerPullAuthAndErrors(t *testing.T) {
	ctx := context.Background()
	stub := &stubDocker{pullMsg: "pull access denied for private/x"}
	d := NewDocker(stub)
	s := dockerSpec("job", 1, "true")
	s.Image = "registry.example.com/private/x:2"
	s.Auth = &RegistryAuth{Server: "registry.example.com", Username: "alice", Password: "s3cret"}
	_, err := d.Start(ctx, s)
	if !errors.Is(err, ErrImageNotFound) {
		t.Fatalf("Start = %v, want ErrImageNotFound", err)
	}
	want := `runtime: image "registry.example.com/private/x:2" not found locally and pull failed: pull access denied for private/x`
	if err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
	s.Auth = &RegistryAuth{Server: "registry.example.com", Token: "tok-123"}
	stub.pullErr, stub.pullMsg = errors.New("dial tcp: no such host"), ""
	if _, err := d.Start(ctx, s); !errors.Is(err, ErrImageNotFound) || !strings.Contains(err.Error(), "no such host") {
		t.Errorf("Start with failing pull = %v", err)
	}
	s.Auth = nil
	_, _ = d.Start(ctx, s)

	if len(stub.pullOpts) != 3 {
		t.Fatalf("ImagePull called %d times, want 3", len(stub.pullOpts))
	}
	decode := func(enc string) map[string]string {
		t.Helper()
		b, err := base64.URLEncoding.DecodeString(enc)
		if err != nil {
			t.Fatalf("RegistryAuth %q is not base64url: %v", enc, err)
		}
		var m map[string]string
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("RegistryAuth is not JSON: %v", err)
		}
		return m
	}
	if m := decode(stub.pullOpts[0].RegistryAuth); m["username"] != "alice" || m["password"] != "s3cret" || m["serveraddress"] != "registry.example.com" {
		t.Errorf("password auth = %v", m)
	}
	if m := decode(stub.pullOpts[1].RegistryAuth); m["identitytoken"] != "tok-123" || m["username"] != "" {
		t.Errorf("token auth = %v", m)
	}
	if stub.pullOpts[2].RegistryAuth != "" {
		t.Errorf("anonymous pull sent auth %q", stub.pullOpts[2].RegistryAuth)
	}
}
