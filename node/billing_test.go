package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/market"
	"github.com/cshare/cshare/node/api"
)

// TestContractMovesAcknowledgedAndWitnessed (issue 30): the host's node
// acknowledges its contract's accept, stop and start once its instance
// follows them, and the third machine (neither the renter's person nor
// the host's) witnesses each as it reaches it; every node folds the same
// marks, and billing runs from them: stopped, the contract's running
// seconds stop growing.
func TestContractMovesAcknowledgedAndWitnessed(t *testing.T) {
	m := newMesh(t, meshConfig{n: 3, interval: 200 * time.Millisecond, slots: 2, recordGPUs: 1})
	m.formOrg()
	host, renter := m.nodes[0], m.nodes[1]
	var offer api.OfferInfo
	eventually(t, 20*time.Second, "the host can offer its GPU", func() string {
		var err error
		offer, err = host.market.CreateOffer(ctxT(t), api.OfferCreate{Price: "3.6", ForMS: market.Day})
		if err != nil {
			return err.Error()
		}
		return ""
	})
	var c api.ContractInfo
	eventually(t, 20*time.Second, "the renter rents it", func() string {
		var err error
		c, err = renter.market.CreateContract(ctxT(t), api.ContractCreate{Offer: offer.ID, Image: "img", ForMS: market.Hour})
		if err != nil {
			return err.Error()
		}
		return ""
	})
	// marks is the contract's marks on n: every one acknowledged and
	// witnessed, or why not.
	marks := func(n *meshNode, want int) func() string {
		return func() string {
			var ms []market.Mark
			n.rep.View(func(st *ledger.State) {
				if k := st.Contracts[c.ID]; k != nil {
					ms = append(ms, k.Marks...)
				}
			})
			if len(ms) != want {
				return fmt.Sprintf("%d marks, want %d", len(ms), want)
			}
			for _, mk := range ms {
				if !mk.Acked || !mk.Witnessed {
					return fmt.Sprintf("mark %+v not acknowledged and witnessed", mk)
				}
			}
			return ""
		}
	}
	eventually(t, 20*time.Second, "the accept acknowledges the request, the third machine witnessed it", marks(host, 1))
	eventually(t, 20*time.Second, "the instance runs", func() string {
		if _, running, ok := host.drv.ContractSpecOf(c.ID); !ok || !running {
			return "not running"
		}
		return ""
	})
	// The renter's node may not have folded the host's accept yet.
	eventually(t, 20*time.Second, "the renter stops it", func() string {
		if _, err := renter.market.ContractAction(ctxT(t), c.ID, api.ContractStop); err != nil {
			return err.Error()
		}
		return ""
	})
	for _, n := range m.nodes {
		eventually(t, 20*time.Second, n.name+": the stop acknowledged and witnessed", marks(n, 2))
	}
	a := contractState(t, renter.Node, c.ID)
	eventually(t, 20*time.Second, "the running seconds stay put", func() string {
		b := contractState(t, host.Node, c.ID)
		if b.RunningSeconds != a.RunningSeconds || b.ComputeCost != a.ComputeCost || b.ComputeCost <= 0 {
			return fmt.Sprintf("host %v s $%v, renter %v s $%v", b.RunningSeconds, b.ComputeCost, a.RunningSeconds, a.ComputeCost)
		}
		return ""
	})
	eventually(t, 20*time.Second, "the renter's start reached the host", func() string {
		if _, err := renter.market.ContractAction(ctxT(t), c.ID, api.ContractStart); err != nil {
			return err.Error()
		}
		return ""
	})
	eventually(t, 20*time.Second, "the start acknowledged and witnessed", marks(host, 3))

	// /metrics gives org usage's and org show's figures.
	u, err := renter.orgs.Usage().OrgUsage(ctxT(t), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var spend float64
	for _, p := range u.Persons {
		if p.ID == c.Renter {
			spend = p.ContractSpendUSD
		}
	}
	got := map[string]float64{}
	mfs, err := renter.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			v := mt.GetGauge().GetValue() + mt.GetCounter().GetValue()
			for _, l := range mt.GetLabel() {
				if l.GetValue() == c.Renter {
					got[mf.GetName()+"/renter"] = v
				}
			}
			if len(mt.GetLabel()) == 0 {
				got[mf.GetName()] = v
			}
		}
	}
	if got["cshare_org_machines"] != 3 || got["cshare_usage_contract_spend_usd_total/renter"] <= 0 ||
		got["cshare_usage_contract_spend_usd_total/renter"] < spend {
		t.Fatalf("metrics %v; want 3 machines and the renter's spend, at least the %v org usage gave before", got, spend)
	}
}
