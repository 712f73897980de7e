package market

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// FuzzParseQuery: a query from a user or an API body never panics; an
// error is one line of class ErrQuery; a query that parses round-trips
// through its canonical form and can be matched.
func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{
		"gpus>=2", "gpus >= 2 price<1.5", "gpu_name==RTX_4090", "gpu_name in [RTX_4090,H100_SXM]",
		"gpu_name notin [a, b]", "memory>=64GB disk<1TB", "duration>36h", "reliability>0.9 machine!=m1",
		"cpus=any", "gpus==true", "foo<1", "gpus~2", "gpus in [", "price<=-1.5", "gpu_ram>=512MB",
		"gpus in [1,2,", "\x00", "gpus>=2\ncpus<4", "gpus=[1]",
	} {
		f.Add(s)
	}
	l := Listing{Offer: Offer{ID: "o", Machine: "m", GPUs: []GPU{{Name: "RTX 4090", MemoryMB: 24576}}, CPUs: 8, MemoryMB: 1024, Until: Day}, Reliability: 0.5}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := ParseQuery(s)
		if err != nil {
			if !errors.Is(err, ErrQuery) || strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("error %q: not one line of class ErrQuery", err)
			}
			return
		}
		q2, err := ParseQuery(q.String())
		if err != nil || !reflect.DeepEqual(q, q2) {
			t.Fatalf("%q -> %q does not round-trip: %v", s, q.String(), err)
		}
		q.Match(l, 0)
	})
}

// FuzzParseOrder: a sort order never panics, and round-trips.
func FuzzParseOrder(f *testing.F) {
	for _, s := range []string{"price", "price,gpus-", "gpus-,reliability", "", "x-", ",", "price--"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		os, err := ParseOrder(s)
		if err != nil {
			if !errors.Is(err, ErrQuery) || strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("error %q: not one line of class ErrQuery", err)
			}
			return
		}
		again, err := ParseOrder(FormatOrder(os))
		if err != nil || !reflect.DeepEqual(os, again) {
			t.Fatalf("%q does not round-trip: %v", s, err)
		}
	})
}

// FuzzParseMoney: amounts never panic, and print back to what they read.
func FuzzParseMoney(f *testing.F) {
	for _, s := range []string{"1.5", "0", ".5", "5.", "10000", "0.000001", "-1", "1e3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseMoney(s)
		if err != nil {
			return
		}
		if back, err := ParseMoney(FormatMoney(m)); err != nil || back != m {
			t.Fatalf("%q -> %d -> %q -> %d %v", s, m, FormatMoney(m), back, err)
		}
	})
}
