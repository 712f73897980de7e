package node

import (
	"context"
	"os"
	"time"

	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/internal/userkey"
	"github.com/cshare/cshare/node/api"
)

var _ api.Service = (*Node)(nil)

func errNoOrg() error { return api.NoOrg() }

func (n *Node) needOrg() error {
	if n.orgID() == "" {
		return errNoOrg()
	}
	return nil
}

// Status implements api.Service.
func (n *Node) Status(ctx context.Context) (api.NodeStatus, error) {
	up := n.now().Sub(n.started).Truncate(time.Second)
	s := api.NodeStatus{ID: n.id.String(), Uptime: up.String(), UptimeSeconds: int64(up.Seconds()), Version: Version,
		API: n.apiAddr, Addrs: n.host.Addrs(), DataDir: n.opts.DataDir, PeerIDs: []string{}, Heads: []string{}}
	for _, p := range n.host.Peers() {
		s.PeerIDs = append(s.PeerIDs, p.String())
	}
	s.Peers = len(s.PeerIDs)
	s.Reconnecting = s.Peers == 0 && n.reconnecting()
	lg, unlock := n.rep.ReadLog()
	st := lg.State()
	heads, _ := lg.Heads()
	for _, h := range heads {
		s.Heads = append(s.Heads, h.String())
	}
	s.Entries = lg.Len()
	s.Org, s.OrgName = st.Org, st.Name
	if st.Org != "" {
		s.StateHash = lg.StateHash() // as org show gives it: converged nodes agree
	} else {
		s.Left = n.lastLeft()
	}
	if st.Org != "" {
		s.Person = n.personIn(st)
		s.PersonName = personName(st, s.Person)
	}
	s.Role = st.Role(s.Person)
	s.Name = n.machineName()
	if m := st.Machines[s.ID]; m != nil {
		s.Name = m.Name
	}
	unlock()
	if s.Person == "" {
		// In no org yet: the person key's, if this data dir has one.
		if k, err := userkey.Load(n.opts.DataDir); err == nil {
			s.Person, s.PersonName = k.ID, k.Name
		}
	}
	s.Status = n.machineStatus(s.ID, n.now())
	if s.Org == "" {
		s.Status = "no org"
	}
	s.PlanHash, s.PlanAgree, s.PlanPeers = n.planAgreement()
	if n.gate.closed.Load() {
		_, since, _ := n.gate.state()
		s.CatchingUp, s.CatchingUpSince = true, api.FormatTime(since)
	}
	return s, nil
}

func (n *Node) machineName() string {
	if n.opts.Name != "" {
		return n.opts.Name
	}
	if n.cfg.Name != "" {
		return n.cfg.Name
	}
	// A host name that is no valid machine name (too long, say) is not
	// used: the ledger then names the machine by its short ID.
	h, _ := os.Hostname()
	if text.CheckName("name", h) != nil {
		return ""
	}
	return h
}

// Stop implements api.Service.
func (n *Node) Stop(ctx context.Context) error {
	select {
	case <-n.stopped:
	default:
		close(n.stopped)
	}
	return nil
}

// afterJoin publishes this machine's hardware and limits and a heartbeat.
func (n *Node) afterJoin(ctx context.Context) {
	n.publishMachineUpdate(ctx)
	n.beat(ctx)
	n.spawn(n.learnMachines)
}
