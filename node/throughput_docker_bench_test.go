package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
// and removed outside the timing. engine-start-par-p50-ms is the same
// with as many starters at once as the node has slots (each one after
// another), as the node's slots start theirs. The goal:
// gap-p50-ms no more than engine-start-p50-ms. CSHARE_BENCH_ITEMS
// changes the item count.
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
	const slots = 2
	n := agendaNode(b, drv, slots)
	var r agendaRun
	var engine, engine2 []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		runAgenda(b, n, drv, api.JobSubmit{Driver: "docker", Image: runtime.TestImage, Cmd: []string{"true"}, MaxCPUs: ptr[int64](slots)}, items, &r)
		drv.mu.Lock()
		spec := drv.spec
		drv.mu.Unlock()
		engine = append(engine, engineStarts(b, cli, spec, items, 1)...)
		engine2 = append(engine2, engineStarts(b, cli, spec, items, slots)...)
	}
	b.StopTimer()
	r.report(b)
	b.ReportMetric(p50ms(engine), "engine-start-p50-ms")
	b.ReportMetric(p50ms(engine2), "engine-start-par-p50-ms")
}

// engineStarts starts spec's container k times through cli, as
// runtime.Docker.Start does, by workers at once (each one after another),
// and returns how long each start took; each container is waited for and
// removed untimed.
func engineStarts(b *testing.B, cli *client.Client, spec runtime.Spec, k, workers int) []time.Duration {
	hc, err := runtime.HostConfig(spec)
	if err != nil {
		b.Fatal(err)
	}
	labels := map[string]string{}
	for key, v := range spec.Labels() {
		labels["bench."+key] = v
	}
	cfg := &container.Config{Image: spec.Image, Env: spec.Environ(nil), Labels: labels, Cmd: spec.Cmd}
	var mu sync.Mutex
	var out []time.Duration
	var errs []error
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := w; j < k; j += workers {
				d, err := engineStart(cli, spec.Image, cfg, hc)
				mu.Lock()
				out, errs = append(out, d), append(errs, err)
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
	return out
}

// engineStart is one timed start of engineStarts, then its untimed wait
// and removal.
func engineStart(cli *client.Client, img string, cfg *container.Config, hc *container.HostConfig) (time.Duration, error) {
	ctx := context.Background()
	t0 := time.Now()
	if _, err := cli.ImageInspect(ctx, img); err != nil {
		return 0, err
	}
	c, err := cli.ContainerCreate(ctx, cfg, hc, nil, nil, "")
	if err != nil {
		return 0, err
	}
	defer func() { _ = cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true}) }()
	if err := cli.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		return 0, err
	}
	d := time.Since(t0)
	respC, errC := cli.ContainerWait(ctx, c.ID, container.WaitConditionNotRunning)
	select {
	case <-respC:
	case err := <-errC:
		return d, fmt.Errorf("wait for %s: %w", c.ID, err)
	}
	return d, nil
}
