package config

import (
	"testing"

	"github.com/cshare/cshare/runtime/hw"
)

func TestDiskReserve(t *testing.T) {
	small := hw.Hardware{CPUs: 1, MemoryMB: 1000, DiskMB: 40}
	cases := []struct {
		name string
		yaml string
		hw   hw.Hardware
		want int64
	}{
		{"default", "", machine, DefaultDiskReserveMB},
		{"default on a small disk", "", small, 5},
		{"default on a tiny disk", "", hw.Hardware{DiskMB: 3}, 1},
		{"default with the disk unknown", "", hw.Hardware{}, DefaultDiskReserveMB},
		{"number", "disk:\n  reserve: 8\n", small, 8},
		{"size", "disk:\n  reserve: 1GB\n", machine, 1024},
		{"off", "disk:\n  reserve: 0\n", small, 0},
		{"a quarter", "disk:\n  reserve: 10\n", small, 10},
		{"null is the default", "disk:\n  reserve:\n", machine, DefaultDiskReserveMB},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := Parse([]byte(c.yaml))
			if err != nil {
				t.Fatal(err)
			}
			got, err := f.DiskReserveMB(c.hw)
			if err != nil || got != c.want {
				t.Fatalf("reserve %d, %v; want %d", got, err, c.want)
			}
			if _, err := f.Limits(c.hw); err != nil {
				t.Fatalf("limits: %v", err)
			}
		})
	}
}

func TestDiskReserveErrors(t *testing.T) {
	for _, c := range []struct{ name, yaml, want string }{
		{"negative", "disk:\n  reserve: -1\n", "disk.reserve: -1 MB is outside 0..1048576 (0 turns the reserve off) (line 2)"},
		{"huge", "disk:\n  reserve: 2TB\n", "disk.reserve: 2097152 MB is outside 0..1048576"},
		{"absurd", "disk:\n  reserve: 2PB\n", `disk.reserve: "2PB" is too large`},
		{"not a size", "disk:\n  reserve: lots\n", `disk.reserve: "lots" is not a size; give MB as a number (16384) or a size like "16GB" (line 2)`},
		{"float", "disk:\n  reserve: 1.5\n", "disk.reserve: 1.5 is not a whole number of MB"},
		{"unknown key", "disk:\n  ballast: 8\n", `unknown key "disk.ballast"; allowed under disk: reserve (line 2)`},
		{"list", "disk: [8]\n", "disk: is a list; expected a mapping with keys reserve"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.yaml))
			key := "disk.reserve"
			switch c.name {
			case "unknown key":
				key = "disk.ballast"
			case "list":
				key = "disk"
			}
			checkErr(t, err, key, c.want)
		})
	}
	// Beyond a quarter of the data dir's disk: refused when the node starts.
	f, err := Parse([]byte("disk:\n  reserve: 11\n"))
	if err != nil {
		t.Fatal(err)
	}
	small := hw.Hardware{CPUs: 1, MemoryMB: 1000, DiskMB: 40}
	want := "disk.reserve: 11 MB is more than a quarter of the data dir's disk (40 MB): cshare keeps the reserve free and as much again in its ballast file; allowed: 0..10 (line 2)"
	_, err = f.DiskReserveMB(small)
	checkErr(t, err, "disk.reserve", want)
	_, err = f.Limits(small)
	checkErr(t, err, "disk.reserve", want)
}
