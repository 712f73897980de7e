package marketsvc

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/market"
	"github.com/cshare/cshare/runtime"
)

// The host's side of the market (issue 18). The host machine's node
// answers each request for one of its offers (contract.accept when it
// fits the offer and the machine's free resources, else contract.reject
// with the reason) and makes its contract instances follow the ledger: a
// container per contract (labels cshare.contract and cshare.org), running
// while the contract runs, stopped while it is stopped or expired, removed
// once deleted. What runs is read from the ledger at each pass, so after a
// kill -9 and a restart the first pass puts things right: containers of
// unknown, rejected or deleted contracts go, those past their end stop,
// those that should run start, and a GPU is given to a container only when
// no running container of this machine holds it.
const (
	contractTick      = time.Second
	contractStopGrace = 5 * time.Second
	contractAnswerMax = 2 * time.Minute // pulling the image, before answering
)

// contractHost is what the host's loop remembers between passes: the
// Since of the run it last started (or found running) per contract, so a
// container whose command exited by itself is not started again until
// the renter starts the contract again.
type contractHost struct {
	mu      sync.Mutex
	started map[string]int64
	// idle: the last pass found no instance and the ledger no contract
	// hosted here, so passes skip the engine until the ledger has one.
	idle bool
	// answered: requests this process wrote an answer to; an answer the
	// fold kept without effect is not written again every second.
	answered map[string]bool
	// billing: the moves acknowledged and seen (billing.go).
	billing billingBook
}

// Run runs the host's passes until ctx is done: every contractTick, and
// at the moment one of this machine's contracts ends or is due for
// deletion.
func (s *Service) Run(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		t.Reset(s.hostContracts(ctx))
	}
}

// hostContracts is one pass; it returns when the next is due.
func (s *Service) hostContracts(ctx context.Context) time.Duration {
	if s.orgID() == "" {
		return contractTick
	}
	s.answerRequests(ctx)
	s.witnessMoves(ctx)
	return s.reconcileContracts(ctx)
}

// hostedContracts is this machine's contracts as host, in ledger order, the
// org's market policy and this machine's hardware. answerRequests and
// reconcileContracts each read it: the second must see the accepts the
// first just wrote, so a pass starts a contract it accepted.
func (s *Service) hostedContracts() ([]ledger.Contract, market.Policy, ledger.Hardware) {
	var out []ledger.Contract
	var p market.Policy
	var h ledger.Hardware
	s.d.Ledger.View(func(st *ledger.State) {
		p = st.MarketPolicy()
		if m := st.Machines[s.d.Machine]; m != nil {
			h = m.Hardware
		}
		for _, c := range st.SortedContracts() {
			if c.Offer.Machine == s.d.Machine {
				cc := *c
				cc.Contract = c.Contract.Clone()
				out = append(out, cc)
			}
		}
	})
	return out, p, h
}

// answerRequests accepts or rejects this machine's open requests. The
// fold has the last word: an accept for GPUs another contract holds at
// its time becomes a rejection there, on every node alike.
func (s *Service) answerRequests(ctx context.Context) {
	cs, p, hwr := s.hostedContracts()
	now := s.d.Now().UnixMilli()
	h := s.host
	for i := range cs {
		c := &cs[i]
		h.mu.Lock()
		done := h.answered[c.ID]
		h.mu.Unlock()
		if done || c.Accepted || c.State(now, p) != market.StateRequested {
			continue
		}
		reason := s.refusal(ctx, c, cs, hwr, now, p)
		var e *ledger.Entry
		var err error
		if reason == "" {
			e, err = s.d.Ledger.Write(ctx, ledger.KindContractAccept, ledger.ContractRef{Contract: c.ID})
		} else {
			e, err = s.d.Ledger.Write(ctx, ledger.KindContractReject, ledger.ContractReject{Contract: c.ID, Reason: reason})
		}
		if e != nil { // written (err: the fold kept it without effect)
			h.mu.Lock()
			h.answered[c.ID] = true
			h.mu.Unlock()
		}
		if err != nil && ctx.Err() == nil {
			s.d.Log.Info("contract answer not written or without effect", "contract", c.ID, "err", err)
		}
		s.d.Log.Info("contract answered", "contract", c.ID, "accepted", reason == "", "reason", reason)
	}
}

// refusal is why this host refuses c at now, or "" to accept it.
func (s *Service) refusal(ctx context.Context, c *ledger.Contract, all []ledger.Contract, hwr ledger.Hardware, now int64, p market.Policy) string {
	b := s.book()
	b.mu.Lock()
	_, offered := b.mine[c.Offer.ID]
	b.mu.Unlock()
	if !offered {
		return "the host withdrew the offer"
	}
	others := make([]market.Contract, 0, len(all))
	var cpu, mem int64
	for i := range all {
		o := &all[i]
		others = append(others, o.Contract)
		if o.ID != c.ID && o.Holds(now, p) {
			cpu, mem = cpu+o.Alloc.CPUMilli, mem+o.Alloc.MemoryMB
		}
	}
	if next, err := market.Accept(c.Contract, now, others, p); err != nil {
		return err.Error()
	} else if next.Rejected {
		return next.Reason
	}
	if free := int64(hwr.CPUs)*1000 - cpu; c.Alloc.CPUMilli > free {
		return fmt.Sprintf("cpus: %.2f asked, %.2f of this machine's %d free beside its other contracts", float64(c.Alloc.CPUMilli)/1000, float64(max(free, 0))/1000, hwr.CPUs)
	}
	if free := hwr.MemoryMB - mem; c.Alloc.MemoryMB > free {
		return fmt.Sprintf("memory: %d MB asked, %d MB of this machine's %d MB free beside its other contracts", c.Alloc.MemoryMB, max(free, 0), hwr.MemoryMB)
	}
	if _, ok := s.contractDriver(); !ok {
		why, _ := s.d.Drivers.Why("docker")
		return "this host cannot run contract instances: " + why
	}
	pctx, cancel := context.WithTimeout(ctx, contractAnswerMax)
	defer cancel()
	auth, err := s.d.RegistryAuth(c.Spec.Image, c.Spec.RegistryAuth, c.Renter)
	if err != nil {
		return err.Error() // names registry_auth, quotes no credential
	}
	if err := s.d.Drivers.EnsureImage(pctx, "docker", c.Spec.Image, auth); err != nil {
		if ctx.Err() != nil {
			return "" // shutting down: the next start answers
		}
		return fmt.Sprintf("image: %s is not on the host and could not be pulled", c.Spec.Image)
	}
	return ""
}

func (s *Service) contractDriver() (runtime.ContractDriver, bool) {
	d, ok := s.d.Drivers.Get("docker")
	if !ok {
		return nil, false
	}
	cd, ok := d.(runtime.ContractDriver)
	return cd, ok
}

// RemoveForeign removes this machine's contract instances labelled for an
// org that foreign reports (the node left it while they ran, or was down
// when it did; issue 27).
func (s *Service) RemoveForeign(ctx context.Context, foreign func(org string) bool) {
	d, ok := s.contractDriver()
	if !ok {
		return
	}
	runs, err := d.ListContracts(ctx, "", s.d.Machine)
	if err != nil {
		s.d.Log.Debug("could not list this machine's contract instances", "err", err)
		return
	}
	for _, r := range runs {
		if !foreign(r.Org) {
			continue
		}
		if err := d.RemoveContract(ctx, r.ID); err != nil {
			s.d.Log.Warn("could not remove a contract instance of an org this machine is not in", "org", r.Org, "contract", r.Contract, "err", err)
			continue
		}
		s.d.Log.Info("removed a contract instance of an org this machine is not in", "org", r.Org, "contract", r.Contract)
	}
}

// reconcileContracts makes this machine's contract instances follow the
// ledger at now, and returns when the next pass is due.
func (s *Service) reconcileContracts(ctx context.Context) time.Duration {
	d, ok := s.contractDriver()
	if !ok {
		return contractTick
	}
	cs, p, _ := s.hostedContracts()
	now := s.d.Now().UnixMilli()
	h := s.host
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.idle && len(cs) == 0 {
		return contractTick
	}
	runs, err := d.ListContracts(ctx, s.orgID(), s.d.Machine)
	if err != nil {
		if ctx.Err() == nil {
			s.d.Log.Warn("cannot list contract instances", "err", err)
		}
		return contractTick
	}
	h.idle = len(cs) == 0 && len(runs) == 0
	s.ackMoves(ctx, cs, runs)
	plan := planContracts(cs, runs, now, p)
	for _, r := range plan.remove {
		if err := d.RemoveContract(ctx, r.ID); err != nil {
			s.d.Log.Warn("cannot remove a contract instance", "contract", r.Contract, "err", err)
		}
	}
	for _, r := range plan.stop {
		if err := d.StopContract(ctx, r.ID, contractStopGrace); err != nil {
			s.d.Log.Warn("cannot stop a contract instance", "contract", r.Contract, "err", err)
			continue
		}
		delete(h.started, r.Contract)
	}
	held := map[string]string{} // GPU -> contract, of the instances still running
	for _, r := range plan.keep {
		for _, g := range r.GPUs {
			held[g] = r.Contract
		}
		h.started[r.Contract] = plan.since[r.Contract]
	}
	for _, c := range plan.run {
		since := c.Since
		run, exists := plan.existing[c.ID]
		if exists && h.started[c.ID] == since {
			continue // started for this Since; its command exited by itself
		}
		if startTooEarly(&c, now) {
			s.d.Log.Info("contract start is dated ahead of this host's clock; it runs once the clock is there", "contract", c.ID)
			continue
		}
		gpus := s.deviceIDs(c.Alloc.GPUs)
		if by := heldBy(held, gpus); by != "" {
			s.d.Log.Info("contract waits for its GPUs", "contract", c.ID, "held_by", by)
			continue
		}
		if !exists {
			id, err := d.CreateContract(ctx, s.contractSpec(c, gpus))
			if err != nil {
				s.d.Log.Warn("cannot create a contract instance", "contract", c.ID, "err", err)
				continue
			}
			run = runtime.ContractRun{ID: id, Contract: c.ID, GPUs: gpus}
		}
		if err := d.StartContract(ctx, run.ID); err != nil {
			s.d.Log.Warn("cannot start a contract instance", "contract", c.ID, "err", err)
			continue
		}
		for _, g := range gpus {
			held[g] = c.ID
		}
		h.started[c.ID] = since
	}
	return min(contractTick, nextBoundary(cs, now, p))
}

func heldBy(held map[string]string, gpus []string) string {
	for _, g := range gpus {
		if by := held[g]; by != "" {
			return by
		}
	}
	return ""
}

// deviceIDs are the IDs Docker's device request takes for these GPU
// indices: this machine's UUIDs where known, else the indices.
func (s *Service) deviceIDs(idx []int64) []string {
	out := make([]string, 0, len(idx))
	for _, i := range idx {
		id := strconv.FormatInt(i, 10)
		for _, g := range s.d.Hardware.GPUs {
			if int64(g.Index) == i && g.UUID != "" {
				id = g.UUID
			}
		}
		out = append(out, id)
	}
	return out
}

// contractSpec is c's instance: its baselines as CPU shares and a memory
// reservation, under the offer's ceilings.
func (s *Service) contractSpec(c ledger.Contract, gpus []string) runtime.ContractSpec {
	a := c.Alloc
	const mb = 1 << 20
	memRes := max(a.MemoryMB*mb, runtime.MinMemoryBytes)
	memMax := max(a.MemoryCeilingMB*mb, memRes)
	rs := runtime.ContractSpec{Org: s.orgID(), Machine: s.d.Machine, Contract: c.ID, Image: c.Spec.Image, Cmd: c.Spec.Cmd, Env: c.Spec.Env,
		OnStart: c.Spec.OnStart, Mode: c.Spec.Mode, Entrypoint: c.Spec.Entrypoint, GPUs: gpus, CPUShares: max(2, a.CPUMilli*1024/1000), NanoCPUs: a.CPUCeilingMilli * 1_000_000,
		MemoryReservationBytes: memRes, MemoryBytes: memMax, ShmBytes: a.ShmMB * mb, DiskBytes: a.DiskMB * mb,
		Auth: s.auth(c)}
	if c.Spec.Mode == ledger.ModeJupyter {
		rs.Jupyter = &runtime.Jupyter{Port: ledger.JupyterPort, Direct: c.Spec.Direct}
		if s.d.JupyterToken != nil {
			rs.Jupyter.Token, _ = s.d.JupyterToken(c.ID, c.Renter) // none: the spec is refused, naming the token
		}
	}
	return rs
}

// auth is the credentials to pull c's image with; nil (and a warning)
// when c's own cannot be opened here: acceptance refused those already.
func (s *Service) auth(c ledger.Contract) *runtime.RegistryAuth {
	a, err := s.d.RegistryAuth(c.Spec.Image, c.Spec.RegistryAuth, c.Renter)
	if err != nil {
		s.d.Log.Warn("contract's registry credentials not usable", "contract", c.ID, "err", err)
	}
	return a
}

// contractPlan is what a pass does with the instances it found.
type contractPlan struct {
	remove, stop, keep []runtime.ContractRun
	run                []ledger.Contract // should run, in ledger order
	existing           map[string]runtime.ContractRun
	since              map[string]int64
}

// planContracts compares the instances found with the ledger at now. It
// is pure: an instance of a contract the ledger does not know (or knows
// as rejected or deleted) is removed, a running instance of a contract
// that should not run is stopped, and of two instances of one contract
// the later is removed. Contracts Resolve leaves waiting do not run.
func planContracts(cs []ledger.Contract, runs []runtime.ContractRun, now int64, p market.Policy) contractPlan {
	pl := contractPlan{existing: map[string]runtime.ContractRun{}, since: map[string]int64{}}
	byID := map[string]*ledger.Contract{}
	mcs := make([]market.Contract, len(cs))
	for i := range cs {
		byID[cs[i].ID] = &cs[i]
		mcs[i] = cs[i].Contract
	}
	waiting := market.Resolve(mcs, now, p)
	shouldRun := func(c *ledger.Contract) bool {
		return c.State(now, p) == market.StateRunning && waiting[c.ID] == ""
	}
	for _, r := range runs {
		c := byID[r.Contract]
		_, dup := pl.existing[r.Contract]
		if c == nil || dup {
			pl.remove = append(pl.remove, r)
			continue
		}
		if st := c.State(now, p); st == market.StateDeleted || st == market.StateRejected {
			pl.remove = append(pl.remove, r)
			continue
		}
		pl.existing[r.Contract] = r
		switch {
		case r.Running && !shouldRun(c):
			pl.stop = append(pl.stop, r)
		case r.Running:
			pl.keep = append(pl.keep, r)
			pl.since[r.Contract] = c.Since
		}
	}
	for i := range cs {
		c := &cs[i]
		if r, ok := pl.existing[c.ID]; shouldRun(c) && !(ok && r.Running) {
			pl.run = append(pl.run, *c)
		}
	}
	return pl
}

// nextBoundary is how long until the next end or deletion of one of cs
// after now (a minute when none is near), plus a millisecond so the pass
// reads the contract past it.
func nextBoundary(cs []ledger.Contract, now int64, p market.Policy) time.Duration {
	next := int64(time.Minute / time.Millisecond)
	del := p.DeleteAfter
	if del <= 0 {
		del = market.DefaultDeleteAfter
	}
	for i := range cs {
		if !cs[i].Accepted || cs[i].Removed {
			continue
		}
		for _, t := range []int64{cs[i].End, cs[i].End + del} {
			if t > now && t-now < next {
				next = t - now
			}
		}
	}
	return time.Duration(next+1) * time.Millisecond
}
