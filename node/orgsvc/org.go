package orgsvc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/jobspec"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/node/marketsvc"
)

// The org's API: create, show, its key and invites, its settings.

func randomID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// needAdmin refuses (403) when this machine's person is not the owner or
// an admin, naming what they may not do.
func (s *Service) needAdmin(what string) error {
	if err := s.needOrg(); err != nil {
		return err
	}
	var ok bool
	s.snapshot(func(st *ledger.State) { ok = st.IsAdmin(s.PersonIn(st)) })
	if !ok {
		return s.Refuse("only the owner and admins may " + what)
	}
	return nil
}

func (s *Service) CreateOrg(ctx context.Context, req api.OrgCreate) (api.KeyResult, error) {
	if org := s.orgID(); org != "" {
		return api.KeyResult{}, api.Errorf(http.StatusConflict, "this node is already in org %s; a node belongs to one org", org)
	}
	req.Name = strings.TrimSpace(req.Name)
	if err := text.CheckName("name", req.Name); err != nil {
		return api.KeyResult{}, badReq(err)
	}
	if err := text.CheckDescription("description", req.Description); err != nil {
		return api.KeyResult{}, badReq(err)
	}
	if err := checkUserName(req.UserName); err != nil {
		return api.KeyResult{}, err
	}
	key, psigner, err := s.personKey(req.UserName)
	if err != nil {
		return api.KeyResult{}, err
	}
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	owner := psigner.SignDelegation(key.Name, s.idStr, ledger.GenesisOrg(nonce))
	g := ledger.Genesis{Name: req.Name, Description: req.Description, MachineName: s.d.Machines.MachineName(),
		OrgKeyID: randomID(), Settings: ledger.DefaultSettings(), Nonce: nonce, Owner: &owner}
	e, err := s.write(ctx, ledger.KindGenesis, g)
	if err != nil {
		return api.KeyResult{}, refused(err)
	}
	if err := s.d.Topics.JoinTopics(e.CID().String()); err != nil {
		return api.KeyResult{}, err
	}
	s.d.Topics.AfterJoin(ctx)
	return s.OrgKey(ctx, false)
}

// Org implements api.OrgAPI.
func (s *Service) Org(ctx context.Context) (api.OrgInfo, error) {
	if err := s.needOrg(); err != nil {
		return api.OrgInfo{}, err
	}
	var o api.OrgInfo
	now := s.now()
	snap := s.d.Ledger.Snapshot()
	st := snap.State
	o = api.OrgInfo{ID: st.Org, Name: st.Name, Description: st.Description, Owner: st.Owner, OwnerName: personName(st, st.Owner), StateHash: snap.StateHash(),
		Entries: snap.Len, Settings: st.Settings, Members: len(st.Members), Machines: len(st.Machines),
		Created: api.FormatTime(time.UnixMilli(st.Created)), Policies: apiPolicies(st.Settings.Policies), Capped: st.CappedMachines()}
	for _, h := range snap.Heads {
		o.Heads = append(o.Heads, h.String())
	}
	free := s.Usage().ledgerTotals(st, now, &o.Totals)
	s.Usage().addAvailable(free, now, &o.Totals)
	return o, nil
}

// OrgKey implements api.OrgAPI: the org key is rebuilt from the current key
// ID and signed by this node, which must be an admin.
func (s *Service) OrgKey(ctx context.Context, rotate bool) (api.KeyResult, error) {
	if err := s.needAdmin("print or rotate the org key"); err != nil {
		return api.KeyResult{}, err
	}
	if rotate {
		if _, err := s.write(ctx, ledger.KindOrgKey, ledger.OrgKey{KeyID: randomID()}); err != nil {
			return api.KeyResult{}, refused(err)
		}
	}
	var org, keyID string
	s.snapshot(func(st *ledger.State) { org, keyID = st.Org, st.OrgKeyID })
	c := s.d.Signer.SignCapability(ledger.Capability{Org: org, Kind: ledger.CapOrgKey, ID: keyID, Role: ledger.RoleMember})
	return api.KeyResult{Org: org, Key: ledger.Token{Cap: c, Addrs: s.BootstrapAddrs()}.Encode(), Role: ledger.RoleMember}, nil
}

// BootstrapAddrs are the addresses an org key or invite names to join
// through: this host's, non-loopback first, at most 8.
func (s *Service) BootstrapAddrs() []string {
	addrs := s.d.Host.Addrs()
	sort.SliceStable(addrs, func(i, j int) bool {
		// Prefer non-loopback addresses: they work from other machines.
		li, lj := strings.Contains(addrs[i], "/127.0.0.1/") || strings.Contains(addrs[i], "/::1/"), strings.Contains(addrs[j], "/127.0.0.1/") || strings.Contains(addrs[j], "/::1/")
		return !li && lj
	})
	if len(addrs) > 8 {
		addrs = addrs[:8]
	}
	return addrs
}

// Invite implements api.OrgAPI.
func (s *Service) Invite(ctx context.Context, req api.InviteRequest) (api.KeyResult, error) {
	if err := s.needAdmin("issue invites"); err != nil {
		return api.KeyResult{}, err
	}
	if req.Role == "" {
		req.Role = ledger.RoleMember
	}
	if req.Role != ledger.RoleMember && req.Role != ledger.RoleAdmin {
		return api.KeyResult{}, api.FieldErrorf(http.StatusBadRequest, "role", "role: %q is not a role an invite can grant; allowed: member, admin", api.Ellipsize(req.Role))
	}
	if req.Uses < 0 || req.Uses > 1_000_000 {
		return api.KeyResult{}, api.FieldErrorf(http.StatusBadRequest, "uses", "uses: %d is %s; allowed: 0 (unlimited) to 1000000", req.Uses,
			map[bool]string{true: "below the minimum 0", false: "above the maximum 1000000"}[req.Uses < 0])
	}
	var expires int64
	switch req.Expires {
	case "":
		req.Expires = "72h"
		fallthrough
	default:
		if req.Expires == "0" || req.Expires == "never" {
			break
		}
		d, err := time.ParseDuration(req.Expires)
		if err != nil || d <= 0 {
			return api.KeyResult{}, api.FieldErrorf(http.StatusBadRequest, "expires", "expires: %q is not a positive duration; allowed: a duration like 72h or 30m, or 0 for never", api.Ellipsize(req.Expires))
		}
		expires = s.now().Add(d).UnixMilli()
	}
	org := s.orgID()
	c := s.d.Signer.SignCapability(ledger.Capability{Org: org, Kind: ledger.CapInvite, ID: randomID(), Role: req.Role, Expires: expires, Uses: req.Uses})
	res := api.KeyResult{Org: org, Key: ledger.Token{Cap: c, Addrs: s.BootstrapAddrs()}.Encode(), Role: req.Role, Uses: req.Uses}
	if expires != 0 {
		res.Expires = api.FormatTime(time.UnixMilli(expires))
	}
	return res, nil
}

// SetSettings implements api.OrgAPI.
func (s *Service) SetSettings(ctx context.Context, req api.SettingsRequest) (api.OrgInfo, error) {
	if err := s.needAdmin("change org settings"); err != nil {
		return api.OrgInfo{}, err
	}
	if len(req.Set) == 0 {
		return api.OrgInfo{}, api.Errorf(http.StatusBadRequest, "nothing to set; give KEY=VALUE, e.g. smartshare.mode=jobs")
	}
	var u ledger.OrgUpdate
	var cur ledger.Settings
	s.snapshot(func(st *ledger.State) { cur = st.Settings })
	for _, k := range slices.Sorted(maps.Keys(req.Set)) {
		v := req.Set[k]
		switch k {
		case "name":
			s := strings.TrimSpace(v)
			if err := text.CheckName("name", s); err != nil {
				return api.OrgInfo{}, badReq(err)
			}
			u.Name = &s
		case "description":
			s := v
			if err := text.CheckDescription("description", s); err != nil {
				return api.OrgInfo{}, badReq(err)
			}
			u.Description = &s
		case "require_machine_approval":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return api.OrgInfo{}, api.FieldErrorf(http.StatusBadRequest, k, "require_machine_approval: %q is not true or false; allowed: true, false", api.Ellipsize(v))
			}
			u.RequireMachineApproval = &b
		case "smartshare.mode":
			s := v
			u.SmartShareMode = &s
			cur.SmartShare.Mode = v
		case "smartshare.preempt_policy":
			s := v
			u.PreemptPolicy = &s
			cur.SmartShare.PreemptPolicy = v
		case "smartshare.default_max_cpus", "smartshare.max_cpus_limit":
			x, err := jobspec.ParseMaxCPUs(v)
			if err != nil {
				return api.OrgInfo{}, badReq(jobspec.Rename(err, k))
			}
			if k == "smartshare.default_max_cpus" {
				u.DefaultMaxCPUs, cur.SmartShare.DefaultMaxCPUs = &x, x
			} else {
				u.MaxCPUsLimit, cur.SmartShare.MaxCPUsLimit = &x, x
			}
		case "market.delete_after":
			d, err := marketsvc.ParseDeleteAfter(v)
			if err != nil {
				return api.OrgInfo{}, err
			}
			u.MarketDeleteAfter = &d
		case "ledger.checkpoint_every", "ledger.retain", "jobs.retain":
			if err := parseLedgerSetting(&u, k, v); err != nil {
				return api.OrgInfo{}, err
			}
		default:
			if name, ok := strings.CutPrefix(k, "policy."); ok {
				x, err := ParsePolicy(name, v)
				if err != nil {
					return api.OrgInfo{}, err
				}
				if u.Policies == nil {
					u.Policies = map[string]int64{}
				}
				u.Policies[name] = x
				continue
			}
			return api.OrgInfo{}, api.FieldErrorf(http.StatusBadRequest, k, "unknown setting %q; allowed: name, description, require_machine_approval, smartshare.mode, smartshare.preempt_policy, smartshare.default_max_cpus, smartshare.max_cpus_limit, market.delete_after, ledger.checkpoint_every, ledger.retain, jobs.retain, policy.%s", api.Ellipsize(k), strings.Join(ledger.PolicyNames, ", policy."))
		}
	}
	if err := ledger.ValidateSettings(cur.SmartShare); err != nil {
		field, _, _ := strings.Cut(err.Error(), ": ") // ValidateSettings names the setting first
		return api.OrgInfo{}, api.FieldErrorf(http.StatusBadRequest, field, "%v", err)
	}
	if _, err := s.write(ctx, ledger.KindOrgUpdate, u); err != nil {
		return api.OrgInfo{}, refused(err)
	}
	return s.Org(ctx)
}
