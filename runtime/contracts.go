package runtime

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Labels of a rental contract's instance (issue 18), beside LabelOrg and
// LabelMachine (the host machine). LabelGPUs and LabelGPUMode also mark a
// job's run that holds GPUs (see Spec.Labels).
const (
	LabelContract = "cshare.contract"
	// LabelGPUs lists the GPU devices the instance holds ("0,1"; "" for
	// none), so the host finds which container holds which GPU after a
	// restart without asking the ledger.
	LabelGPUs = "cshare.gpus"
	// LabelGPUMode is "record" on an instance whose device requests were
	// recorded instead of sent (see Setup.RecordGPUs).
	LabelGPUMode = "cshare.gpu_mode"
	// LabelDiskMB is the disk the contract was created with, in MB.
	LabelDiskMB = "cshare.disk_mb"
)

// EnvContract is set in a contract instance's environment to its ID.
const EnvContract = "CSHARE_CONTRACT"

// The environment of a jupyter-mode instance (ContractSpec.Jupyter): the
// token Jupyter takes, the port it listens on and the path it serves
// under, as the host's proxy forwards it (/contract/ID/).
const (
	EnvJupyterToken   = "CSHARE_JUPYTER_TOKEN"
	EnvJupyterPort    = "CSHARE_JUPYTER_PORT"
	EnvJupyterBaseURL = "CSHARE_JUPYTER_BASE_URL"
)

// Jupyter is a jupyter-mode instance's Jupyter: its port in the container,
// its token, and whether the port is published on the host (a free port
// the engine picks; ContractRun.Published).
type Jupyter struct {
	Port   int
	Token  string
	Direct bool
}

// ContractSpec is a rental contract's instance: one container that lives
// as long as the contract (stopped and started in place, so its disk
// persists) and is removed with it.
type ContractSpec struct {
	Org, Machine, Contract string
	Image                  string
	// Cmd is the argv; empty means the image's own command (unless OnStart
	// is set: then the instance stays up after it).
	Cmd []string
	Env map[string]string
	// OnStart is a shell command run at each start, before Cmd.
	OnStart string
	// Mode is the launch mode: "" or "entrypoint" (the image's entrypoint,
	// or Entrypoint, with Cmd), or "ssh" (OnStart, then the instance stays
	// up by itself). Entrypoint replaces the image's.
	Mode       string
	Entrypoint string
	// Jupyter is set in mode "jupyter".
	Jupyter *Jupyter
	// GPUs are the device IDs (indices or UUIDs) held exclusively.
	GPUs []string
	// CPUShares weighs the instance's CPU under contention (its baseline:
	// 1024 per core); NanoCPUs caps it (the ceiling).
	CPUShares, NanoCPUs int64
	// MemoryReservationBytes is the baseline, MemoryBytes the ceiling.
	MemoryReservationBytes, MemoryBytes int64
	ShmBytes                            int64
	// DiskBytes is the writable layer's size, fixed at creation (enforced
	// where the engine's storage driver supports a size).
	DiskBytes int64
	Auth      *RegistryAuth
}

// ContractRun is a contract instance as the driver finds it.
type ContractRun struct {
	ID       RunID
	Org      string // the org whose contract it is (label cshare.org)
	Contract string
	GPUs     []string
	Running  bool
	// Published is the host port of a direct jupyter instance's Jupyter
	// port while it runs (0: none).
	Published int
}

// ContractDriver runs contract instances. The docker and fake drivers
// implement it.
type ContractDriver interface {
	// CreateContract creates the instance, stopped (pulling the image if
	// needed).
	CreateContract(ctx context.Context, s ContractSpec) (RunID, error)
	// StartContract starts a created or stopped instance.
	StartContract(ctx context.Context, id RunID) error
	// StopContract stops it (SIGTERM, then SIGKILL after grace); stopping a
	// stopped instance is not an error.
	StopContract(ctx context.Context, id RunID, grace time.Duration) error
	// ListContracts lists the instances of org's contracts hosted by
	// machine, running or not, by contract ID then run ID; with org "",
	// those of every org.
	ListContracts(ctx context.Context, org, machine string) ([]ContractRun, error)
	// RemoveContract deletes the instance and its disk, stopping it first.
	RemoveContract(ctx context.Context, id RunID) error
}

// Validate checks the fields every driver relies on; errors are one line,
// name the field and match ErrInvalidSpec.
func (s ContractSpec) Validate() error {
	for _, f := range []struct{ name, v string }{{"org", s.Org}, {"machine", s.Machine}, {"contract", s.Contract}, {"image", s.Image}} {
		if strings.TrimSpace(f.v) == "" {
			return specErr(f.name, "is required")
		}
		if strings.ContainsAny(f.v, "\x00\n\r, ") {
			return specErr(f.name, "%q contains a space, comma or control character", f.v)
		}
	}
	run := Spec{Org: s.Org, Job: "contract", Instance: s.Contract, Machine: s.Machine, Cmd: s.Cmd, Env: s.Env, GPUUUIDs: s.GPUs,
		MemoryBytes: s.MemoryBytes, MemoryReservationBytes: s.MemoryReservationBytes, ShmBytes: s.ShmBytes}
	if err := run.Validate(); err != nil {
		return err
	}
	if _, ok := s.Env[EnvContract]; ok {
		return specErr("env", "%s is set by the driver and may not be overridden", EnvContract)
	}
	switch {
	case s.CPUShares < 0 || s.NanoCPUs < 0 || s.DiskBytes < 0:
		return specErr("cpus", "shares, nano-CPUs and disk may not be negative")
	case strings.ContainsRune(s.OnStart, 0):
		return specErr("onstart", "contains a NUL byte")
	case strings.ContainsRune(s.Entrypoint, 0):
		return specErr("entrypoint", "contains a NUL byte")
	case s.Mode != "" && s.Mode != "entrypoint" && s.Mode != "ssh" && s.Mode != "jupyter":
		return specErr("mode", "%q; allowed: entrypoint, ssh, jupyter", s.Mode)
	case (s.Mode == "jupyter") != (s.Jupyter != nil):
		return specErr("jupyter", "is set exactly in mode jupyter")
	case s.Jupyter != nil && (s.Jupyter.Port < 1 || s.Jupyter.Port > 65535 || !tokenText(s.Jupyter.Token)):
		return specErr("jupyter", "port %d and a token of %d bytes; allowed: a port 1..65535 and a token of 1..128 letters, digits, - and _", s.Jupyter.Port, len(s.Jupyter.Token))
	}
	for _, k := range []string{EnvJupyterToken, EnvJupyterPort, EnvJupyterBaseURL} {
		if _, ok := s.Env[k]; ok && s.Jupyter != nil {
			return specErr("env", "%s is set by the driver and may not be overridden", k)
		}
	}
	return nil
}

// Labels are the labels of s's instance.
func (s ContractSpec) Labels() map[string]string {
	return map[string]string{LabelOrg: s.Org, LabelMachine: s.Machine, LabelContract: s.Contract,
		LabelGPUs: strings.Join(s.GPUs, ","), LabelDiskMB: strconv.FormatInt(s.DiskBytes>>20, 10)}
}

// Environ is the instance's environment as sorted KEY=VALUE pairs.
func (s ContractSpec) Environ() []string {
	out := make([]string, 0, len(s.Env)+1)
	for k, v := range s.Env {
		out = append(out, k+"="+v)
	}
	out = append(out, EnvContract+"="+s.Contract)
	if j := s.Jupyter; j != nil {
		out = append(out, EnvJupyterToken+"="+j.Token, EnvJupyterPort+"="+strconv.Itoa(j.Port),
			EnvJupyterBaseURL+"="+JupyterBasePath(s.Contract))
	}
	sort.Strings(out)
	return out
}

// JupyterBasePath is the path a contract's Jupyter serves under, the one
// the host's proxy forwards unchanged: /contract/ID/.
func JupyterBasePath(contract string) string { return "/contract/" + contract + "/" }

// JupyterCommand is what mode jupyter runs when the renter gives no
// command: the image's jupyter, on every address at the instance's port,
// under its base path, with its token (the options of Jupyter Server and
// of the classic notebook: each ignores the other's).
const JupyterCommand = `jupyter notebook --no-browser --allow-root --ip=0.0.0.0 --port="$CSHARE_JUPYTER_PORT"` +
	` --ServerApp.token="$CSHARE_JUPYTER_TOKEN" --ServerApp.base_url="$CSHARE_JUPYTER_BASE_URL"` +
	` --NotebookApp.token="$CSHARE_JUPYTER_TOKEN" --NotebookApp.base_url="$CSHARE_JUPYTER_BASE_URL"`

func tokenText(t string) bool {
	if t == "" || len(t) > 128 {
		return false
	}
	for _, r := range t {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// Launch is the container's entrypoint and command (nil: the image's):
//   - mode ssh: a shell runs OnStart, then stays up (sessions come through
//     the SSH gateway);
//   - mode jupyter: a shell runs OnStart, then Jupyter (Entrypoint and Cmd
//     if there are any, else JupyterCommand) in the background, and stays
//     up whether or not it does;
//   - without OnStart: Entrypoint, if set, and Cmd;
//   - with OnStart: a shell runs it, then Entrypoint and Cmd if there are
//     any, else it stays up (an instance the renter uses interactively).
func (s ContractSpec) Launch() (entrypoint, cmd []string) {
	const stayUp = "while :; do sleep 3600; done"
	if s.Mode == "ssh" {
		return []string{"/bin/sh", "-c", s.OnStart + "\n" + stayUp, "onstart"}, nil
	}
	argv := append([]string(nil), s.Cmd...)
	if s.Entrypoint != "" {
		argv = append([]string{s.Entrypoint}, argv...)
	}
	if s.Mode == "jupyter" {
		run := `"$@" &`
		if len(argv) == 0 {
			run = JupyterCommand + " &"
		}
		return append([]string{"/bin/sh", "-c", s.OnStart + "\n" + run + "\n" + stayUp, "onstart"}, argv...), nil
	}
	if s.OnStart == "" {
		if s.Entrypoint != "" {
			return []string{s.Entrypoint}, slices.Clone(s.Cmd)
		}
		if len(s.Cmd) > 0 {
			return nil, slices.Clone(s.Cmd)
		}
		return nil, nil
	}
	script := s.OnStart + "\nif [ $# -gt 0 ]; then exec \"$@\"; fi\n" + stayUp
	return append([]string{"/bin/sh", "-c", script, "onstart"}, argv...), nil
}

func contractRunOf(id RunID, labels map[string]string, running bool) ContractRun {
	return ContractRun{ID: id, Org: labels[LabelOrg], Contract: labels[LabelContract], Running: running, GPUs: GPUsOf(labels)}
}

func sortContractRuns(rs []ContractRun) {
	sort.Slice(rs, func(i, j int) bool {
		if rs[i].Contract != rs[j].Contract {
			return rs[i].Contract < rs[j].Contract
		}
		return rs[i].ID < rs[j].ID
	})
}

func contractErr(verb string, id RunID, err error) error {
	return fmt.Errorf("runtime: %s contract instance %s: %w", verb, idShort(id), err)
}
