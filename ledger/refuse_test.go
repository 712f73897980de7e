package ledger

import (
	"strings"
	"testing"

	"github.com/cshare/cshare/market"
)

// TestContractSpecChecksAsJobSubmit: a contract's image, env and cmd are
// checked as a job's are: "../x" and "BusyBox:Latest" (which job submit
// refuses), a NUL byte or bad UTF-8 in env or cmd are refused by the
// door's check (ValidateContractSpec, which the API calls) and by the fold,
// with one line naming the field and at most 64 characters of the value.
func TestContractSpecChecksAsJobSubmit(t *testing.T) {
	w := newMarket(t)
	req := func(spec ContractSpec) ContractRequest {
		return ContractRequest{Offer: w.offer, Ask: market.Ask{GPUs: 1}, Spec: spec}
	}
	for _, c := range []struct {
		spec  ContractSpec
		field string
	}{
		{ContractSpec{Image: "../x"}, "image"},
		{ContractSpec{Image: "BusyBox:Latest"}, "image"},
		{ContractSpec{Image: strings.Repeat("x", 10240)}, "image"},
		{ContractSpec{Image: "busybox", Env: map[string]string{"A": "x\x00y"}}, "env"},
		{ContractSpec{Image: "busybox", Cmd: []string{"echo", "a\x00b"}}, "cmd"},
		{ContractSpec{Image: "busybox", OnStart: "echo \x00"}, "onstart"},
	} {
		err := ValidateContractSpec(c.spec)
		if err == nil || !strings.HasPrefix(err.Error(), c.field+": ") || strings.Contains(err.Error(), "\n") || len(err.Error()) > 400 {
			t.Errorf("ValidateContractSpec(%.40q...) = %.200v; want one short line naming %s", c.spec.Image+c.spec.OnStart, err, c.field)
		}
		w.denied(ErrMalformed, w.alice, KindContractRequest, req(c.spec))
	}
	w.ok(w.alice, KindContractRequest, req(ContractSpec{Image: "ghcr.io/org/app:v1", Env: map[string]string{"A": "工作"}, Cmd: []string{"sh", "-c", "echo ok"}}))
}

// TestJobSpecRefusesNULAndBadImage: the fold refuses a job whose env value
// holds a NUL byte or whose image Docker cannot read, as the CLI does; the
// API calls the same ValidateJobSpec.
func TestJobSpecRefusesNULAndBadImage(t *testing.T) {
	w := newWorld(t)
	spec := func() JobSpec {
		return JobSpec{Driver: "docker", Image: "busybox", Cmd: []string{"true"}, RangeStart: 1, RangeEnd: 1,
			Priority: 5, CPUs: 1, Nonce: []byte{byte(w.tick())}}
	}
	nul := spec()
	nul.Env = map[string]string{"SECRET": "a\x00b"}
	nulCmd := spec()
	nulCmd.Cmd = []string{"echo", "a\x00b"}
	upper := spec()
	upper.Image = "BusyBox:Latest"
	dots := spec()
	dots.Image = "../x"
	for _, s := range []JobSpec{nul, nulCmd, upper, dots} {
		if err := ValidateJobSpec(s); err == nil {
			t.Errorf("ValidateJobSpec(%q, %q, %q) = nil", s.Image, s.Cmd, s.Env)
		}
		w.denied(ErrMalformed, w.owner, KindJobSubmit, s)
	}
	w.ok(w.owner, KindJobSubmit, spec())
}
