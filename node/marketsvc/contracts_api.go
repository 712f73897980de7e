package marketsvc

import (
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/market"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/node/ref"
)

// The contract API (issue 18): a renter's request, the renter's stop and
// start, the host's extension, removal by either, and views computed from
// the ledger at this node's now. Each write is checked against the
// market's state machine first, so a refused action writes nothing and
// answers one line; the fold checks it again at its place in the ledger.

// CreateContract writes a contract.request for part of an offer this node
// has heard of.
func (s *Service) CreateContract(ctx context.Context, req api.ContractCreate) (api.ContractInfo, error) {
	if err := s.needOrg(); err != nil {
		return api.ContractInfo{}, err
	}
	so, err := s.findOffer(req.Offer)
	if err != nil {
		return api.ContractInfo{}, err
	}
	spec := ledger.ContractSpec{Image: strings.TrimSpace(req.Image), Env: req.Env, Cmd: req.Cmd, OnStart: req.OnStart,
		Mode: req.Mode, Entrypoint: req.Entrypoint, RegistryAuth: req.RegistryAuth, Direct: req.Direct}
	if req.SSHKey != "" {
		k, err := ledger.CheckSSHKey("ssh_key", req.SSHKey)
		if err != nil {
			return api.ContractInfo{}, api.FieldErrorf(http.StatusBadRequest, "ssh_key", "%v", err)
		}
		spec.SSHKey = k.Line // the one form the fold takes
	}
	if err := ledger.ValidateContractSpec(spec); err != nil {
		return api.ContractInfo{}, api.FieldErrorf(http.StatusBadRequest, strings.SplitN(err.Error(), ":", 2)[0], "%v", err)
	}
	if req.ForMS < 0 {
		return api.ContractInfo{}, api.FieldErrorf(http.StatusBadRequest, "for_ms", "for: %d ms; a positive duration, or none for until the offer ends", req.ForMS)
	}
	ask := market.Ask{GPUs: req.GPUs, CPUs: req.CPUs, DiskMB: req.DiskMB, Duration: req.ForMS}
	if ask.GPUs == 0 && ask.CPUs == 0 {
		// Nothing asked: the whole offer.
		if len(so.Offer.GPUs) > 0 {
			ask.GPUs = int64(len(so.Offer.GPUs))
		} else {
			ask.CPUs = so.Offer.CPUs
		}
	}
	if _, err := market.Shape(so.Offer, ask); err != nil {
		msg := strings.TrimPrefix(err.Error(), market.ErrAsk.Error()+": ")
		return api.ContractInfo{}, api.FieldErrorf(http.StatusBadRequest, strings.SplitN(msg, ":", 2)[0], "%s", msg)
	}
	nonce := make([]byte, 8)
	_, _ = rand.Read(nonce)
	e, err := s.d.Ledger.Write(ctx, ledger.KindContractRequest, ledger.ContractRequest{Offer: so, Ask: ask, Spec: spec, Nonce: nonce})
	if e == nil {
		return api.ContractInfo{}, api.Refused(err)
	}
	return s.Contract(ctx, ledger.ContractIDFor(e))
}

// findOffer is the signed offer that want names among the offers this node
// has heard of (full ID, or a unique prefix or suffix).
func (s *Service) findOffer(want string) (ledger.SignedOffer, error) {
	if strings.TrimSpace(want) == "" {
		return ledger.SignedOffer{}, api.FieldErrorf(http.StatusBadRequest, "offer", "offer: give an offer ID (see cshare offer ls)")
	}
	now := s.d.Now()
	b := s.book()
	b.mu.Lock()
	recs := map[string]ledger.SignedOffer{}
	var cands []ref.Candidate
	for id, r := range b.offers {
		if r.o.Live(now.UnixMilli()) {
			so := r.so
			so.Offer.ID = id
			recs[id] = so
			cands = append(cands, ref.Candidate{ID: id})
		}
	}
	b.mu.Unlock()
	slices.SortFunc(cands, func(a, b ref.Candidate) int { return strings.Compare(a.ID, b.ID) })
	id, err := ref.Resolve("offer", "cshare offer ls", want, cands)
	if err != nil {
		return ledger.SignedOffer{}, err
	}
	return recs[id], nil
}

// maySeeContract: a member sees the contracts they rent or host; admins
// and the owner see every one (issue 27: what a contract runs, its env
// among it, went to every member).
func maySeeContract(st *ledger.State, person string, c *ledger.Contract) bool {
	return c.Renter == person || c.Host == person || st.IsAdmin(person)
}

// contractRef resolves want to a contract this machine's person may see,
// read with the state at now: one they may not see is "no such contract",
// as a job is.
func (s *Service) contractRef(want string, fn func(st *ledger.State, c *ledger.Contract) error) error {
	if err := s.needOrg(); err != nil {
		return err
	}
	var err error
	s.d.Ledger.View(func(st *ledger.State) {
		me := s.personIn(st)
		var cands []ref.Candidate
		for _, c := range st.SortedContracts() {
			if maySeeContract(st, me, c) {
				cands = append(cands, ref.Candidate{ID: c.ID})
			}
		}
		var id string
		if id, err = ref.Resolve("contract", "cshare contract ls", want, cands); err == nil {
			err = fn(st, st.Contracts[id])
		}
	})
	return err
}

// Contracts lists the org's contracts this machine's person may see, in
// ledger order.
func (s *Service) Contracts(_ context.Context) ([]api.ContractInfo, error) {
	if err := s.needOrg(); err != nil {
		return nil, err
	}
	now := s.d.Now().UnixMilli()
	out := []api.ContractInfo{}
	s.d.Ledger.View(func(st *ledger.State) {
		waiting := market.Resolve(st.MarketContracts(""), now, st.MarketPolicy())
		me := s.personIn(st)
		for _, c := range st.SortedContracts() {
			if maySeeContract(st, me, c) {
				out = append(out, contractInfo(st, c, now, waiting))
			}
		}
	})
	return out, nil
}

// Contract shows one contract.
func (s *Service) Contract(_ context.Context, ref string) (api.ContractInfo, error) {
	var info api.ContractInfo
	now := s.d.Now().UnixMilli()
	err := s.contractRef(ref, func(st *ledger.State, c *ledger.Contract) error {
		info = contractInfo(st, c, now, market.Resolve(st.MarketContracts(c.Offer.Machine), now, st.MarketPolicy()))
		return nil
	})
	return info, err
}

// ContractAction is the renter's stop or start, or the renter's or host's
// removal.
func (s *Service) ContractAction(ctx context.Context, ref, action string) (api.ContractInfo, error) {
	me := s.d.Person()
	now := s.d.Now().UnixMilli()
	var id, kind string
	err := s.contractRef(ref, func(st *ledger.State, c *ledger.Contract) error {
		id = c.ID
		p := st.MarketPolicy()
		var err error
		switch action {
		case api.ContractStop, api.ContractStart:
			if me != c.Renter {
				return api.Errorf(http.StatusForbidden, "only the renter (%s) may %s contract %s", st.PersonName(c.Renter), action, c.ID)
			}
			if action == api.ContractStop {
				kind = ledger.KindContractStop
				_, err = market.Stop(c.Contract, now, p)
			} else {
				kind = ledger.KindContractStart
				_, err = market.Start(c.Contract, now, st.MarketContracts(c.Offer.Machine), p)
			}
		case api.ContractRm:
			if me != c.Renter && me != c.Host {
				return api.Errorf(http.StatusForbidden, "only the renter (%s) or the host (%s) may remove contract %s", st.PersonName(c.Renter), st.PersonName(c.Host), c.ID)
			}
			kind = ledger.KindContractRm
			_, err = market.Remove(c.Contract, now, p)
		default:
			return api.FieldErrorf(http.StatusBadRequest, "action", "contract action %q; allowed: stop, start, rm", api.Ellipsize(action))
		}
		return stateConflict(err)
	})
	if err != nil {
		return api.ContractInfo{}, err
	}
	if _, err := s.d.Ledger.Write(ctx, kind, ledger.ContractRef{Contract: id}); err != nil {
		return api.ContractInfo{}, api.Refused(err)
	}
	return s.Contract(ctx, id)
}

// ExtendContract is the host's extension of a contract's end.
func (s *Service) ExtendContract(ctx context.Context, ref string, req api.ContractExtendRequest) (api.ContractInfo, error) {
	me := s.d.Person()
	now := s.d.Now().UnixMilli()
	var id string
	err := s.contractRef(ref, func(st *ledger.State, c *ledger.Contract) error {
		id = c.ID
		if me != c.Host {
			return api.Errorf(http.StatusForbidden, "only the host (%s) may extend contract %s; ask them to", st.PersonName(c.Host), c.ID)
		}
		if req.ForMS <= 0 || req.ForMS > market.MaxDuration {
			return api.FieldErrorf(http.StatusBadRequest, "for_ms", "for_ms: %d; a positive duration like 1h, at most 10 years", req.ForMS)
		}
		_, err := market.Extend(c.Contract, req.ForMS, now, st.MarketPolicy())
		if errors.Is(err, market.ErrDuration) {
			return api.FieldErrorf(http.StatusBadRequest, "for_ms", "for_ms: %s", strings.TrimPrefix(err.Error(), market.ErrDuration.Error()+": "))
		}
		return stateConflict(err)
	})
	if err != nil {
		return api.ContractInfo{}, err
	}
	if _, err := s.d.Ledger.Write(ctx, ledger.KindContractExtend, ledger.ContractExtend{Contract: id, Duration: req.ForMS}); err != nil {
		return api.ContractInfo{}, api.Refused(err)
	}
	return s.Contract(ctx, id)
}

// ContractUsage sums contract costs per renter and per host at at (unix
// ms; 0: now), from the ledger alone.
func (s *Service) ContractUsage(_ context.Context, at int64) (api.ContractUsage, error) {
	if err := s.needOrg(); err != nil {
		return api.ContractUsage{}, err
	}
	if at == 0 {
		at = s.d.Now().UnixMilli()
	}
	u := api.ContractUsage{At: api.FormatTimeMS(time.UnixMilli(at)), Renters: []api.UsageAccount{}, Hosts: []api.UsageAccount{}}
	s.d.Ledger.View(func(st *ledger.State) {
		renters, hosts := market.Usage(st.MarketContracts(""), at)
		for _, x := range []struct {
			in  []market.Account
			out *[]api.UsageAccount
		}{{renters, &u.Renters}, {hosts, &u.Hosts}} {
			for _, a := range x.in {
				*x.out = append(*x.out, api.UsageAccount{Person: a.Person, Name: st.PersonName(a.Person), Contracts: a.Contracts,
					Cost: dollars(a.Cost.Total), ComputeCost: dollars(a.Cost.Compute), StorageCost: dollars(a.Cost.Storage)})
			}
		}
	})
	return u, nil
}

// stateConflict is a transition the contract's state refuses, as a 409.
func stateConflict(err error) error {
	if err == nil {
		return nil
	}
	return api.Errorf(http.StatusConflict, "%s", strings.TrimPrefix(strings.TrimPrefix(err.Error(), market.ErrState.Error()+": "), market.ErrHeld.Error()+": "))
}

func dollars(micro int64) float64 { return float64(micro) / 1e6 }

func msTime(ms int64) string {
	if ms == 0 {
		return ""
	}
	return api.FormatTimeMS(time.UnixMilli(ms))
}

// contractInfo is c at now; waiting is market.Resolve's verdict.
func contractInfo(st *ledger.State, c *ledger.Contract, now int64, waiting map[string]string) api.ContractInfo {
	p := st.MarketPolicy()
	cost := c.Cost(now)
	run, _ := c.Billing(now)
	a := c.Alloc
	info := api.ContractInfo{ID: c.ID, Offer: c.Offer.ID, Host: c.Host, HostName: st.PersonName(c.Host), Machine: c.Offer.Machine,
		Renter: c.Renter, RenterName: st.PersonName(c.Renter), State: c.State(now, p), GPUs: len(a.GPUs), GPUDevices: a.GPUs,
		CPUs: float64(a.CPUMilli) / 1000, MemoryMB: a.MemoryMB, ShmMB: a.ShmMB, DiskMB: a.DiskMB,
		CPUCeiling: float64(a.CPUCeilingMilli) / 1000, MemoryCeilingMB: a.MemoryCeilingMB, OOMRisk: a.OOMRisk(),
		Requested: msTime(c.Requested), Price: dollars(c.Offer.Price), DiskPrice: dollars(c.Offer.DiskPrice),
		Cost: dollars(cost.Total), ComputeCost: dollars(cost.Compute), StorageCost: dollars(cost.Storage), RunningSeconds: float64(run) / 1000,
		Reason: c.Why(now, p), Image: c.Spec.Image, Env: c.Spec.Env, Cmd: c.Spec.Cmd, OnStart: c.Spec.OnStart,
		Mode: c.Spec.Mode, Entrypoint: c.Spec.Entrypoint, RegistryAuth: len(c.Spec.RegistryAuth) > 0, Direct: c.Spec.Direct}
	if info.Mode == "" {
		info.Mode = ledger.ModeEntrypoint
	}
	if info.GPUDevices == nil {
		info.GPUDevices = []int64{}
	}
	if m := st.Machines[c.Offer.Machine]; m != nil {
		info.MachineName = m.Name
	}
	if c.Accepted {
		info.Start, info.End = msTime(c.Start), msTime(c.End)
	}
	if w := waiting[c.ID]; w != "" && info.State == market.StateRunning {
		info.Reason = w
	}
	if a.CPUMilli == 0 && a.MemoryMB == 0 {
		info.OOMRisk = ""
	}
	return info
}

// ParseDeleteAfter reads the org setting market.delete_after: a duration
// like 48h or 2d (0: the default, 48 hours), at most 10 years.
func ParseDeleteAfter(v string) (int64, error) {
	v = strings.TrimSpace(v)
	bad := api.FieldErrorf(http.StatusBadRequest, "market.delete_after", "market.delete_after: %q; a duration like 48h, 90m or 2d (0: 48h), at most 10 years", api.Ellipsize(v))
	if v == "0" {
		return 0, nil
	}
	var d time.Duration
	if days, ok := strings.CutSuffix(v, "d"); ok {
		x, err := strconv.ParseInt(days, 10, 64)
		if err != nil || x <= 0 || x > 3650 {
			return 0, bad
		}
		d = time.Duration(x) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(v); err != nil || d <= 0 {
			return 0, bad
		}
	}
	if d.Milliseconds() < 1 || d.Milliseconds() > market.MaxDuration {
		return 0, bad
	}
	return d.Milliseconds(), nil
}
