package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/registry"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// DockerAPI is the part of the Docker SDK client the docker driver calls.
// *client.Client implements it; tests may substitute a stub.
type DockerAPI interface {
	Ping(ctx context.Context) (types.Ping, error)
	ImageInspect(ctx context.Context, image string, opts ...client.ImageInspectOption) (image.InspectResponse, error)
	ImagePull(ctx context.Context, ref string, options image.PullOptions) (io.ReadCloser, error)
	ContainerCreate(ctx context.Context, config *container.Config, hostConfig *container.HostConfig, networkingConfig *network.NetworkingConfig, platform *ocispec.Platform, containerName string) (container.CreateResponse, error)
	ContainerStart(ctx context.Context, container string, options container.StartOptions) error
	ContainerWait(ctx context.Context, container string, condition container.WaitCondition) (<-chan container.WaitResponse, <-chan error)
	ContainerStop(ctx context.Context, container string, options container.StopOptions) error
	ContainerKill(ctx context.Context, container, signal string) error
	ContainerLogs(ctx context.Context, container string, options container.LogsOptions) (io.ReadCloser, error)
	ContainerList(ctx context.Context, options container.ListOptions) ([]container.Summary, error)
	ContainerInspect(ctx context.Context, container string) (container.InspectResponse, error)
	ContainerInspectWithRaw(ctx context.Context, container string, getSize bool) (container.InspectResponse, []byte, error)
	ContainerStats(ctx context.Context, container string, stream bool) (container.StatsResponseReader, error)
	ContainerRemove(ctx context.Context, container string, options container.RemoveOptions) error
}

var _ DockerAPI = (*client.Client)(nil)

// Docker runs each run as a Docker container. It is safe for concurrent use.
//
// Containers are created with the labels of [Spec.Labels], the limits of
// [HostConfig], the contract environment, and an init process (docker-init)
// as PID 1 so that SIGTERM reaches the command and zombies are reaped. They
// are not auto-removed: their exit code and logs outlive a node crash, and
// [Docker.Remove] deletes them. Their json-file log is capped at LogCap.
type Docker struct {
	cli        DockerAPI
	recordGPUs bool // see RecordGPUs
}

var _ Driver = (*Docker)(nil)

// NewDocker returns a docker driver over cli.
func NewDocker(cli DockerAPI) *Docker { return &Docker{cli: cli} }

// NewDockerFromEnv connects to the engine named by the DOCKER_HOST family of
// environment variables (default: the local socket), negotiating the API
// version so that older engines work. It does no IO; call [Docker.Ping] to
// check that an engine answers.
func NewDockerFromEnv() (*Docker, error) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("runtime: docker client: %w", err)
	}
	return NewDocker(cli), nil
}

// Name returns "docker".
func (d *Docker) Name() string { return "docker" }

// Ping checks that the engine answers, and settles the API version now:
// the SDK client negotiates it lazily, writing it under a lock that its
// readers do not take, so two first calls at once would race.
func (d *Docker) Ping(ctx context.Context) error {
	if _, err := d.cli.Ping(ctx); err != nil {
		return fmt.Errorf("runtime: docker engine unreachable: %w", err)
	}
	if n, ok := d.cli.(interface{ NegotiateAPIVersion(context.Context) }); ok {
		n.NegotiateAPIVersion(ctx)
	}
	return nil
}

// Close releases the client's connections if it has any to release.
func (d *Docker) Close() error {
	if c, ok := d.cli.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// HostConfig maps a spec's limits, GPUs, mounts and network to a Docker
// HostConfig. It is pure. The result is never privileged, never on the host
// network and never auto-removed.
func HostConfig(s Spec) (*container.HostConfig, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	hc := &container.HostConfig{
		NetworkMode:   container.NetworkMode("bridge"),
		Privileged:    false,
		AutoRemove:    false,
		RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyDisabled},
		Init:          boolPtr(true),
		ShmSize:       s.ShmBytes,
		LogConfig: container.LogConfig{
			Type:   "json-file",
			Config: map[string]string{"max-size": strconv.Itoa(LogCap), "max-file": "1"},
		},
		Resources: container.Resources{
			NanoCPUs:          s.NanoCPUs,
			Memory:            s.MemoryBytes,
			MemoryReservation: s.MemoryReservationBytes,
		},
	}
	if s.Network == "none" {
		hc.NetworkMode = container.NetworkMode("none")
	}
	if s.PidsLimit > 0 {
		hc.PidsLimit = int64Ptr(s.PidsLimit)
	}
	if len(s.GPUUUIDs) > 0 {
		hc.DeviceRequests = []container.DeviceRequest{{
			Driver:       "nvidia",
			DeviceIDs:    append([]string(nil), s.GPUUUIDs...),
			Capabilities: [][]string{{"gpu"}},
		}}
	}
	for _, m := range s.Mounts {
		hc.Mounts = append(hc.Mounts, mount.Mount{
			Type:     mount.TypeBind,
			Source:   m.Source,
			Target:   m.Target,
			ReadOnly: m.ReadOnly,
		})
	}
	return hc, nil
}

func boolPtr(b bool) *bool      { return &b }
func int64Ptr(v int64) *int64   { return &v }
func intPtr(v int) *int         { return &v }
func isNotFound(err error) bool { return cerrdefs.IsNotFound(err) }
func isConflict(err error) bool { return cerrdefs.IsConflict(err) }
func idShort(id RunID) string   { return truncate(string(id), 12) }

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// Start ensures the image is present (pulling it with s.Auth if not),
// creates the container and starts it.
func (d *Docker) Start(ctx context.Context, s Spec) (RunID, error) {
	if strings.TrimSpace(s.Image) == "" {
		return "", specErr("image", "is required by the docker driver")
	}
	hc, err := HostConfig(s)
	if err != nil {
		return "", err
	}
	if err := d.ensureImage(ctx, s.Image, s.Auth); err != nil {
		return "", err
	}
	cfg := &container.Config{
		Image:  s.Image,
		Env:    s.Environ(nil),
		Labels: s.Labels(),
	}
	if d.recordGPUs && len(hc.DeviceRequests) > 0 {
		hc.DeviceRequests = nil
		cfg.Labels[LabelGPUMode] = "record" // LabelGPUs names them (Spec.Labels)
	}
	if len(s.Cmd) > 0 {
		cfg.Cmd = append([]string(nil), s.Cmd...)
	}
	if s.Entrypoint != "" {
		cfg.Entrypoint = []string{s.Entrypoint}
	}
	created, err := d.cli.ContainerCreate(ctx, cfg, hc, nil, nil, "")
	if err != nil {
		if isNotFound(err) {
			return "", &ImageError{Image: s.Image, Err: err}
		}
		return "", fmt.Errorf("runtime: create container for job %s item %d: %w", s.Job, s.Item, err)
	}
	id := RunID(created.ID)
	if err := d.cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		// Do not leave a never-started container behind; use a fresh context
		// so that a cancelled ctx still cleans up.
		rmCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = d.cli.ContainerRemove(rmCtx, created.ID, container.RemoveOptions{Force: true})
		return "", fmt.Errorf("runtime: start container %s for job %s item %d: %w", idShort(id), s.Job, s.Item, err)
	}
	return id, nil
}

func (d *Docker) ensureImage(ctx context.Context, ref string, auth *RegistryAuth) error {
	if _, err := d.cli.ImageInspect(ctx, ref); err == nil {
		return nil
	} else if !isNotFound(err) {
		return fmt.Errorf("runtime: inspect image %q: %w", ref, err)
	}
	opts := image.PullOptions{}
	if auth != nil && (auth.Username != "" || auth.Password != "" || auth.Token != "") {
		enc, err := registry.EncodeAuthConfig(registry.AuthConfig{
			Username:      auth.Username,
			Password:      auth.Password,
			ServerAddress: auth.Server,
			IdentityToken: auth.Token,
		})
		if err != nil {
			return fmt.Errorf("runtime: encode registry auth: %w", err)
		}
		opts.RegistryAuth = enc
	}
	if err := d.pull(ctx, ref, opts); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("runtime: pull image %q: %w", ref, ctx.Err())
		}
		return &ImageError{Image: ref, Err: err}
	}
	if _, err := d.cli.ImageInspect(ctx, ref); err != nil {
		return &ImageError{Image: ref, Err: fmt.Errorf("pulled but not inspectable: %w", err)}
	}
	return nil
}

// pull runs ImagePull to completion. Errors arrive either from the call or as
// an error message inside the progress stream.
func (d *Docker) pull(ctx context.Context, ref string, opts image.PullOptions) error {
	rc, err := d.cli.ImagePull(ctx, ref, opts)
	if err != nil {
		return err
	}
	defer rc.Close()
	dec := json.NewDecoder(rc)
	for {
		var msg struct {
			Error       string `json:"error"`
			ErrorDetail *struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&msg); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("reading pull progress: %w", err)
		}
		if msg.ErrorDetail != nil && msg.ErrorDetail.Message != "" {
			return errors.New(msg.ErrorDetail.Message)
		}
		if msg.Error != "" {
			return errors.New(msg.Error)
		}
	}
}

func (d *Docker) inspect(ctx context.Context, id RunID) (container.InspectResponse, error) {
	if id == "" {
		return container.InspectResponse{}, notFound(id)
	}
	info, err := d.cli.ContainerInspect(ctx, string(id))
	if err != nil {
		if isNotFound(err) {
			return info, notFound(id)
		}
		return info, fmt.Errorf("runtime: inspect container %s: %w", idShort(id), err)
	}
	if info.ContainerJSONBase == nil || info.State == nil {
		return info, fmt.Errorf("runtime: inspect container %s: engine returned no state", idShort(id))
	}
	if info.Config == nil || info.Config.Labels[LabelJob] == "" {
		// Not one of ours: behave as if it did not exist.
		return info, notFound(id)
	}
	return info, nil
}

// Wait blocks until the container is no longer running.
func (d *Docker) Wait(ctx context.Context, id RunID) (ExitStatus, error) {
	if _, err := d.inspect(ctx, id); err != nil {
		return ExitStatus{}, err
	}
	respC, errC := d.cli.ContainerWait(ctx, string(id), container.WaitConditionNotRunning)
	select {
	case <-respC:
	case err := <-errC:
		if err != nil {
			if ctx.Err() != nil {
				return ExitStatus{}, ctx.Err()
			}
			if isNotFound(err) {
				return ExitStatus{}, notFound(id)
			}
			return ExitStatus{}, fmt.Errorf("runtime: wait for container %s: %w", idShort(id), err)
		}
	case <-ctx.Done():
		return ExitStatus{}, ctx.Err()
	}
	info, err := d.inspect(ctx, id)
	if err != nil {
		return ExitStatus{}, err
	}
	return exitStatusOf(info.State), nil
}

func exitStatusOf(st *container.State) ExitStatus {
	es := ExitStatus{Code: st.ExitCode, OOMKilled: st.OOMKilled, Err: st.Error}
	if st.Status == container.StateCreated {
		es.Code = -1
		if es.Err == "" {
			es.Err = "container was created but never started"
		}
	}
	return es
}

// Stop kills the container at once (grace 0) or sends SIGTERM and kills it
// after grace, rounded up to whole seconds. Stopping an exited container is
// not an error.
func (d *Docker) Stop(ctx context.Context, id RunID, grace time.Duration) error {
	info, err := d.inspect(ctx, id)
	if err != nil {
		return err
	}
	if !info.State.Running {
		return nil
	}
	if grace <= 0 {
		err = d.cli.ContainerKill(ctx, string(id), "KILL")
		if err != nil && isConflict(err) {
			err = nil // exited meanwhile
		}
		if err == nil {
			// Kill returns before the container is gone; Stop promises it is.
			respC, errC := d.cli.ContainerWait(ctx, string(id), container.WaitConditionNotRunning)
			select {
			case <-respC:
			case err = <-errC:
			case <-ctx.Done():
				err = ctx.Err()
			}
		}
	} else {
		secs := int((grace + time.Second - 1) / time.Second)
		err = d.cli.ContainerStop(ctx, string(id), container.StopOptions{Timeout: intPtr(secs)})
	}
	if err != nil {
		if isNotFound(err) {
			return notFound(id)
		}
		return fmt.Errorf("runtime: stop container %s: %w", idShort(id), err)
	}
	return nil
}

// Logs returns the container's combined stdout and stderr, the last LogCap
// bytes if there is more.
func (d *Docker) Logs(ctx context.Context, id RunID) ([]byte, error) {
	info, err := d.inspect(ctx, id)
	if err != nil {
		return nil, err
	}
	rc, err := d.cli.ContainerLogs(ctx, string(id), container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		if isNotFound(err) {
			return nil, notFound(id)
		}
		return nil, fmt.Errorf("runtime: logs of container %s: %w", idShort(id), err)
	}
	defer rc.Close()
	w := &tailBuffer{max: LogCap}
	if info.Config.Tty {
		_, err = io.Copy(w, rc)
	} else {
		_, err = stdcopy.StdCopy(w, w, rc)
	}
	if err != nil {
		return nil, fmt.Errorf("runtime: read logs of container %s: %w", idShort(id), err)
	}
	return w.Bytes(), nil
}

// List returns the cshare containers (running or exited) carrying all labels.
func (d *Docker) List(ctx context.Context, labels map[string]string) ([]RunInfo, error) {
	args := filters.NewArgs(filters.Arg("label", LabelJob))
	for k, v := range labels {
		args.Add("label", k+"="+v)
	}
	summaries, err := d.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: args})
	if err != nil {
		return nil, fmt.Errorf("runtime: list containers: %w", err)
	}
	out := make([]RunInfo, 0, len(summaries))
	for _, c := range summaries {
		if !matchLabels(c.Labels, labels) {
			continue
		}
		info, err := d.inspect(ctx, RunID(c.ID))
		if errors.Is(err, ErrNotFound) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, err
		}
		es := exitStatusOf(info.State)
		ri := RunInfo{
			ID:         RunID(c.ID),
			Labels:     copyLabels(c.Labels),
			Running:    info.State.Running,
			StartedAt:  parseDockerTime(info.State.StartedAt),
			FinishedAt: parseDockerTime(info.State.FinishedAt),
		}
		if !ri.Running {
			ri.ExitCode = es.Code
		}
		out = append(out, ri)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].StartedAt.Equal(out[j].StartedAt) {
			return out[i].StartedAt.Before(out[j].StartedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// parseDockerTime parses an engine timestamp; the engine's zero time
// ("0001-01-01T00:00:00Z") and garbage give the zero time.
func parseDockerTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || t.Year() <= 1 {
		return time.Time{}
	}
	return t
}

// Stats samples the container's CPU and memory use. The engine takes about a
// second to produce a CPU sample. An exited container reports zeros.
func (d *Docker) Stats(ctx context.Context, id RunID) (Stats, error) {
	info, err := d.inspect(ctx, id)
	if err != nil {
		return Stats{}, err
	}
	if !info.State.Running {
		return Stats{}, nil
	}
	resp, err := d.cli.ContainerStats(ctx, string(id), false)
	if err != nil {
		if isNotFound(err) {
			return Stats{}, notFound(id)
		}
		return Stats{}, fmt.Errorf("runtime: stats of container %s: %w", idShort(id), err)
	}
	defer resp.Body.Close()
	var st container.StatsResponse
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return Stats{}, fmt.Errorf("runtime: decode stats of container %s: %w", idShort(id), err)
	}
	return statsOf(&st), nil
}

// statsOf computes CPU percent and memory use the way `docker stats` does.
func statsOf(st *container.StatsResponse) Stats {
	var out Stats
	cpuDelta := float64(st.CPUStats.CPUUsage.TotalUsage) - float64(st.PreCPUStats.CPUUsage.TotalUsage)
	sysDelta := float64(st.CPUStats.SystemUsage) - float64(st.PreCPUStats.SystemUsage)
	cpus := float64(st.CPUStats.OnlineCPUs)
	if cpus == 0 {
		cpus = float64(len(st.CPUStats.CPUUsage.PercpuUsage))
	}
	if cpuDelta > 0 && sysDelta > 0 {
		out.CPUPercent = cpuDelta / sysDelta * cpus * 100
	}
	mem := st.MemoryStats.Usage
	// Page cache the kernel can drop is not the run's memory.
	for _, k := range []string{"total_inactive_file", "inactive_file"} {
		if v, ok := st.MemoryStats.Stats[k]; ok && v < mem {
			mem -= v
			break
		}
	}
	out.MemoryBytes = int64(mem)
	return out
}

// Remove deletes an exited container and its anonymous volumes.
func (d *Docker) Remove(ctx context.Context, id RunID) error {
	info, err := d.inspect(ctx, id)
	if err != nil {
		return err
	}
	if info.State.Running {
		return stillRunning(id)
	}
	if err := d.cli.ContainerRemove(ctx, string(id), container.RemoveOptions{RemoveVolumes: true}); err != nil {
		if isNotFound(err) {
			return notFound(id)
		}
		if isConflict(err) {
			return stillRunning(id)
		}
		return fmt.Errorf("runtime: remove container %s: %w", idShort(id), err)
	}
	return nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	buf bytes.Buffer
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) > t.max {
		p = p[len(p)-t.max:]
	}
	if t.buf.Len()+len(p) > 2*t.max {
		keep := t.buf.Bytes()[t.buf.Len()-t.max:]
		var nb bytes.Buffer
		nb.Grow(2 * t.max)
		nb.Write(keep)
		t.buf = nb
	}
	t.buf.Write(p)
	return n, nil
}

// Bytes returns the last max bytes written.
func (t *tailBuffer) Bytes() []byte {
	b := t.buf.Bytes()
	if len(b) > t.max {
		b = b[len(b)-t.max:]
	}
	return append([]byte(nil), b...)
}
