package node

import (
	"context"
	"time"

	"github.com/cshare/cshare/internal/userkey"
	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/market"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/node/jupyter"
	"github.com/cshare/cshare/node/marketsvc"
	"github.com/cshare/cshare/p2p"
	"github.com/cshare/cshare/runtime"
)

// newJupyter builds the Jupyter proxy (package jupyter) over this node's
// parts: after the gateway, whose runtime calls dial the containers. It
// listens only once started, and only when node.yaml has jupyter.listen.
func (n *Node) newJupyter() (*jupyter.Service, error) {
	return jupyter.New(jupyter.Deps{Ledger: n.rep, Dial: n.gw.DialContract, Machine: n.idStr, Key: n.key,
		DataDir: n.opts.DataDir, Listen: n.cfg.Jupyter.Listen, Now: n.opts.Now, Log: n.log})
}

// jupyterToken is contract's Jupyter token as this machine, its host,
// derives it for renter (the container's CSHARE_JUPYTER_TOKEN).
func (n *Node) jupyterToken(contract, renter string) (string, error) {
	return jupyter.Token(n.key, renter, contract)
}

// jupyterMarket is the market's API with contract show's jupyter_url.
type jupyterMarket struct {
	*marketsvc.Service
	n *Node
}

// Contract is the market's contract view, with the URL of its Jupyter
// for its renter (see jupyterURL).
func (m jupyterMarket) Contract(ctx context.Context, ref string) (api.ContractInfo, error) {
	info, err := m.Service.Contract(ctx, ref)
	if err == nil {
		info.JupyterURL = m.n.jupyterURL(info)
	}
	return info, err
}

// jupyterURL is where the renter opens a running jupyter-mode contract's
// Jupyter, with its token, which only the renter's person key (user.key
// in this data dir) and the host machine's key derive: "" for anyone
// else, while it does not run, or while the host machine announces no
// proxy (or, direct, no published port) in its heartbeat.
func (n *Node) jupyterURL(c api.ContractInfo) string {
	if c.Mode != ledger.ModeJupyter || c.State != market.StateRunning || c.Renter != n.orgs.Person() {
		return ""
	}
	k, err := userkey.Load(n.opts.DataDir)
	if err != nil || k.ID != c.Renter {
		return ""
	}
	tok, err := jupyter.Token(k.Priv, c.Machine, c.ID)
	if err != nil {
		return ""
	}
	hb, host, ok := n.machineAt(c.Machine)
	if !ok {
		return ""
	}
	if c.Direct {
		if p := hb.JupyterDirect[c.ID]; p > 0 {
			return jupyter.URL(true, host, p, c.ID, tok)
		}
		return ""
	}
	if hb.Jupyter == nil {
		return ""
	}
	return jupyter.URL(false, host, hb.Jupyter.Port, c.ID, tok)
}

// jupyterDirect is the host ports of this machine's running direct
// jupyter contracts (at most p2p.MaxJupyterDirect, by ID), for its
// heartbeat: Docker is asked only while the ledger has such a contract
// hosted here.
func (n *Node) jupyterDirect() map[string]int64 {
	some := false
	n.rep.View(func(st *ledger.State) {
		for _, c := range st.Contracts {
			if c.Offer.Machine == n.idStr && c.Spec.Mode == ledger.ModeJupyter && c.Spec.Direct {
				some = true
				return
			}
		}
	})
	if !some {
		return nil
	}
	d, ok := n.drivers.Get("docker")
	cd, ok2 := d.(runtime.ContractDriver)
	if !ok || !ok2 {
		return nil
	}
	ctx, cancel := context.WithTimeout(n.ctx, 5*time.Second)
	defer cancel()
	runs, err := cd.ListContracts(ctx, n.rep.Org(), n.idStr)
	if err != nil {
		n.log.Debug("jupyter: list direct contracts", "err", err)
		return nil
	}
	var out map[string]int64
	for _, r := range runs { // by contract ID
		if r.Published > 0 && r.Running && len(r.Contract) <= p2p.MaxJupyterDirectID && len(out) < p2p.MaxJupyterDirect {
			if out == nil {
				out = map[string]int64{}
			}
			out[r.Contract] = int64(r.Published)
		}
	}
	return out
}
