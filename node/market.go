package node

import (
	"context"

	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/node/marketsvc"
)

// newMarket builds the market service (package marketsvc) over this
// node's parts: after the replica, the host and the runtime.
func (n *Node) newMarket() *marketsvc.Service {
	return marketsvc.New(marketsvc.Deps{Ledger: n.rep, Signer: n.signer, Topics: n.host, Drivers: n.drivers,
		Machine: n.idStr, Person: n.person, Hardware: n.hw, RegistryAuth: n.registryAuth,
		DataDir: n.opts.DataDir, Interval: n.interval, Now: n.opts.Now, Log: n.log})
}

// The market's API (api.Service) is the market service's.

// CreateOffer signs an offer for part of this machine and publishes it.
func (n *Node) CreateOffer(ctx context.Context, req api.OfferCreate) (api.OfferInfo, error) {
	return n.market.CreateOffer(ctx, req)
}

// Offers lists the open offers that match query, sorted by order.
func (n *Node) Offers(ctx context.Context, query, order string) ([]api.OfferInfo, error) {
	return n.market.Offers(ctx, query, order)
}

// RemoveOffer withdraws one of this machine's offers.
func (n *Node) RemoveOffer(ctx context.Context, id string) (api.OfferInfo, error) {
	return n.market.RemoveOffer(ctx, id)
}

// CreateContract writes a contract.request for part of an offer.
func (n *Node) CreateContract(ctx context.Context, req api.ContractCreate) (api.ContractInfo, error) {
	return n.market.CreateContract(ctx, req)
}

// Contracts lists the contracts this machine's person may see.
func (n *Node) Contracts(ctx context.Context) ([]api.ContractInfo, error) {
	return n.market.Contracts(ctx)
}

// Contract shows one contract.
func (n *Node) Contract(ctx context.Context, ref string) (api.ContractInfo, error) {
	return n.market.Contract(ctx, ref)
}

// ContractAction is the renter's stop or start, or a removal.
func (n *Node) ContractAction(ctx context.Context, ref, action string) (api.ContractInfo, error) {
	return n.market.ContractAction(ctx, ref, action)
}

// ExtendContract is the host's extension of a contract's end.
func (n *Node) ExtendContract(ctx context.Context, ref string, req api.ContractExtendRequest) (api.ContractInfo, error) {
	return n.market.ExtendContract(ctx, ref, req)
}

// ContractUsage sums contract costs per renter and per host at at.
func (n *Node) ContractUsage(ctx context.Context, at int64) (api.ContractUsage, error) {
	return n.market.ContractUsage(ctx, at)
}
