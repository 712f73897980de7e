package api

import (
	"context"
	"errors"
	"testing"

	"github.com/cshare/cshare/market"
)

func (marketStub) CreateOffer(context.Context, OfferCreate) (OfferInfo, error) {
	return OfferInfo{}, nil
}
func (marketStub) Offers(context.Context, string, string) ([]OfferInfo, error) { return nil, nil }
func (marketStub) RemoveOffer(context.Context, string) (OfferInfo, error)      { return OfferInfo{}, nil }

func TestOfferCreate(t *testing.T) {
	hw := market.Hardware{CPUs: 16, MemoryMB: 65536, DiskMB: 1 << 20, GPUs: []market.GPU{{Index: 0, Name: "T4", MemoryMB: 16384}, {Index: 1, Name: "T4", MemoryMB: 16384}}}
	i := func(v int64) *int64 { return &v }
	const now = 1_700_000_000_000
	o, err := OfferCreate{Price: "1.5", GPUs: i(1), CPUs: i(8), ForMS: market.Day}.Offer("m1", hw, now)
	if err != nil || len(o.GPUs) != 1 || o.GPUs[0].Index != 0 || o.CPUs != 8 || o.MemoryMB != 65536 || o.Price != 1_500_000 || o.Until != now+market.Day {
		t.Fatalf("%+v %v", o, err)
	}
	if o, err := (OfferCreate{Price: "2"}).Offer("m1", hw, now); err != nil || len(o.GPUs) != 2 || o.Until != now+DefaultOfferFor {
		t.Fatalf("defaults: %+v %v", o, err)
	}
	for _, tc := range []struct {
		req   OfferCreate
		field string
	}{
		{OfferCreate{}, "price"},
		{OfferCreate{Price: "x"}, "price"},
		{OfferCreate{Price: "1", DiskPrice: "-1"}, "disk_price"},
		{OfferCreate{Price: "1", GPUs: i(3)}, "gpus"},
		{OfferCreate{Price: "1", CPUs: i(0)}, "cpus"},
		{OfferCreate{Price: "1", MemoryMB: i(1 << 20)}, "memory_mb"},
		{OfferCreate{Price: "1", Until: now + 1, ForMS: 1}, "until"},
		{OfferCreate{Price: "1", Until: now - 1}, "until"},
	} {
		_, err := tc.req.Offer("m1", hw, now)
		var se *StatusError
		if !errors.As(err, &se) || se.Field != tc.field || se.Code != 400 {
			t.Errorf("%+v: %v, want a 400 about %s", tc.req, err, tc.field)
		}
	}
}
