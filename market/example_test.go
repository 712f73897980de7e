package market_test

import (
	"fmt"

	"github.com/cshare/cshare/market"
)

func Example() {
	o := market.Offer{
		ID: "o1", Machine: "m1", CPUs: 16, MemoryMB: 65536, DiskMB: 512000,
		GPUs:  []market.GPU{{Index: 0, Name: "RTX 4090", MemoryMB: 24576}, {Index: 1, Name: "RTX 4090", MemoryMB: 24576}},
		Price: 1_500_000, Until: 240 * market.Hour,
	}
	q, err := market.ParseQuery("gpus>=2 gpu_name==RTX_4090 price<2")
	fmt.Println(q.Match(market.Listing{Offer: o}, 0), err)
	_, err = market.ParseQuery("gpus>=two")
	fmt.Println(err)

	var p market.Policy
	a := market.Open("c1", 1, o, "alice", "bob", market.Ask{GPUs: 1, Duration: 24 * market.Hour}, 0, nil, p)
	b := market.Open("c2", 2, o, "carol", "bob", market.Ask{GPUs: 2}, 0, []market.Contract{a}, p)
	fmt.Println(a.State(0, p), market.FormatGPUs(a.Alloc.GPUs), a.Alloc.CPUMilli, a.Alloc.MemoryMB)
	fmt.Println(b.State(0, p)+":", b.Why(0, p))
	a, _ = market.Accept(a, market.Hour, []market.Contract{a, b}, p)
	fmt.Println(a.State(2*market.Hour, p), "$"+market.FormatMoney(a.Cost(2*market.Hour).Total))
	fmt.Println(a.State(25*market.Hour, p), a.State(73*market.Hour, p))
	// Output:
	// true <nil>
	// offer query: "gpus>=two": gpus takes a number, like 2, not two
	// requested 0 8000 32768
	// rejected: 2 GPUs asked, 1 free (held: GPU 0 by c1)
	// running $1.50
	// expired deleted
}
