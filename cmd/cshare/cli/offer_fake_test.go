package cli

import (
	"context"
	"net/http"

	"github.com/cshare/cshare/market"
	"github.com/cshare/cshare/node/api"
)

func (f *fakeNode) CreateOffer(_ context.Context, req api.OfferCreate) (api.OfferInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "offer create "+req.Price)
	return api.OfferInfo{ID: "0123456789abcdef", Price: 1.5, GPUs: []market.GPU{}}, nil
}

func (f *fakeNode) Offers(_ context.Context, query, order string) ([]api.OfferInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "offer ls "+query+" -o "+order)
	return append([]api.OfferInfo{}, f.offers...), nil
}

func (f *fakeNode) RemoveOffer(_ context.Context, id string) (api.OfferInfo, error) {
	return api.OfferInfo{}, api.Errorf(http.StatusNotFound, "no offer %s of this machine", id)
}
