package market

import (
	"fmt"
	"testing"
)

func benchListings(n int) []Listing {
	ls := make([]Listing, n)
	for i := range ls {
		o := Offer{ID: fmt.Sprintf("o%06d", i), Machine: fmt.Sprintf("m%05d", i/4), CPUs: int64(8 + i%56), MemoryMB: int64(1+i%8) * 16384,
			DiskMB: 1 << 20, Price: int64(100_000 + (i*7919)%5_000_000), Until: int64(1+i%30) * Day}
		for g := range i % 9 {
			o.GPUs = append(o.GPUs, GPU{Index: int64(g), Name: []string{"RTX 4090", "H100 SXM", "A100"}[i%3], MemoryMB: 24576})
		}
		ls[i] = Listing{Offer: o, Reliability: float64(i%100) / 100}
	}
	return ls
}

// BenchmarkSearch10k: a three-term query sorted by two keys over 10,000
// listings (the node's offer ls).
func BenchmarkSearch10k(b *testing.B) {
	ls := benchListings(10_000)
	q, err := ParseQuery("gpus>=2 gpu_name in [RTX_4090,H100_SXM] reliability>0.5")
	if err != nil {
		b.Fatal(err)
	}
	orders, _ := ParseOrder("price,gpus-")
	b.ReportAllocs()
	for b.Loop() {
		Search(ls, q, orders, Hour)
	}
}

// BenchmarkOpen1k: folding one request among 1,000 contracts on its
// machine (the fold's cost per contract.request).
func BenchmarkOpen1k(b *testing.B) {
	o := Offer{ID: "o", Machine: "m", CPUs: 64, MemoryMB: 1 << 20, DiskMB: 1 << 30, Price: 1, Until: 1000 * Day}
	for g := range 8 {
		o.GPUs = append(o.GPUs, GPU{Index: int64(g), Name: "H100", MemoryMB: 81920})
	}
	var cs []Contract
	for i := range 1000 {
		c := Open(fmt.Sprintf("c%d", i), int64(i), o, "r", "h", Ask{GPUs: 1, DiskMB: 1}, int64(i), cs, Policy{})
		if c.Rejected {
			c, _ = Accept(c, int64(i), cs, Policy{}) // keeps the record realistic: most are done
		}
		c.Rejected, c.Accepted, c.End = false, true, int64(i)+1
		cs = append(cs, c)
	}
	b.ReportAllocs()
	for b.Loop() {
		Open("new", 1001, o, "r", "h", Ask{GPUs: 2}, 2000*Hour, cs, Policy{})
	}
}
