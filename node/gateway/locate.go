package gateway

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"

	"golang.org/x/crypto/ssh"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/market"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/node/ref"
)

// Where to ssh into a contract or a job's item, for `contract ssh` and
// `job ssh`: the gateway of the machine that runs it, as that machine's
// heartbeat announces it, reached at the address this node reaches the
// machine at.

// ContractSSH is where to ssh into a contract this machine's person may
// see.
func (s *Service) ContractSSH(_ context.Context, want string) (api.SSHTarget, error) {
	if err := s.needOrg(); err != nil {
		return api.SSHTarget{}, err
	}
	var id, machine, state string
	var err error
	now := s.d.Now().UnixMilli()
	s.d.Ledger.View(func(st *ledger.State) {
		me := s.d.Person()
		var cands []ref.Candidate
		for _, c := range st.SortedContracts() {
			if c.Renter == me || c.Host == me || st.IsAdmin(me) {
				cands = append(cands, ref.Candidate{ID: c.ID})
			}
		}
		if id, err = ref.Resolve("contract", "cshare contract ls", want, cands); err == nil {
			c := st.Contracts[id]
			machine, state = c.Offer.Machine, c.State(now, st.MarketPolicy())
		}
	})
	if err != nil {
		return api.SSHTarget{}, err
	}
	if state != market.StateRunning {
		return api.SSHTarget{}, api.Errorf(http.StatusConflict, "contract %s is %s; only a running contract can be entered", id, state)
	}
	return s.target(id, machine)
}

// JobSSH is where to ssh into item of a job this machine's person may
// see: the machine that runs it now.
func (s *Service) JobSSH(_ context.Context, want string, item int64) (api.SSHTarget, error) {
	if err := s.needOrg(); err != nil {
		return api.SSHTarget{}, err
	}
	var id string
	var err error
	s.d.Ledger.View(func(st *ledger.State) {
		me := s.d.Person()
		var cands []ref.Candidate
		for _, j := range st.SortedJobs() {
			if st.CanSee(me, j) {
				cands = append(cands, ref.Candidate{ID: j.ID, Name: j.Spec.Name})
			}
		}
		id, err = ref.Resolve("job", "cshare job ls", want, cands)
		if err != nil {
			return
		}
		j := st.Jobs[id]
		switch {
		case item < j.Spec.RangeStart || item > j.Spec.RangeEnd:
			err = api.FieldErrorf(http.StatusBadRequest, "item", "item: job %s has no item %d; its items are %d..%d", id, item, j.Spec.RangeStart, j.Spec.RangeEnd)
		case j.Archived != nil:
			err = api.Errorf(http.StatusConflict, "job %s is %s; only a running item can be entered", id, j.State)
		case j.Items.Status(int(item-j.Spec.RangeStart)) != ledger.ItemPending:
			err = api.Errorf(http.StatusConflict, "item %d of job %s has finished (%s); only a running item can be entered", item, id, itemStatus(j.Items.Status(int(item-j.Spec.RangeStart))))
		}
	})
	if err != nil {
		return api.SSHTarget{}, err
	}
	machine := s.d.Machines.RunningOn(id, item)
	if machine == "" {
		return api.SSHTarget{}, api.Errorf(http.StatusConflict, "item %d of job %s runs on no machine now", item, id)
	}
	return s.target(id+"."+strconv.FormatInt(item, 10), machine)
}

// target is user@machine's gateway.
func (s *Service) target(user, machine string) (api.SSHTarget, error) {
	g, host, ok := s.d.Machines.Gateway(machine)
	if !ok {
		return api.SSHTarget{}, api.Errorf(http.StatusConflict, "machine %s runs it but announces no SSH gateway (its node.yaml has no ssh: {listen: ...}, or it is offline)", machine)
	}
	t := api.SSHTarget{User: user, Machine: machine, Host: host, Port: int(g.Port), HostKey: g.HostKey}
	if k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(g.HostKey)); err == nil {
		t.HostKeyFingerprint = ssh.FingerprintSHA256(k)
	}
	t.URL = fmt.Sprintf("ssh://%s@%s", user, net.JoinHostPort(host, strconv.Itoa(t.Port)))
	return t, nil
}
