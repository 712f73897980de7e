package runtime

import (
	"context"
	"fmt"
	"time"
)

var _ ContractDriver = (*Fake)(nil)

type fakeContract struct {
	spec    ContractSpec
	running bool
	starts  int
}

// CreateContract records the instance, stopped.
func (f *Fake) CreateContract(_ context.Context, s ContractSpec) (RunID, error) {
	if err := s.Validate(); err != nil {
		return "", err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ctrs == nil {
		f.ctrs = map[RunID]*fakeContract{}
	}
	f.seq++
	id := RunID(fmt.Sprintf("fake-contract-%d", f.seq))
	s.Cmd = append([]string(nil), s.Cmd...)
	s.GPUs = append([]string(nil), s.GPUs...)
	f.ctrs[id] = &fakeContract{spec: s}
	return id, nil
}

// StartContract marks the instance running. Starting it while another
// running instance holds one of its GPUs is an error, as a real device
// would be busy: the node must never ask for that.
func (f *Fake) StartContract(_ context.Context, id RunID) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.ctrs[id]
	if !ok {
		return notFound(id)
	}
	for oid, o := range f.ctrs {
		if oid == id || !o.running || o.spec.Machine != c.spec.Machine {
			continue
		}
		for _, g := range o.spec.GPUs {
			for _, h := range c.spec.GPUs {
				if g == h {
					return fmt.Errorf("runtime: fake: GPU %s is held by the instance of contract %s", g, o.spec.Contract)
				}
			}
		}
	}
	c.running = true
	c.starts++
	return nil
}

// StopContract marks the instance stopped.
func (f *Fake) StopContract(_ context.Context, id RunID, _ time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.ctrs[id]
	if !ok {
		return notFound(id)
	}
	c.running = false
	return nil
}

// ListContracts lists org's instances hosted by machine (every org's with
// org "").
func (f *Fake) ListContracts(_ context.Context, org, machine string) ([]ContractRun, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []ContractRun
	for id, c := range f.ctrs {
		if (org == "" || c.spec.Org == org) && c.spec.Machine == machine {
			out = append(out, contractRunOf(id, c.spec.Labels(), c.running))
		}
	}
	sortContractRuns(out)
	return out, nil
}

// RemoveContract forgets the instance.
func (f *Fake) RemoveContract(_ context.Context, id RunID) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.ctrs, id)
	return nil
}

// ContractSpecOf is the spec the instance of contract was created with,
// and whether it is running (false, false when it has none).
func (f *Fake) ContractSpecOf(contract string) (s ContractSpec, running, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.ctrs {
		if c.spec.Contract == contract {
			return c.spec, c.running, true
		}
	}
	return ContractSpec{}, false, false
}
