package market

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cshare/cshare/internal/regauth"
)

// Bounds on an offer's figures: an offer comes from the network, so every
// number is capped well below where arithmetic on it could overflow.
const (
	MaxGPUs        = 64
	MaxCPUs        = 1 << 16
	MaxMemoryMB    = 1 << 30          // 1 PiB
	MaxDiskMB      = 1 << 34          // 16 PiB
	MaxPrice       = 10_000_000_000   // $10,000 an hour, in micro-dollars
	MaxDuration    = 10 * 365 * Day   // ten years, in ms
	MaxTime        = 253402300799999  // 9999-12-31T23:59:59.999Z, in unix ms: the latest time the market takes
	MaxNameLen     = 64               // a GPU's name
	maxIDLen       = 128              // machine, person, offer and contract IDs
	Hour           = int64(3_600_000) // ms
	Day            = 24 * Hour
	Month          = 30 * Day // the month of a GB-month
	microPerDollar = 1_000_000
)

// ErrOffer is the class of an offer that does not check out.
var ErrOffer = errors.New("market: bad offer")

// GPU is one device an offer includes: the host's device index, its model
// name and its memory.
type GPU struct {
	Index    int64  `cbor:"index" json:"index"`
	Name     string `cbor:"name" json:"name"`
	MemoryMB int64  `cbor:"memory_mb" json:"memory_mb"`
}

// Offer is a host machine's signed proposal to rent part of itself: the
// devices and amounts it includes, the price, and the window in which
// contracts may run. Prices are in micro-dollars (Price per hour,
// DiskPrice per GB-month); times are unix milliseconds, durations
// milliseconds. The ID is the content address the signing layer gives the
// offer's bytes; the market core treats it as opaque.
type Offer struct {
	ID          string `cbor:"id" json:"id"`
	Machine     string `cbor:"machine" json:"machine"`
	GPUs        []GPU  `cbor:"gpus,omitempty" json:"gpus"`
	CPUs        int64  `cbor:"cpus" json:"cpus"`
	MemoryMB    int64  `cbor:"memory_mb" json:"memory_mb"`
	DiskMB      int64  `cbor:"disk_mb" json:"disk_mb"`
	Price       int64  `cbor:"price" json:"price"`
	DiskPrice   int64  `cbor:"disk_price" json:"disk_price"`
	Created     int64  `cbor:"created" json:"created"`
	Until       int64  `cbor:"until" json:"until"`
	MinDuration int64  `cbor:"min_duration" json:"min_duration"`
	// AgeRecipient is the host machine's age X25519 public key ("age1..."):
	// a renter seals registry credentials to it (internal/regauth).
	// Omitted when empty, so an offer without one signs as before.
	AgeRecipient string `cbor:"age_recipient,omitempty" json:"age_recipient,omitempty"`
}

// Hardware is what the host machine has, as its ledger record declares
// it: an offer can only include what is there.
type Hardware struct {
	CPUs     int64
	MemoryMB int64
	DiskMB   int64
	GPUs     []GPU
}

func offerErr(field, format string, a ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrOffer, field, fmt.Sprintf(format, a...))
}

// Check reports the first thing wrong with the offer's own figures, as one
// line naming the field and what is allowed. It does not look at the
// machine (see Fits) or the clock (see Live).
func (o Offer) Check() error {
	if err := checkID("machine", o.Machine); err != nil {
		return fmt.Errorf("%w: %w", ErrOffer, err)
	}
	if len(o.GPUs) > MaxGPUs {
		return offerErr("gpus", "%d devices; at most %d", len(o.GPUs), MaxGPUs)
	}
	for i, g := range o.GPUs {
		if g.Index < 0 || g.Index >= 1024 {
			return offerErr("gpus", "device index %d; allowed 0..1023", g.Index)
		}
		if i > 0 && g.Index <= o.GPUs[i-1].Index {
			return offerErr("gpus", "device indices must be distinct and ascending (%d after %d)", g.Index, o.GPUs[i-1].Index)
		}
		if g.Name == "" || len(g.Name) > MaxNameLen || !printable(g.Name) {
			return offerErr("gpus", "device %d name %q; 1..%d printable characters", g.Index, g.Name, MaxNameLen)
		}
		if g.MemoryMB < 0 || g.MemoryMB > MaxMemoryMB {
			return offerErr("gpus", "device %d memory %d MB; allowed 0..%d", g.Index, g.MemoryMB, MaxMemoryMB)
		}
	}
	if o.CPUs < 1 || o.CPUs > MaxCPUs {
		return offerErr("cpus", "%d; allowed 1..%d", o.CPUs, MaxCPUs)
	}
	if o.MemoryMB < 1 || o.MemoryMB > MaxMemoryMB {
		return offerErr("memory_mb", "%d; allowed 1..%d", o.MemoryMB, MaxMemoryMB)
	}
	if o.DiskMB < 0 || o.DiskMB > MaxDiskMB {
		return offerErr("disk_mb", "%d; allowed 0..%d", o.DiskMB, MaxDiskMB)
	}
	if o.Price < 0 || o.Price > MaxPrice {
		return offerErr("price", "%s; allowed 0..%s per hour", FormatMoney(o.Price), FormatMoney(MaxPrice))
	}
	if o.DiskPrice < 0 || o.DiskPrice > MaxPrice {
		return offerErr("disk_price", "%s; allowed 0..%s per GB-month", FormatMoney(o.DiskPrice), FormatMoney(MaxPrice))
	}
	if o.Created < 0 || o.Created > MaxTime {
		return offerErr("created", "%d; a unix time in ms, up to the year 9999", o.Created)
	}
	if o.Until <= o.Created || o.Until-o.Created > MaxDuration {
		return offerErr("until", "must be after created and at most 10 years later")
	}
	if o.MinDuration < 0 || o.MinDuration > o.Until-o.Created {
		return offerErr("min_duration", "%s; allowed 0..%s (the offer's window)", FormatDuration(o.MinDuration), FormatDuration(o.Until-o.Created))
	}
	if o.AgeRecipient != "" {
		if err := regauth.CheckRecipient("age_recipient", o.AgeRecipient); err != nil {
			return fmt.Errorf("%w: %w", ErrOffer, err)
		}
	}
	return nil
}

// Fits reports whether the host machine has what the offer includes: every
// GPU, by index, name and memory, and at least the CPUs, memory and disk.
func (o Offer) Fits(hw Hardware) error {
	for _, g := range o.GPUs {
		found := false
		for _, h := range hw.GPUs {
			if h.Index == g.Index {
				found = true
				if h.Name != g.Name || h.MemoryMB != g.MemoryMB {
					return offerErr("gpus", "device %d is %s with %d MB on the machine, not %s with %d MB", g.Index, h.Name, h.MemoryMB, g.Name, g.MemoryMB)
				}
			}
		}
		if !found {
			return offerErr("gpus", "the machine has no device %d", g.Index)
		}
	}
	if o.CPUs > hw.CPUs {
		return offerErr("cpus", "%d; the machine has %d", o.CPUs, hw.CPUs)
	}
	if o.MemoryMB > hw.MemoryMB {
		return offerErr("memory_mb", "%d; the machine has %d", o.MemoryMB, hw.MemoryMB)
	}
	if o.DiskMB > hw.DiskMB {
		return offerErr("disk_mb", "%d; the machine has %d", o.DiskMB, hw.DiskMB)
	}
	return nil
}

// Live reports whether the offer may still be rented at now.
func (o Offer) Live(now int64) bool { return o.Created <= now && now < o.Until }

// GPUName is the offer's GPU model: the first device's name ("" without
// GPUs; an offer mixing models is listed by its first).
func (o Offer) GPUName() string {
	if len(o.GPUs) == 0 {
		return ""
	}
	return o.GPUs[0].Name
}

// GPUMemoryMB is the smallest memory among the offer's GPUs (0 without).
func (o Offer) GPUMemoryMB() int64 {
	var m int64
	for i, g := range o.GPUs {
		if i == 0 || g.MemoryMB < m {
			m = g.MemoryMB
		}
	}
	return m
}

// ShmMB is the offer's pool of shared memory (/dev/shm), half its memory,
// shared out like memory.
func (o Offer) ShmMB() int64 { return o.MemoryMB / 2 }

func checkID(field, id string) error {
	if id == "" || len(id) > maxIDLen {
		return fmt.Errorf("%s: %q; 1..%d characters", field, id, maxIDLen)
	}
	for _, r := range id {
		if r <= ' ' || r > '~' {
			return fmt.Errorf("%s: %q; printable ASCII without spaces", field, id)
		}
	}
	return nil
}

func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < ' ' || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return false
		}
	}
	return true
}

// FormatMoney prints micro-dollars as dollars, with at least two decimals
// and no trailing zeros beyond them: 1500000 is "1.50", 1234 is "0.001234".
func FormatMoney(m int64) string {
	sign := ""
	u := uint64(m)
	if m < 0 {
		sign, u = "-", uint64(-m)
	}
	frac := strings.TrimRight(fmt.Sprintf("%06d", u%microPerDollar), "0")
	for len(frac) < 2 {
		frac += "0"
	}
	return sign + strconv.FormatUint(u/microPerDollar, 10) + "." + frac
}

// ParseMoney reads a non-negative amount of dollars ("1.5", "0.25", "3")
// into micro-dollars; at most six decimals and MaxPrice.
func ParseMoney(s string) (int64, error) {
	whole, frac, dot := strings.Cut(s, ".")
	if whole == "" && (!dot || frac == "") || !digits(whole) || !digits(frac) || len(frac) > 6 || len(whole) > 6 {
		return 0, fmt.Errorf("%q: dollars like 1.5, at most 6 decimals and %s", s, FormatMoney(MaxPrice))
	}
	var w, f int64
	if whole != "" {
		w, _ = strconv.ParseInt(whole, 10, 64)
	}
	if frac != "" {
		f, _ = strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64)
	}
	m := w*microPerDollar + f
	if m > MaxPrice {
		return 0, fmt.Errorf("%q: at most %s", s, FormatMoney(MaxPrice))
	}
	return m, nil
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// FormatDuration prints milliseconds the way the market's tables and
// errors do: "36h", "1h30m", "45s", "0s".
func FormatDuration(ms int64) string {
	if ms == 0 {
		return "0s"
	}
	sign := ""
	if ms < 0 {
		sign, ms = "-", -ms
	}
	var b strings.Builder
	b.WriteString(sign)
	for _, u := range []struct {
		n    int64
		name string
	}{{Hour, "h"}, {60_000, "m"}, {1000, "s"}, {1, "ms"}} {
		if ms >= u.n {
			fmt.Fprintf(&b, "%d%s", ms/u.n, u.name)
			ms %= u.n
		}
	}
	return b.String()
}
