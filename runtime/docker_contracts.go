package runtime

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/go-connections/nat"
)

var _ ContractDriver = (*Docker)(nil)

// LabelJupyterPort is a jupyter-mode instance's Jupyter port in the
// container.
const LabelJupyterPort = "cshare.jupyter_port"

func jupyterPort(p int) nat.Port { return nat.Port(strconv.Itoa(p) + "/tcp") }

// RecordGPUs makes the driver record GPU device requests instead of
// sending them: containers get no devices, and carry LabelGPUMode=record
// beside the devices they would have had (LabelGPUs). For tests and demos
// on machines without GPUs (node.yaml `runtime: {record_gpus: N}`).
func (d *Docker) RecordGPUs(on bool) { d.recordGPUs = on }

// ContractHostConfig maps a contract instance's baselines and ceilings to
// a Docker HostConfig: CPU shares (baseline) under a nano-CPU cap
// (ceiling), a memory reservation (baseline) under a memory limit
// (ceiling), the shm size, the GPUs as an NVIDIA device request, and the
// disk as a storage size. It is pure.
func ContractHostConfig(s ContractSpec) (*container.HostConfig, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	hc, err := HostConfig(Spec{Org: s.Org, Job: "contract", Instance: s.Contract, Machine: s.Machine, GPUUUIDs: s.GPUs,
		MemoryBytes: s.MemoryBytes, MemoryReservationBytes: s.MemoryReservationBytes, ShmBytes: s.ShmBytes, NanoCPUs: s.NanoCPUs})
	if err != nil {
		return nil, err
	}
	hc.CPUShares = s.CPUShares
	if j := s.Jupyter; j != nil && j.Direct {
		hc.PortBindings = nat.PortMap{jupyterPort(j.Port): {{}}} // a free host port on every address
	}
	if s.DiskBytes > 0 {
		hc.StorageOpt = map[string]string{"size": strconv.FormatInt(s.DiskBytes, 10)}
	}
	return hc, nil
}

// CreateContract creates the contract's container, stopped. An engine
// whose storage driver cannot size a container's disk (overlay2 outside
// xfs with pquota, fuse-overlayfs) gets it without the size: the disk is
// then only accounted, not enforced.
func (d *Docker) CreateContract(ctx context.Context, s ContractSpec) (RunID, error) {
	hc, err := ContractHostConfig(s)
	if err != nil {
		return "", err
	}
	labels := s.Labels()
	if d.recordGPUs && len(hc.DeviceRequests) > 0 {
		hc.DeviceRequests = nil
		labels[LabelGPUMode] = "record"
	}
	if err := d.ensureImage(ctx, s.Image, s.Auth); err != nil {
		return "", err
	}
	ep, cmd := s.Launch()
	cfg := &container.Config{Image: s.Image, Env: s.Environ(), Labels: labels, Entrypoint: ep, Cmd: cmd}
	if j := s.Jupyter; j != nil {
		cfg.ExposedPorts = nat.PortSet{jupyterPort(j.Port): {}}
		labels[LabelJupyterPort] = strconv.Itoa(j.Port)
	}
	name := "cshare-contract-" + s.Contract + "-" + s.Machine[max(0, len(s.Machine)-8):]
	created, err := d.cli.ContainerCreate(ctx, cfg, hc, nil, nil, name)
	if err != nil && hc.StorageOpt != nil && strings.Contains(err.Error(), "storage-opt") {
		hc.StorageOpt = nil
		created, err = d.cli.ContainerCreate(ctx, cfg, hc, nil, nil, name)
	}
	if err != nil {
		if isNotFound(err) {
			return "", &ImageError{Image: s.Image, Err: err}
		}
		return "", fmt.Errorf("runtime: create the instance of contract %s: %w", s.Contract, err)
	}
	return RunID(created.ID), nil
}

// StartContract starts the contract's container.
func (d *Docker) StartContract(ctx context.Context, id RunID) error {
	if err := d.cli.ContainerStart(ctx, string(id), container.StartOptions{}); err != nil {
		if isNotFound(err) {
			return notFound(id)
		}
		return contractErr("start", id, err)
	}
	return nil
}

// StopContract stops the contract's container, keeping it.
func (d *Docker) StopContract(ctx context.Context, id RunID, grace time.Duration) error {
	secs := int(grace / time.Second)
	if err := d.cli.ContainerStop(ctx, string(id), container.StopOptions{Timeout: &secs}); err != nil {
		if isNotFound(err) {
			return notFound(id)
		}
		return contractErr("stop", id, err)
	}
	return nil
}

// ListContracts lists the contract containers of org hosted by machine
// (of every org with org "").
func (d *Docker) ListContracts(ctx context.Context, org, machine string) ([]ContractRun, error) {
	args := filters.NewArgs(filters.Arg("label", LabelContract), filters.Arg("label", LabelMachine+"="+machine))
	if org != "" {
		args.Add("label", LabelOrg+"="+org)
	}
	summaries, err := d.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: args})
	if err != nil {
		return nil, fmt.Errorf("runtime: list contract containers: %w", err)
	}
	out := make([]ContractRun, 0, len(summaries))
	for _, c := range summaries {
		if (org != "" && c.Labels[LabelOrg] != org) || c.Labels[LabelMachine] != machine || c.Labels[LabelContract] == "" {
			continue
		}
		r := contractRunOf(RunID(c.ID), c.Labels, c.State == container.StateRunning || c.State == container.StateRestarting)
		for _, p := range c.Ports {
			if strconv.Itoa(int(p.PrivatePort)) == c.Labels[LabelJupyterPort] && p.Type == "tcp" && p.PublicPort != 0 && r.Published == 0 {
				r.Published = int(p.PublicPort)
			}
		}
		out = append(out, r)
	}
	sortContractRuns(out)
	return out, nil
}

// RemoveContract deletes the contract's container and its volumes.
func (d *Docker) RemoveContract(ctx context.Context, id RunID) error {
	if err := d.cli.ContainerRemove(ctx, string(id), container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
		if isNotFound(err) {
			return nil
		}
		return contractErr("remove", id, err)
	}
	return nil
}
