package ledger

import (
	"fmt"

	"github.com/cshare/cshare/internal/text"
)

// Persons and machines (docs/design.md §11). A person has an Ed25519 key of
// their own (user.key); each machine acts for exactly one person, named by a
// Delegation the person signed and the machine carried in its genesis or
// machine.register entry. Roles belong to persons: an entry signed by a
// machine is attributed to the machine's person, whose role decides what it
// may do.
//
// A machine whose registration carries no delegation is its own person (its
// person ID is its machine ID): ledgers written before persons existed, and
// tests, fold as they did.

const (
	delegDomain   = "cshare-delegation-v1\x00"
	witnessDomain = "cshare-witness-v1\x00"
)

// GenesisOrg is the Org a genesis entry's delegation names: the org does not
// exist (has no ID) until the genesis entry is written, so the delegation is
// bound to the genesis nonce instead (see Delegation.Org).
func GenesisOrg(nonce []byte) string { return fmt.Sprintf("genesis:%x", nonce) }

// Delegation is a person's signed statement "machine Machine acts for me in
// org Org". Person is the person's raw Ed25519 public key; the person ID is
// its peer ID string. Name is the person's display name.
type Delegation struct {
	Person  []byte `cbor:"person"`
	Name    string `cbor:"name"`
	Machine string `cbor:"machine"`
	Org     string `cbor:"org"`
	Sig     []byte `cbor:"sig,omitempty"`
}

func (d Delegation) signedBytes() []byte {
	d.Sig = nil
	b, _ := encMode.Marshal(d)
	return b
}

// SignDelegation is the person's signer signing "machine acts for me in org".
func (s *Signer) SignDelegation(name, machine, org string) Delegation {
	d := Delegation{Person: s.pub, Name: name, Machine: machine, Org: org}
	d.Sig = s.SignBytes(delegDomain, d.signedBytes())
	return d
}

// PersonID is the person's ID (the peer ID of their key), or an error when
// the key is no Ed25519 public key.
func (d Delegation) PersonID() (string, error) { return peerIDOf(d.Person) }

// Check verifies the delegation for machine in org: signature, names, and
// that it names this machine and this org. It returns the person's ID.
func (d Delegation) Check(machine, org string) (string, error) {
	id, err := d.PersonID()
	if err != nil {
		return "", fmt.Errorf("%w: delegation person key: %v", ErrMalformed, err)
	}
	if d.Machine != machine {
		return "", fmt.Errorf("%w: delegation is for machine %s, not %s", ErrMalformed, d.Machine, machine)
	}
	if d.Org != org {
		return "", fmt.Errorf("%w: delegation is for org %q, not %q", ErrMalformed, d.Org, org)
	}
	if err := text.CheckName("person name", d.Name); err != nil {
		return "", fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if !VerifyDetached(d.Person, delegDomain, d.signedBytes(), d.Sig) {
		return "", fmt.Errorf("%w: delegation signature", ErrBadSignature)
	}
	return id, nil
}

// Witness is an approved machine's countersignature of a redemption: "on my
// clock, at Time (Unix ms), machine Joiner presented capability CapID of
// kind CapKind in org Org". The fold measures an invite's expiry against the
// witness's time, never the joiner's, so a joiner cannot back-date its
// redemption.
type Witness struct {
	Machine []byte `cbor:"machine"` // the witness's raw Ed25519 public key
	Org     string `cbor:"org"`
	CapKind string `cbor:"cap_kind"`
	CapID   string `cbor:"cap_id"`
	Joiner  string `cbor:"joiner"`
	Time    int64  `cbor:"time"`
	Sig     []byte `cbor:"sig,omitempty"`
}

func (w Witness) signedBytes() []byte {
	w.Sig = nil
	b, _ := encMode.Marshal(w)
	return b
}

// SignWitness countersigns joiner's redemption of c at now (Unix ms).
func (s *Signer) SignWitness(c Capability, joiner string, now int64) Witness {
	w := Witness{Machine: s.pub, Org: c.Org, CapKind: c.Kind, CapID: c.ID, Joiner: joiner, Time: now}
	w.Sig = s.SignBytes(witnessDomain, w.signedBytes())
	return w
}

// Check verifies the witness for joiner's redemption of c and returns the
// witnessing machine's ID. Whether that machine may witness is the fold's
// question (it must be approved at the redemption's position).
func (w Witness) Check(c Capability, joiner string) (string, error) {
	id, err := peerIDOf(w.Machine)
	if err != nil {
		return "", fmt.Errorf("%w: witness key: %v", ErrMalformed, err)
	}
	if w.Org != c.Org || w.CapKind != c.Kind || w.CapID != c.ID || w.Joiner != joiner {
		return "", fmt.Errorf("%w: witness is for another redemption", ErrMalformed)
	}
	if !VerifyDetached(w.Machine, witnessDomain, w.signedBytes(), w.Sig) {
		return "", fmt.Errorf("%w: witness signature", ErrBadSignature)
	}
	return id, nil
}

// NeedsWitness reports whether redeeming c needs a witness: every invite,
// and an org key with an expiry or a count of uses.
func NeedsWitness(c Capability) bool {
	return c.Kind == CapInvite || c.Expires != 0 || c.Uses != 0
}

// OrgTransfer makes another admin the owner; the owner becomes an admin.
type OrgTransfer struct {
	To string `cbor:"to"` // a person ID
}

// OrgDelete is the org's tombstone: after it, no entry has any effect, and
// every node stops the org's instances and leaves it. Name must be the org's
// name (the owner typed it to confirm).
type OrgDelete struct {
	Name string `cbor:"name"`
}

// MachineEvent is one change of a machine's ledger status, for its history
// (a machine removed and registered again shows what came before).
type MachineEvent struct {
	Status string `cbor:"status" json:"status"`
	Time   int64  `cbor:"time" json:"time"`                 // the entry's advisory time, Unix ms
	By     string `cbor:"by,omitempty" json:"by,omitempty"` // the person who made the change (registering: the machine's person)
	// Entry is the CID of the entry that made the change: for a removed
	// or rejected machine, what it is served of the ledger ends there.
	Entry string `cbor:"entry,omitempty" json:"entry,omitempty"`
}

// PersonOf is the person machine acts for ("" for an unknown machine).
func (s *State) PersonOf(machine string) string {
	if m := s.Machines[machine]; m != nil {
		return m.Owner
	}
	return ""
}

// PersonName is the name of person id: the member's, else the name a
// delegation of one of their machines gave, else (a machine that is its own
// person) the machine's name; "" if none is known.
func (s *State) PersonName(id string) string {
	if m := s.Members[id]; m != nil && m.Name != "" {
		return m.Name
	}
	if m := s.Machines[id]; m != nil && m.Owner == id {
		if m.OwnerName != "" && m.OwnerName != id {
			return m.OwnerName
		}
		return m.Name
	}
	for _, m := range s.Machines {
		if m.Owner == id && m.OwnerName != "" && m.OwnerName != id {
			return m.OwnerName
		}
	}
	return ""
}

// MachinesOf lists person's machines by ID, removed and rejected ones
// included (callers filter by Status).
func (s *State) MachinesOf(person string) []*Machine {
	var out []*Machine
	for _, m := range s.SortedMachines() {
		if m.Owner == person {
			out = append(out, m)
		}
	}
	return out
}

// CanSee reports whether person may see job j through the API, CLI and
// dashboard: its submitter, admins and the owner may. (Every machine holds
// the whole ledger; this governs what a node shows, not what it stores.)
func (s *State) CanSee(person string, j *Job) bool {
	return j.Submitter == person || s.IsAdmin(person)
}
