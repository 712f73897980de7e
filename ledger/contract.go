package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"

	"github.com/cshare/cshare/internal/edkey"
	"github.com/cshare/cshare/market"
)

// Contract entry kinds (issue 18). Offers are not entries: they are
// gossiped, and a request carries the offer it takes, as its host machine
// signed it.
const (
	KindContractRequest = "contract.request" // the renter (a person)
	KindContractAccept  = "contract.accept"  // the host machine
	KindContractReject  = "contract.reject"  // the host machine
	KindContractStop    = "contract.stop"    // the renter
	KindContractStart   = "contract.start"   // the renter
	KindContractExtend  = "contract.extend"  // the host (its person)
	KindContractRm      = "contract.rm"      // the renter or the host
	KindContractAck     = "contract.ack"     // the host machine: moves carried out
	KindContractWitness = "contract.witness" // a third machine: moves seen
)

const offerDomain = "cshare-offer-v1\x00"

// SignedOffer is an offer as its host machine signed it: the offer (its
// ID empty: the ID is derived from these bytes), the org it is made in,
// and the machine's signature.
type SignedOffer struct {
	Org   string       `cbor:"org" json:"org"`
	Offer market.Offer `cbor:"offer" json:"offer"`
	Sig   []byte       `cbor:"sig,omitempty" json:"sig"`
}

func (so SignedOffer) signedBytes() []byte {
	so.Sig, so.Offer.ID = nil, ""
	b, _ := encMode.Marshal(so)
	return b
}

// OfferID is the ID of the offer in so: the first 16 hex digits of the
// SHA-256 of its signed bytes, so the same offer has the same ID on every
// node and a changed offer a new one.
func (so SignedOffer) OfferID() string {
	sum := sha256.Sum256(so.signedBytes())
	return hex.EncodeToString(sum[:8])
}

// SignOffer is the host machine's signer signing o for org. The offer's
// Machine is the signer's ID; its ID is set.
func (s *Signer) SignOffer(org string, o market.Offer) SignedOffer {
	o.Machine, o.ID = s.ID().String(), ""
	so := SignedOffer{Org: org, Offer: o}
	so.Sig = s.SignBytes(offerDomain, so.signedBytes())
	so.Offer.ID = so.OfferID()
	return so
}

// Verify checks the offer's own figures and that the machine it names
// signed it for org, and returns the offer with its ID. Whether that
// machine is an approved machine of the org with that hardware is the
// State's question (see CheckOffer).
func (so SignedOffer) Verify(org string) (market.Offer, error) {
	o := so.Offer
	o.ID = so.OfferID()
	if so.Org != org {
		return o, fmt.Errorf("%w: offer is for org %q, not %q", ErrMalformed, so.Org, org)
	}
	if err := o.Check(); err != nil {
		return o, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	k, err := edkey.OfID(o.Machine)
	if err != nil {
		return o, fmt.Errorf("%w: offer machine %q: %v", ErrMalformed, o.Machine, err)
	}
	if !k.Verify(append([]byte(offerDomain), so.signedBytes()...), so.Sig) {
		return o, fmt.Errorf("%w: offer signature", ErrBadSignature)
	}
	return o, nil
}

// CheckOffer checks a verified offer against the state: its machine is an
// approved machine of the org, and has what the offer includes.
func (s *State) CheckOffer(o market.Offer) error {
	m := s.Machines[o.Machine]
	if m == nil || m.Status != MachineApproved {
		return fmt.Errorf("offer machine %s is not an approved machine of the org", o.Machine)
	}
	return o.Fits(MarketHardware(m.Hardware))
}

// MarketHardware is a machine's hardware as the market sees it.
func MarketHardware(h Hardware) market.Hardware {
	out := market.Hardware{CPUs: h.CPUs, MemoryMB: h.MemoryMB, DiskMB: h.DiskMB}
	for _, g := range h.GPUs {
		out.GPUs = append(out.GPUs, market.GPU{Index: g.Index, Name: g.Name, MemoryMB: g.MemoryMB})
	}
	return out
}

// ContractSpec is what the renter runs: an image, its environment, a
// command (empty: the image's own), and a command run at start. SSHKey is
// a public key (canonical authorized_keys form, see CheckSSHKey) that
// enters this contract alone through the SSH gateway, beside the
// renter's own keys.
type ContractSpec struct {
	Image   string            `cbor:"image" json:"image"`
	Env     map[string]string `cbor:"env,omitempty" json:"env,omitempty"`
	Cmd     []string          `cbor:"cmd,omitempty" json:"cmd,omitempty"`
	OnStart string            `cbor:"onstart,omitempty" json:"onstart,omitempty"`
	SSHKey  string            `cbor:"ssh_key,omitempty" json:"ssh_key,omitempty"`
	// Mode is how the instance runs (ModeEntrypoint, "" the same,
	// ModeSSH or ModeJupyter); Entrypoint replaces the image's entrypoint
	// (Cmd are then its arguments), in the entrypoint and jupyter modes.
	Mode       string `cbor:"mode,omitempty" json:"mode,omitempty"`
	Entrypoint string `cbor:"entrypoint,omitempty" json:"entrypoint,omitempty"`
	// RegistryAuth is the renter's registry credentials for Image,
	// sealed with age to the host machine's recipient (internal/regauth):
	// only the host opens it, to pull Image. Never shown (json "-").
	RegistryAuth []byte `cbor:"registry_auth,omitempty" json:"-"`
	// Direct (jupyter mode only): the host publishes the instance's
	// Jupyter port on one of its own instead of proxying it.
	Direct bool `cbor:"direct,omitempty" json:"direct,omitempty"`
}

// Contract launch modes (issue 31).
const (
	// ModeEntrypoint runs the image's entrypoint (or Entrypoint) with
	// Cmd as its arguments, after OnStart if set.
	ModeEntrypoint = "entrypoint"
	// ModeSSH keeps the instance up by itself, for sessions through the
	// SSH gateway: OnStart runs at each start, and no command.
	ModeSSH = "ssh"
	// ModeJupyter runs Jupyter (the image's, or Entrypoint and Cmd) on
	// JupyterPort, after OnStart at each start, and keeps the instance up
	// by itself; the host's node proxies it over HTTPS with a token
	// (node/jupyter), or publishes the port with Direct.
	ModeJupyter = "jupyter"
	// JupyterPort is the container's port Jupyter listens on.
	JupyterPort = 8888
)

// ContractRequest is a renter's request for part of an offer.
type ContractRequest struct {
	Offer SignedOffer  `cbor:"offer"`
	Ask   market.Ask   `cbor:"ask"`
	Spec  ContractSpec `cbor:"spec"`
	Nonce []byte       `cbor:"nonce,omitempty"`
}

// ContractRef names a contract (accept, stop, start, rm).
type ContractRef struct {
	Contract string `cbor:"contract"`
}

// ContractReject is the host machine's refusal, with its reason.
type ContractReject struct {
	Contract string `cbor:"contract"`
	Reason   string `cbor:"reason"`
}

// ContractMarks names moves of a contract by the entries that requested
// them (contract.ack, contract.witness; market.Mark).
type ContractMarks struct {
	Contract string   `cbor:"contract"`
	Requests []string `cbor:"requests"`
}

// MaxMarksNamed bounds the moves one ack or witness names.
const MaxMarksNamed = 64

// ContractExtend moves a contract's end by Duration ms (the host's).
type ContractExtend struct {
	Contract string `cbor:"contract"`
	Duration int64  `cbor:"duration"`
}

// Contract is a rental as the State holds it: the market's record (state
// machine, allocation, times) and what the renter runs. Machine is the
// renter's machine that wrote the request.
type Contract struct {
	market.Contract
	Spec    ContractSpec `cbor:"spec" json:"spec"`
	Machine string       `cbor:"machine" json:"machine"`
}

// ContractIDFor derives a short, stable contract ID from the request entry.
func ContractIDFor(e *Entry) string {
	d := e.cid.Hash()
	if len(d) > 8 {
		d = d[len(d)-6:]
	}
	return "c" + hex.EncodeToString(d)
}

// MarketPolicy is the org's market settings as the market core takes them.
func (s *State) MarketPolicy() market.Policy { return s.Settings.Market }

// SortedContracts lists contracts in ledger order (of their requests).
func (s *State) SortedContracts() []*Contract {
	out := make([]*Contract, 0, len(s.Contracts))
	for _, c := range s.Contracts {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out
}

// MarketContracts is the market records of the contracts, in ledger order;
// with machine set, only that machine's (as host).
func (s *State) MarketContracts(machine string) []market.Contract {
	var out []market.Contract
	for _, c := range s.SortedContracts() {
		if machine == "" || c.Offer.Machine == machine {
			out = append(out, c.Contract)
		}
	}
	return out
}

// ContractReservations is what running contracts hold at now, per host
// machine (sorted by machine): SmartShare takes it out of the machine's
// slots and resources before it plans. Every node computes the same from
// the same State and now.
func ContractReservations(st *State, now int64) []market.Reservation {
	return market.Reservations(st.MarketContracts(""), now, st.MarketPolicy())
}

// cloneContracts deep-copies the contracts (for checkpoints).
func cloneContracts(in map[string]*Contract) map[string]*Contract {
	out := make(map[string]*Contract, len(in))
	for k, v := range in {
		c := *v
		c.Contract = v.Contract.Clone()
		c.Spec.Cmd = append([]string(nil), v.Spec.Cmd...) // Mode, Entrypoint: strings
		if v.Spec.Env != nil {
			c.Spec.Env = make(map[string]string, len(v.Spec.Env))
			for ek, ev := range v.Spec.Env {
				c.Spec.Env[ek] = ev
			}
		}
		out[k] = &c
	}
	return out
}

const withdrawDomain = "cshare-offer-withdraw-v1\x00"

// OfferWithdrawal is a host machine's signed statement that its offer is
// withdrawn (offer rm): receivers drop the offer.
type OfferWithdrawal struct {
	Org     string `cbor:"org"`
	Offer   string `cbor:"offer"`
	Machine string `cbor:"machine"`
	Sig     []byte `cbor:"sig,omitempty"`
}

func (w OfferWithdrawal) signedBytes() []byte {
	w.Sig = nil
	b, _ := encMode.Marshal(w)
	return b
}

// SignOfferWithdrawal is the host machine's signer withdrawing offer id.
func (s *Signer) SignOfferWithdrawal(org, id string) OfferWithdrawal {
	w := OfferWithdrawal{Org: org, Offer: id, Machine: s.ID().String()}
	w.Sig = s.SignBytes(withdrawDomain, w.signedBytes())
	return w
}

// Verify checks that the machine it names signed the withdrawal for org.
func (w OfferWithdrawal) Verify(org string) error {
	if w.Org != org {
		return fmt.Errorf("%w: withdrawal is for org %q, not %q", ErrMalformed, w.Org, org)
	}
	if w.Offer == "" || len(w.Offer) > 64 {
		return fmt.Errorf("%w: withdrawal names offer %q", ErrMalformed, w.Offer)
	}
	k, err := edkey.OfID(w.Machine)
	if err != nil {
		return fmt.Errorf("%w: withdrawal machine %q: %v", ErrMalformed, w.Machine, err)
	}
	if !k.Verify(append([]byte(withdrawDomain), w.signedBytes()...), w.Sig) {
		return fmt.Errorf("%w: withdrawal signature", ErrBadSignature)
	}
	return nil
}
