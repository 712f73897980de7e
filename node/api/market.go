package api

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"

	"github.com/cshare/cshare/ledger/jobspec"
	"github.com/cshare/cshare/market"
)

// OfferCreate is POST /v1/offers: an offer for part of this machine. Nil
// amounts mean all the machine has (GPUs: its lowest-indexed devices);
// Until (unix ms) or ForMS (from now) sets its end, 7 days when neither.
type OfferCreate struct {
	Price         string `json:"price"`                // dollars per hour, like "1.5"
	DiskPrice     string `json:"disk_price,omitempty"` // dollars per GB-month
	GPUs          *int64 `json:"gpus,omitempty"`
	CPUs          *int64 `json:"cpus,omitempty"`
	MemoryMB      *int64 `json:"memory_mb,omitempty"`
	DiskMB        *int64 `json:"disk_mb,omitempty"`
	Until         int64  `json:"until,omitempty"`
	ForMS         int64  `json:"for_ms,omitempty"`
	MinDurationMS int64  `json:"min_duration_ms,omitempty"`
}

// DefaultOfferFor is an offer's window when the request sets no end.
const DefaultOfferFor = 7 * market.Day

// Offer checks the request against machine's hardware at now and builds
// the offer (its ID is the signer's to set). Errors are 400s naming the
// field.
func (r OfferCreate) Offer(machine string, hw market.Hardware, now int64) (market.Offer, error) {
	bad := func(field, format string, a ...any) (market.Offer, error) {
		return market.Offer{}, FieldErrorf(http.StatusBadRequest, field, field+": "+format, a...)
	}
	o := market.Offer{Machine: machine, CPUs: hw.CPUs, MemoryMB: hw.MemoryMB, DiskMB: hw.DiskMB, Created: now, MinDuration: r.MinDurationMS}
	var err error
	if r.Price == "" {
		return bad("price", "required: dollars per hour, like 1.5")
	}
	if o.Price, err = market.ParseMoney(r.Price); err != nil {
		return bad("price", "%v", err)
	}
	if r.DiskPrice != "" {
		if o.DiskPrice, err = market.ParseMoney(r.DiskPrice); err != nil {
			return bad("disk_price", "%v", err)
		}
	}
	gpus := int64(len(hw.GPUs))
	if r.GPUs != nil {
		if *r.GPUs < 0 || *r.GPUs > gpus {
			return bad("gpus", "%d; this machine has %d GPUs: allowed 0..%d", *r.GPUs, gpus, gpus)
		}
		gpus = *r.GPUs
	}
	sorted := slices.SortedFunc(slices.Values(hw.GPUs), func(a, b market.GPU) int { return cmp.Compare(a.Index, b.Index) })
	o.GPUs = append(o.GPUs, sorted[:gpus]...)
	for _, x := range []struct {
		field string
		v     *int64
		dst   *int64
		has   int64
		min   int64
	}{{"cpus", r.CPUs, &o.CPUs, hw.CPUs, 1}, {"memory_mb", r.MemoryMB, &o.MemoryMB, hw.MemoryMB, 1}, {"disk_mb", r.DiskMB, &o.DiskMB, hw.DiskMB, 0}} {
		if x.v == nil {
			continue
		}
		if *x.v < x.min || *x.v > x.has {
			if x.field == "cpus" {
				return bad(x.field, "%d; this machine has %d: allowed %d..%d", *x.v, x.has, x.min, x.has)
			}
			return bad(x.field, "%s; this machine has %s: allowed %s to %s", jobspec.FormatMB(*x.v), jobspec.FormatMB(x.has),
				jobspec.FormatMB(x.min), jobspec.FormatMB(x.has))
		}
		*x.dst = *x.v
	}
	switch {
	case r.Until != 0 && r.ForMS != 0:
		return bad("until", "give until or for_ms, not both")
	case r.Until != 0:
		if r.Until <= now || r.Until-now > market.MaxDuration {
			return bad("until", "%d; the offer must end after now and within 10 years", r.Until)
		}
		o.Until = r.Until
	case r.ForMS != 0:
		if r.ForMS < 0 || r.ForMS > market.MaxDuration {
			return bad("for_ms", "%s; allowed: 1 ms to 10 years", msText(r.ForMS))
		}
		o.Until = now + r.ForMS
	default:
		o.Until = now + DefaultOfferFor
	}
	if r.MinDurationMS < 0 || r.MinDurationMS > o.Until-now {
		return bad("min_duration_ms", "%s; allowed: 0 to %s (the offer's window)", msText(r.MinDurationMS), market.FormatDuration(o.Until-now))
	}
	if err := o.Check(); err != nil {
		return market.Offer{}, BadRequest(err)
	}
	return o, nil
}

// msText renders a duration in ms from a request: as a duration when it
// is one (0 to MaxDuration), else the number as sent.
func msText(ms int64) string {
	if ms < 0 || ms > market.MaxDuration {
		return fmt.Sprintf("%d ms", ms)
	}
	return market.FormatDuration(ms)
}

// OfferInfo is an offer as `offer ls` shows it. Prices are dollars
// (price per hour, disk_price per GB-month); times unix ms; duration_ms is
// what is left of its window.
type OfferInfo struct {
	ID            string       `json:"id"`
	Machine       string       `json:"machine"`
	MachineName   string       `json:"machine_name"`
	Mine          bool         `json:"mine"`
	GPUs          []market.GPU `json:"gpus"`
	GPUName       string       `json:"gpu_name"`
	CPUs          int64        `json:"cpus"`
	MemoryMB      int64        `json:"memory_mb"`
	DiskMB        int64        `json:"disk_mb"`
	Price         float64      `json:"price"`
	DiskPrice     float64      `json:"disk_price"`
	Created       int64        `json:"created"`
	Until         int64        `json:"until"`
	DurationMS    int64        `json:"duration_ms"`
	MinDurationMS int64        `json:"min_duration_ms"`
	Reliability   float64      `json:"reliability"`
	// AgeRecipient is the host's age X25519 public key, as it signed it in
	// the offer: contract create --registry-auth seals to it.
	AgeRecipient string `json:"age_recipient,omitempty"`
}

// OfferInfoOf is o's OfferInfo at now.
func OfferInfoOf(o market.Offer, machineName string, mine bool, now int64) OfferInfo {
	gpus := o.GPUs
	if gpus == nil {
		gpus = []market.GPU{}
	}
	return OfferInfo{ID: o.ID, Machine: o.Machine, MachineName: machineName, Mine: mine, GPUs: gpus, GPUName: o.GPUName(),
		CPUs: o.CPUs, MemoryMB: o.MemoryMB, DiskMB: o.DiskMB, Price: float64(o.Price) / 1e6, DiskPrice: float64(o.DiskPrice) / 1e6,
		Created: o.Created, Until: o.Until, DurationMS: max(0, o.Until-now), MinDurationMS: o.MinDuration, AgeRecipient: o.AgeRecipient}
}
