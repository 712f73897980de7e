package node

import (
	"context"
	"os"
	"time"

	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/internal/userkey"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/node/config"
)

// The node serves api.NodeAPI itself; the other APIs are its services'
// (Start hands them to the API server).
var _ api.NodeAPI = (*Node)(nil)

// Status implements api.NodeAPI.
func (n *Node) Status(ctx context.Context) (api.NodeStatus, error) {
	now := n.opts.Now()
	up := now.Sub(n.started).Truncate(time.Second)
	s := api.NodeStatus{ID: n.idStr, Uptime: up.String(), UptimeSeconds: int64(up.Seconds()), Version: Version,
		API: n.apiAddr, Addrs: n.host.Addrs(), DataDir: n.opts.DataDir, PeerIDs: []string{}, Heads: []string{}}
	for _, p := range n.host.Peers() {
		s.PeerIDs = append(s.PeerIDs, p.String())
	}
	s.Peers = len(s.PeerIDs)
	s.Reconnecting = s.Peers == 0 && n.peers.Reconnecting()
	snap := n.rep.Snapshot()
	st := snap.State
	for _, h := range snap.Heads {
		s.Heads = append(s.Heads, h.String())
	}
	s.Entries = snap.Len
	s.Org, s.OrgName = st.Org, st.Name
	if st.Org != "" {
		s.StateHash = snap.StateHash() // as org show gives it: converged nodes agree
	} else {
		s.Left = n.orgs.Leaving().LastLeft()
	}
	if st.Org != "" {
		s.Person = n.orgs.PersonIn(st)
		s.PersonName = st.PersonName(s.Person)
	}
	s.Role = st.Role(s.Person)
	s.Name = machineName(n.opts, n.cfg)
	if m := st.Machines[s.ID]; m != nil {
		s.Name = m.Name
	}
	if s.Person == "" {
		// In no org yet: the person key's, if this data dir has one.
		if k, err := userkey.Load(n.opts.DataDir); err == nil {
			s.Person, s.PersonName = k.ID, k.Name
		}
	}
	s.Status = n.peers.MachineStatus(s.ID, n.opts.Now())
	if s.Org == "" {
		s.Status = "no org"
	}
	s.PlanHash = n.sched.View().Plan.Hash
	s.PlanAgree, s.PlanPeers = n.peers.PlanAgreement(s.PlanHash)
	s.SSHAddr, s.SSHHostKey = n.gw.Addr(), n.gw.HostKeyFingerprint()
	s.JupyterAddr, s.JupyterCert = n.jup.Addr(), n.jup.CertFingerprint()
	n.natStatus(&s)
	if catching, since := n.peers.CatchingUp(); catching {
		s.CatchingUp, s.CatchingUpSince = true, api.FormatTime(since)
	}
	return s, nil
}

// Stop implements api.NodeAPI.
func (n *Node) Stop(ctx context.Context) error {
	select {
	case <-n.stopped:
	default:
		close(n.stopped)
	}
	return nil
}

// machineName is the name this machine gives itself: --name, else
// node.yaml's, else the host name.
func machineName(opts Options, cfg config.File) string {
	if opts.Name != "" {
		return opts.Name
	}
	if cfg.Name != "" {
		return cfg.Name
	}
	// A host name that is no valid machine name (too long, say) is not
	// used: the ledger then names the machine by its short ID.
	h, _ := os.Hostname()
	if text.CheckName("name", h) != nil {
		return ""
	}
	return h
}
