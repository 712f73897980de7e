package jobsvc

import (
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/jobspec"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/node/sched"
	"github.com/cshare/cshare/runtime"
)

// DefaultImage is the image of docker jobs submitted without --image: the
// small busybox image `make test` and `make demo` build locally.
const DefaultImage = runtime.TestImage

// SubmitJob implements api.JobsAPI.
func (s *Service) SubmitJob(ctx context.Context, req api.JobSubmit) (api.JobSubmitted, error) {
	if err := s.needOrg(); err != nil {
		return api.JobSubmitted{}, err
	}
	var role, who string
	s.snapshot(func(st *ledger.State) {
		role = st.Role(s.personIn(st))
		who = s.whoAmI(st)
	})
	if role == "" {
		return api.JobSubmitted{}, api.Errorf(http.StatusForbidden, "%s yet: an admin must approve this machine first (cshare machine approve %s)", who, s.d.Machine)
	}
	spec := ledger.JobSpec{Name: strings.TrimSpace(req.Name), Image: req.Image, Driver: req.Driver, Cmd: req.Cmd, Env: req.Env,
		Cores: req.CoresMilli, MemoryMB: req.MemoryMB, GPUs: req.GPUs, RangeStart: 1,
		Priority: req.Priority, CPUs: req.CPUs, Retries: req.Retries,
		DiskMB: req.DiskMB, GPUMemoryMB: req.GPUMemoryMB, ItemTimeoutMS: req.ItemTimeoutMS,
		Entrypoint: req.Entrypoint, RegistryAuth: req.RegistryAuth}
	if req.RangeStart != nil {
		spec.RangeStart = *req.RangeStart
	}
	spec.RangeEnd = spec.RangeStart
	if req.RangeEnd != nil {
		spec.RangeEnd = *req.RangeEnd
	}
	if spec.Driver == "" {
		spec.Driver = "docker"
	}
	if spec.Driver == "docker" && spec.Image == "" {
		spec.Image = DefaultImage
	}
	if spec.Priority == 0 {
		spec.Priority = jobspec.DefaultPriority
	}
	if spec.CPUs == 0 {
		spec.CPUs = 1
	}
	if req.MaxCPUs != nil {
		x := *req.MaxCPUs
		spec.MaxCPUs = &x
	}
	mounts, err := s.d.Mounts.ResolveMounts(req.Datasets)
	if err != nil {
		return api.JobSubmitted{}, err
	}
	spec.Datasets = mounts
	// The fold's own check, by the validators the CLI parses with.
	if err := ledger.ValidateJobSpec(spec); err != nil {
		return api.JobSubmitted{}, badReq(err)
	}
	// The org's policies, as the fold will apply them (one line naming
	// the policy, and nothing written).
	var perr error
	s.snapshot(func(st *ledger.State) { perr = st.CheckJobPolicies(spec) })
	if perr != nil {
		return api.JobSubmitted{}, api.FieldErrorf(http.StatusForbidden, "memory", "%s", strings.TrimPrefix(perr.Error(), "ledger: "))
	}
	if spec.Driver == "docker" && spec.MemoryMB > 0 && spec.MemoryMB < dockerMinMemoryMB {
		return api.JobSubmitted{}, api.FieldErrorf(http.StatusBadRequest, "memory", "memory: %s is below the minimum %s of a Docker container; allowed: at least %s, or --driver exec",
			jobspec.FormatMB(spec.MemoryMB), jobspec.FormatMB(dockerMinMemoryMB), jobspec.FormatMB(dockerMinMemoryMB))
	}
	if why, ok := s.d.Drivers.Why(spec.Driver); ok {
		if spec.Driver == "exec" {
			return api.JobSubmitted{}, api.FieldErrorf(http.StatusBadRequest, "driver", "driver: exec is refused on this machine: %s", why)
		}
	}
	if err := s.checkImage(ctx, spec); err != nil {
		return api.JobSubmitted{}, err
	}
	// A job no approved machine fits is accepted (machines may join later)
	// with a warning, whichever resource it lacks: see admission.go.
	var warnings []string
	s.snapshot(func(st *ledger.State) {
		if why := sched.Unfit(st, spec); why != "" {
			warnings = append(warnings, sched.UnfitWarning(why))
		}
	})
	spec.Nonce = make([]byte, 8)
	_, _ = rand.Read(spec.Nonce)
	e, err := s.write(ctx, ledger.KindJobSubmit, spec)
	if err != nil {
		return api.JobSubmitted{}, refused(err)
	}
	j, err := s.Job(ctx, ledger.JobIDFor(e))
	if err == nil && j.State == "queued" && strings.HasPrefix(j.Reason, "AssocMaxJobsLimit") {
		warnings = append(warnings, "queued: "+j.Reason)
	}
	return api.JobSubmitted{JobInfo: j, Warnings: warnings}, err
}

// dockerMinMemoryMB is Docker's floor for a container's memory limit.
const dockerMinMemoryMB = 6

// checkImage refuses a docker job whose image is neither present nor
// pullable on this machine.
func (s *Service) checkImage(ctx context.Context, spec ledger.JobSpec) error {
	if spec.Driver != "docker" {
		return nil
	}
	cctx, c := context.WithTimeout(ctx, 2*time.Minute)
	defer c()
	// A machine without an engine (or a driver that cannot check images)
	// says nothing: other machines may run it.
	var person string
	s.snapshot(func(st *ledger.State) { person = s.personIn(st) })
	auth, err := s.d.RegistryAuth(spec.Image, spec.RegistryAuth, person)
	if err != nil {
		// Sealed to other machines (this one is not approved, or is new):
		// they check the image when they run it.
		return nil
	}
	if err := s.d.Drivers.EnsureImage(cctx, "docker", spec.Image, auth); err != nil {
		if errors.Is(err, runtime.ErrImageNotFound) {
			return api.FieldErrorf(http.StatusBadRequest, "image", "image: %s", strings.TrimPrefix(err.Error(), "runtime: "))
		}
		return api.FieldErrorf(http.StatusBadRequest, "image", "image: %q: %v", spec.Image, err)
	}
	return nil
}
