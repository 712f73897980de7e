package node

import (
	"context"
	"testing"
	"time"

	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/runtime"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
)

// BenchmarkAgendaThroughputDocker runs, per op, one job of 100 items of
// `true` in runtime.TestImage on one node with 2 Docker slots, and reports
// what BenchmarkAgendaThroughput does for the node (items/s,
// done-items/s, gap-p50-ms, node-gap-p50-ms, start-p50-ms, cpu-ms/item;
// the CPU of the containers is the engine's, not counted) and
// engine-start-p50-ms: the engine's own container start, measured in the
// same op through the Docker SDK directly, as many times as there are
// items, one after another: the calls the driver's Start makes for one
// item (ImageInspect, ContainerCreate, ContainerStart, which returns once
// the container runs), with the same container and host configuration the
// node's last item had (only the labels renamed, so the node never takes
// these containers for its own). Each such container is then waited for
// and removed outside the timing. The goal: gap-p50-ms no more
// than engine-start-p50-ms. CSHARE_BENCH_ITEMS changes the item count.
// It skips when no Docker engine answers or the test image is missing
// (make testimage builds it).
func BenchmarkAgendaThroughputDocker(b *testing.B) {
	items := benchItems(b, 100)
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		b.Skipf("no Docker client configuration: %v", err)
	}
	b.Cleanup(func() { _ = cli.Close() })
	ctx := context.Background()
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(pctx); err != nil {
		b.Skipf("no Docker engine reachable: %v", err)
	}
	if _, err := cli.ImageInspect(pctx, runtime.TestImage); err != nil {
		b.Skipf("no test image %s (make testimage): %v", runtime.TestImage, err)
	}
	dk, err := runtime.NewDockerFromEnv()
	if err != nil {
		b.Skip(err)
	}
	if err := dk.Ping(pctx); err != nil {
		b.Skip(err)
	}
	b.Cleanup(func() { _ = dk.Close() })
	drv := newGapDriver(dk)
	n := agendaNode(b, drv, 2)
	var r agendaRun
	var engine []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		runAgenda(b, n, drv, api.JobSubmit{Driver: "docker", Image: runtime.TestImage, Cmd: []string{"true"}, MaxCPUs: ptr[int64](2)}, items, &r)
		drv.mu.Lock()
		spec := drv.spec
		drv.mu.Unlock()
		engine = append(engine, engineStarts(b, cli, spec, items)...)
	}
	b.StopTimer()
	r.report(b)
	b.ReportMetric(p50ms(engine), "engine-start-p50-ms")
}

// engineStarts starts spec's container k times through cli, one after
// another, as runtime.Docker.Start does, and returns how long each start
// took; each container is waited for and removed untimed.
func engineStarts(b *testing.B, cli *client.Client, spec runtime.Spec, k int) []time.Duration {
	ctx := context.Background()
	hc, err := runtime.HostConfig(spec)
	if err != nil {
		b.Fatal(err)
	}
	labels := map[string]string{}
	for key, v := range spec.Labels() {
		labels["bench."+key] = v
	}
	cfg := &container.Config{Image: spec.Image, Env: spec.Environ(nil), Labels: labels, Cmd: spec.Cmd}
	var out []time.Duration
	for range k {
		t0 := time.Now()
		if _, err := cli.ImageInspect(ctx, spec.Image); err != nil {
			b.Fatal(err)
		}
		c, err := cli.ContainerCreate(ctx, cfg, hc, nil, nil, "")
		if err != nil {
			b.Fatal(err)
		}
		if err := cli.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
			_ = cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
			b.Fatal(err)
		}
		out = append(out, time.Since(t0))
		respC, errC := cli.ContainerWait(ctx, c.ID, container.WaitConditionNotRunning)
		select {
		case <-respC:
		case err := <-errC:
			b.Errorf("wait for %s: %v", c.ID, err)
		}
		if err := cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
			b.Fatal(err)
		}
	}
	return out
}
