package node

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/market"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/runtime"
)

func contractState(t *testing.T, n *Node, id string) api.ContractInfo {
	t.Helper()
	c, err := n.market.Contract(ctxT(t), id)
	if err != nil {
		t.Fatalf("contract %s: %v", id, err)
	}
	return c
}

// TestContractsOnTheHost: a renter's request for two GPUs is accepted by
// the host's node and runs there (a fake instance holding both GPUs); a
// second request for the same GPUs is rejected on every node; stop and
// start move the instance; only the host extends; after the host's node
// stops and finds a stray instance holding a GPU and its own instance
// stopped, it removes the stray before giving the GPUs back to the
// contract (the fake driver refuses a start on a held GPU).
func TestContractsOnTheHost(t *testing.T) {
	m := newMesh(t, meshConfig{n: 2, interval: 200 * time.Millisecond, slots: 2, recordGPUs: 2})
	m.formOrg()
	host, renter := m.nodes[0], m.nodes[1]
	var offer api.OfferInfo
	eventually(t, 20*time.Second, "the host can offer its two GPUs", func() string {
		var err error
		offer, err = host.market.CreateOffer(ctxT(t), api.OfferCreate{Price: "2", ForMS: market.Day})
		if err != nil {
			return err.Error()
		}
		if len(offer.GPUs) != 2 {
			return fmt.Sprintf("offer GPUs %v", offer.GPUs)
		}
		return ""
	})
	var a, b api.ContractInfo
	eventually(t, 20*time.Second, "the renter hears of the offer and rents both GPUs", func() string {
		var err error
		a, err = renter.market.CreateContract(ctxT(t), api.ContractCreate{Offer: offer.ID[:6], Image: "img", GPUs: 2, ForMS: market.Hour})
		if err != nil {
			return err.Error()
		}
		return ""
	})
	for _, bad := range []struct {
		req  api.ContractCreate
		code int
		want string
	}{
		{api.ContractCreate{Image: "img"}, 400, "give an offer ID"},
		{api.ContractCreate{Offer: "zzzzzz", Image: "img"}, 404, "no such offer"},
		{api.ContractCreate{Offer: offer.ID}, 400, "image"},
		{api.ContractCreate{Offer: offer.ID, Image: "img", GPUs: 3}, 400, "gpus: 3; the offer has 2 GPUs"},
		{api.ContractCreate{Offer: offer.ID, Image: "img", CPUs: 1}, 400, "cpus: the offer has GPUs"},
		{api.ContractCreate{Offer: offer.ID, Image: "img", ForMS: -1}, 400, "for"},
		{api.ContractCreate{Offer: offer.ID, Image: "img", Env: map[string]string{"1X": "y"}}, 400, "1X"},
	} {
		if _, err := renter.market.CreateContract(ctxT(t), bad.req); statusCode(err) != bad.code || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%+v: %v; want %d with %q", bad.req, err, bad.code, bad.want)
		}
	}
	b, err := renter.market.CreateContract(ctxT(t), api.ContractCreate{Offer: offer.ID, Image: "img", GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, mn := range m.nodes {
		eventually(t, 20*time.Second, mn.name+": the first runs, the second is rejected", func() string {
			ca, err1 := mn.market.Contract(ctxT(t), a.ID)
			cb, err2 := mn.market.Contract(ctxT(t), b.ID)
			if err1 != nil || err2 != nil {
				return fmt.Sprint(err1, err2)
			}
			if ca.State != market.StateRunning || cb.State != market.StateRejected || !strings.Contains(cb.Reason, a.ID) {
				return fmt.Sprintf("a %s, b %s (%s)", ca.State, cb.State, cb.Reason)
			}
			return ""
		})
	}
	instance := func(want bool) func() string {
		return func() string {
			s, running, ok := host.drv.ContractSpecOf(a.ID)
			if !ok || running != want {
				return fmt.Sprintf("instance exists %v running %v", ok, running)
			}
			if strings.Join(s.GPUs, ",") != "GPU-recorded-0,GPU-recorded-1" || s.CPUShares <= 0 || s.MemoryReservationBytes > s.MemoryBytes {
				return fmt.Sprintf("spec %+v", s)
			}
			return ""
		}
	}
	eventually(t, 20*time.Second, "the instance runs on the host", instance(true))
	if _, err := renter.market.ContractAction(ctxT(t), a.ID, api.ContractStop); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the instance stopped", instance(false))
	if _, err := host.market.ContractAction(ctxT(t), a.ID, api.ContractStart); statusCode(err) != 403 {
		t.Fatalf("the host starts the renter's contract: %v", err)
	}
	eventually(t, 20*time.Second, "the renter's start reached the host", func() string {
		if _, err := renter.market.ContractAction(ctxT(t), a.ID, api.ContractStart); err != nil {
			return err.Error()
		}
		return ""
	})
	eventually(t, 20*time.Second, "the instance runs again", instance(true))
	if _, err := renter.market.ExtendContract(ctxT(t), a.ID, api.ContractExtendRequest{ForMS: market.Hour}); statusCode(err) != 403 || !strings.Contains(err.Error(), "only the host") {
		t.Fatalf("the renter extends: %v", err)
	}
	before := contractState(t, host.Node, a.ID).End
	// Extensions past the ten years a contract lasts are refused at the
	// door, naming for_ms, however large (the sum must not overflow).
	for _, forMS := range []int64{math.MaxInt64, 1e18, market.MaxDuration} {
		var se *api.StatusError
		if _, err := host.market.ExtendContract(ctxT(t), a.ID, api.ContractExtendRequest{ForMS: forMS}); !errors.As(err, &se) || se.Code != 400 || se.Field != "for_ms" {
			t.Fatalf("the host extends by %d ms: %v; want a 400 naming for_ms", forMS, err)
		}
	}
	if got := contractState(t, host.Node, a.ID); got.End != before || got.State != market.StateRunning {
		t.Fatalf("refused extensions changed the contract: %s until %s", got.State, got.End)
	}
	if c, err := host.market.ExtendContract(ctxT(t), a.ID, api.ContractExtendRequest{ForMS: market.Hour}); err != nil || c.End == before {
		t.Fatalf("the host extends: %+v %v", c, err)
	}

	// The host's node goes down; meanwhile its instance stops and a stray
	// one (of a contract the ledger does not know) takes GPU 0.
	m.stop(0)
	ctx := ctxT(t)
	runs, _ := host.drv.ListContracts(ctx, renter.rep.Org(), host.drv.machine)
	for _, r := range runs {
		_ = host.drv.StopContract(ctx, r.ID, 0)
	}
	stray, err := host.drv.CreateContract(ctx, runtime.ContractSpec{Org: renter.rep.Org(), Machine: host.drv.machine, Contract: "cstray", Image: "img", GPUs: []string{"GPU-recorded-0"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := host.drv.StartContract(ctx, stray); err != nil {
		t.Fatal(err)
	}
	m.restart(0)
	eventually(t, 20*time.Second, "after the restart the contract runs again", instance(true))
	if _, _, ok := host.drv.ContractSpecOf("cstray"); ok {
		t.Fatal("the stray instance was not removed")
	}
	if _, err := renter.market.ContractAction(ctxT(t), a.ID, api.ContractRm); err != nil {
		t.Fatal(err)
	}
	// Usage at a given time is the same on both nodes once they agree.
	at := time.Now().Add(time.Hour).UnixMilli()
	eventually(t, 20*time.Second, "both nodes print the same usage", func() string {
		u0, err0 := host.market.ContractUsage(ctxT(t), at)
		u1, err1 := renter.market.ContractUsage(ctxT(t), at)
		if err0 != nil || err1 != nil || fmt.Sprint(u0) != fmt.Sprint(u1) || len(u0.Renters) != 1 || u0.Renters[0].Cost <= 0 || u0.Renters[0].Cost != u0.Hosts[0].Cost {
			return fmt.Sprintf("%+v %v / %+v %v", u0, err0, u1, err1)
		}
		return ""
	})
	eventually(t, 20*time.Second, "the removed contract's instance is gone", func() string {
		if _, _, ok := host.drv.ContractSpecOf(a.ID); ok {
			return "still there"
		}
		return ""
	})
}

// TestForeignRunsRemovedAtStart: a node removes, at start, the contract
// instances and runs of this machine labelled for an org it is not in
// (issue 27: a rental's container kept running after org delete, also
// after the host's node restarted).
func TestForeignRunsRemovedAtStart(t *testing.T) {
	m := newMesh(t, meshConfig{n: 1, interval: 250 * time.Millisecond, slots: 1, runFor: time.Hour})
	m.formOrg()
	ctx := ctxT(t)
	n := m.nodes[0].Node
	drv := m.nodes[0].drv
	mk := func(org, contract string) {
		if _, err := drv.CreateContract(ctx, runtime.ContractSpec{Org: org, Machine: n.idStr, Contract: contract, Image: "busybox"}); err != nil {
			t.Fatal(err)
		}
	}
	mk("bafyotherorg", "cforeign00001")
	if _, err := drv.Start(ctx, runtime.Spec{Org: "bafyotherorg", Machine: n.idStr, Job: "jforeign", Item: 1, Instance: "i1", Image: "busybox", Cmd: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	m.stop(0)
	m.restart(0)
	eventually(t, 20*time.Second, "the other org's instance and run removed at start", func() string {
		cs, _ := drv.ListContracts(ctx, "bafyotherorg", n.idStr)
		runs, _ := drv.List(ctx, map[string]string{runtime.LabelOrg: "bafyotherorg"})
		if len(cs) != 0 || len(runs) != 0 {
			return fmt.Sprintf("contract instances %+v, runs of the other org %d", cs, len(runs))
		}
		return ""
	})
}

// TestContractVisibility: a member sees the contracts they rent or host,
// admins and the owner every one; another member's contract is "no such
// contract" to show, stop, start, rm and extend alike, and its env never
// reaches them (issue 27: contract show gave another member's API_SECRET).
func TestContractVisibility(t *testing.T) {
	m := newMesh(t, meshConfig{n: 3, interval: 200 * time.Millisecond, slots: 1, recordGPUs: 1})
	m.formOrg()
	host, renter, other := m.nodes[0], m.nodes[1], m.nodes[2]
	ctx := ctxT(t)
	var offer api.OfferInfo
	eventually(t, 20*time.Second, "the host can offer", func() string {
		var err error
		offer, err = host.market.CreateOffer(ctx, api.OfferCreate{Price: "2", ForMS: market.Day})
		return errText(err)
	})
	var c api.ContractInfo
	eventually(t, 20*time.Second, "the renter rents", func() string {
		var err error
		c, err = renter.market.CreateContract(ctx, api.ContractCreate{Offer: offer.ID, Image: "img", GPUs: 1, ForMS: market.Hour,
			Env: map[string]string{"API_SECRET": "s3cr3t-canary"}, Cmd: []string{"run", "cmd-canary"}, OnStart: "echo onstart-canary"})
		return errText(err)
	})
	eventually(t, 20*time.Second, "every node has the contract", func() string {
		for _, mn := range m.nodes {
			if _, err := mn.Node.contractAny(c.ID); err != nil {
				return mn.name + ": " + err.Error()
			}
		}
		return ""
	})
	for _, mn := range []*meshNode{host, renter} {
		got, err := mn.market.Contract(ctx, c.ID)
		if err != nil || got.Env["API_SECRET"] != "s3cr3t-canary" {
			t.Fatalf("%s: contract show: %+v, %v", mn.name, got, err)
		}
		if cs, err := mn.market.Contracts(ctx); err != nil || len(cs) != 1 {
			t.Fatalf("%s: contract ls: %d, %v", mn.name, len(cs), err)
		}
	}
	if cs, err := other.market.Contracts(ctx); err != nil || len(cs) != 0 {
		t.Fatalf("another member's contract ls: %+v, %v; want none", cs, err)
	}
	_, err := other.market.Contract(ctx, c.ID)
	oneLine(t, "another member's contract show", err, http.StatusNotFound, "no such contract")
	for _, a := range []string{api.ContractStop, api.ContractStart, api.ContractRm} {
		_, err := other.market.ContractAction(ctx, c.ID, a)
		oneLine(t, "another member's contract "+a, err, http.StatusNotFound, "no such contract")
	}
	_, err = other.market.ExtendContract(ctx, c.ID, api.ContractExtendRequest{ForMS: market.Hour})
	oneLine(t, "another member's contract extend", err, http.StatusNotFound, "no such contract")
	// Promoted to admin, the same member sees it.
	if _, err := host.orgs.SetRole(ctx, other.Node.orgs.Person(), ledger.RoleAdmin); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "an admin sees the contract", func() string {
		got, err := other.market.Contract(ctx, c.ID)
		if err == nil && got.Env["API_SECRET"] != "s3cr3t-canary" {
			return fmt.Sprintf("env %v", got.Env)
		}
		return errText(err)
	})
}

// contractAny is contract id as the state has it, whoever may see it.
func (n *Node) contractAny(id string) (c ledger.Contract, err error) {
	err = fmt.Errorf("no contract %s", id)
	n.rep.View(func(st *ledger.State) {
		if x := st.Contracts[id]; x != nil {
			c, err = *x, nil
		}
	})
	return c, err
}

func errText(err error) string {
	if err != nil {
		return err.Error()
	}
	return ""
}
