package ledger

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/cshare/cshare/internal/regauth"
	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/ledger/jobspec"
	"github.com/cshare/cshare/market"
)

// Contracts in the fold (contract.go has their types): a member's request
// is opened by market.Open at its position; the other kinds are
// transitions of the market's state machine, each by the party it
// belongs to (see the package comment).

// ValidateContractSpec checks what a contract runs with the job spec's
// checks (package jobspec): the image as job submit checks it, the
// environment's names and values and the command's words (UTF-8, no NUL),
// and onstart. Errors name the field and echo at most 64 characters.
func ValidateContractSpec(s ContractSpec) error {
	if err := jobspec.CheckImage(s.Image); err != nil {
		return err
	}
	if len(s.Env) > 256 {
		return fmt.Errorf("env: %d variables; at most 256", len(s.Env))
	}
	if err := jobspec.CheckEnv(s.Env); err != nil {
		return err
	}
	for _, k := range sortedKeys(s.Env) {
		if len(s.Env[k]) > 4096 {
			return fmt.Errorf("env: %s's value is %d bytes; at most 4096", k, len(s.Env[k]))
		}
	}
	if len(s.Cmd) > 0 {
		if err := jobspec.CheckCmd(s.Cmd); err != nil {
			return err
		}
	}
	for _, a := range s.Cmd {
		if len(a) > 4096 {
			return fmt.Errorf("cmd: an argument of %d bytes; at most 4096", len(a))
		}
	}
	if len(s.OnStart) > 4096 {
		return fmt.Errorf("onstart: %d bytes; at most 4096", len(s.OnStart))
	}
	if strings.ContainsRune(s.OnStart, 0) || !utf8.ValidString(s.OnStart) {
		return fmt.Errorf("onstart: %s holds a NUL byte or bytes that are not UTF-8; allowed: UTF-8 text without NUL bytes", text.Echo(s.OnStart))
	}
	switch s.Mode {
	case "", ModeEntrypoint:
	case ModeSSH:
		if len(s.Cmd) > 0 || s.Entrypoint != "" {
			return fmt.Errorf("mode: ssh runs no command or entrypoint (it keeps the instance up itself); allowed: --onstart, or --mode entrypoint")
		}
	case ModeJupyter:
	default:
		return fmt.Errorf("mode: %s; allowed: entrypoint, ssh, jupyter", text.Echo(s.Mode))
	}
	if s.Direct && s.Mode != ModeJupyter {
		return fmt.Errorf("direct: only in mode jupyter; allowed: --direct with --mode jupyter")
	}
	if s.Entrypoint != "" {
		if err := jobspec.CheckCmd([]string{s.Entrypoint}); err != nil {
			return jobspec.Rename(err, "entrypoint")
		}
		if len(s.Entrypoint) > 4096 {
			return fmt.Errorf("entrypoint: %d bytes; at most 4096", len(s.Entrypoint))
		}
	}
	if s.SSHKey != "" {
		k, err := CheckSSHKey("ssh_key", s.SSHKey)
		if err != nil {
			return err
		}
		if k.Line != s.SSHKey {
			return fmt.Errorf("ssh_key: not in canonical form (type, base64, comment, single spaces)")
		}
	}
	if s.RegistryAuth != nil {
		return regauth.CheckSealed("registry_auth", s.RegistryAuth)
	}
	return nil
}

// foldContractRequest: a member requests part of an offer, for
// themselves. A request whose resources an earlier one holds, or whose
// offer the state does not bear out, is recorded rejected.
func foldContractRequest(st *State, e *Entry, author, person string) error {
	p := st.MarketPolicy()
	var r ContractRequest
	if err := DecodePayload(e.Payload, &r); err != nil {
		return err
	}
	o, err := r.Offer.Verify(st.Org)
	if err != nil {
		return err
	}
	if err := ValidateContractSpec(r.Spec); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if len(r.Nonce) > 64 {
		return fmt.Errorf("%w: nonce of %d bytes; at most 64", ErrMalformed, len(r.Nonce))
	}
	id := ContractIDFor(e)
	if st.Contracts[id] != nil {
		return fmt.Errorf("%w: contract %s exists", ErrMalformed, id)
	}
	host := st.PersonOf(o.Machine)
	c := market.Open(id, st.ContractSeq+1, o, person, host, r.Ask, e.Time, st.MarketContracts(o.Machine), p).NameMark(e.cid.String())
	if !c.Rejected {
		if err := st.CheckOffer(o); err != nil {
			c.Rejected, c.Reason, c.Alloc = true, err.Error(), market.Alloc{}
		}
	}
	st.ContractSeq++
	st.contractsW()[id] = &Contract{Contract: c, Spec: r.Spec, Machine: author}
	return nil
}

// foldContractAccept: the host machine accepts a request.
func foldContractAccept(st *State, e *Entry, author, _ string) error {
	var ref ContractRef
	if err := DecodePayload(e.Payload, &ref); err != nil {
		return err
	}
	return stepContract(st, e, ref.Contract, func(c *Contract) error { return hostMachineOnly(c, e, author) },
		func(c *Contract, p market.Policy) (market.Contract, error) {
			return market.Accept(c.Contract, e.Time, st.MarketContracts(c.Offer.Machine), p)
		})
}

// foldContractReject: the host machine rejects a request, with a reason.
func foldContractReject(st *State, e *Entry, author, _ string) error {
	var rej ContractReject
	if err := DecodePayload(e.Payload, &rej); err != nil {
		return err
	}
	return stepContract(st, e, rej.Contract, func(c *Contract) error { return hostMachineOnly(c, e, author) },
		func(c *Contract, p market.Policy) (market.Contract, error) {
			return market.Reject(c.Contract, rej.Reason, e.Time, p)
		})
}

// foldContractStop: the renter stops a running contract.
func foldContractStop(st *State, e *Entry, _, person string) error {
	var ref ContractRef
	if err := DecodePayload(e.Payload, &ref); err != nil {
		return err
	}
	return stepContract(st, e, ref.Contract, func(c *Contract) error { return renterOnly(c, e, person) },
		func(c *Contract, p market.Policy) (market.Contract, error) {
			return market.Stop(c.Contract, e.Time, p)
		})
}

// foldContractStart: the renter starts a stopped contract again.
func foldContractStart(st *State, e *Entry, _, person string) error {
	var ref ContractRef
	if err := DecodePayload(e.Payload, &ref); err != nil {
		return err
	}
	return stepContract(st, e, ref.Contract, func(c *Contract) error { return renterOnly(c, e, person) },
		func(c *Contract, p market.Policy) (market.Contract, error) {
			return market.Start(c.Contract, e.Time, st.MarketContracts(c.Offer.Machine), p)
		})
}

// foldContractExtend: the host (its person) moves a contract's end.
func foldContractExtend(st *State, e *Entry, _, person string) error {
	var ext ContractExtend
	if err := DecodePayload(e.Payload, &ext); err != nil {
		return err
	}
	return stepContract(st, e, ext.Contract,
		func(c *Contract) error {
			if person != c.Host {
				return denied("only the host may extend contract %s", c.ID)
			}
			return nil
		},
		func(c *Contract, p market.Policy) (market.Contract, error) {
			return market.Extend(c.Contract, ext.Duration, e.Time, p)
		})
}

// foldContractRm: the renter or the host removes a contract.
func foldContractRm(st *State, e *Entry, _, person string) error {
	var ref ContractRef
	if err := DecodePayload(e.Payload, &ref); err != nil {
		return err
	}
	return stepContract(st, e, ref.Contract,
		func(c *Contract) error {
			if person != c.Renter && person != c.Host {
				return denied("only the renter or the host may remove contract %s", c.ID)
			}
			return nil
		},
		func(c *Contract, p market.Policy) (market.Contract, error) {
			next, err := market.Remove(c.Contract, e.Time, p)
			if err != nil || person != c.Host || len(next.Marks) == len(c.Marks) {
				return next, err
			}
			// The host's own removal is its own acknowledgement.
			return market.Ack(next.NameMark(e.cid.String()), []string{e.cid.String()}, e.Time)
		})
}

// foldContractAck: the host machine acknowledges moves it carried out
// (started, stopped or removed the instance); billing counts from them
// within market.AckSlack of the moves (market/billing.go).
func foldContractAck(st *State, e *Entry, author, _ string) error {
	var p ContractMarks
	if err := decodeMarks(e, &p); err != nil {
		return err
	}
	return stepContract(st, e, p.Contract, func(c *Contract) error { return hostMachineOnly(c, e, author) },
		func(c *Contract, _ market.Policy) (market.Contract, error) {
			return market.Ack(c.Contract, p.Requests, e.Time)
		})
}

// foldContractWitness: a machine of a third person (neither the renter
// nor the host) says when it saw moves of a contract: the first witness
// of a move is its reference time (market/billing.go).
func foldContractWitness(st *State, e *Entry, _, person string) error {
	var p ContractMarks
	if err := decodeMarks(e, &p); err != nil {
		return err
	}
	return stepContract(st, e, p.Contract,
		func(c *Contract) error {
			if person == c.Renter || person == c.Host {
				return denied("the renter and the host may not witness contract %s: a third person's machine does", c.ID)
			}
			return nil
		},
		func(c *Contract, _ market.Policy) (market.Contract, error) {
			return market.Witness(c.Contract, p.Requests, e.Time)
		})
}

func decodeMarks(e *Entry, p *ContractMarks) error {
	if err := DecodePayload(e.Payload, p); err != nil {
		return err
	}
	if len(p.Requests) == 0 || len(p.Requests) > MaxMarksNamed {
		return fmt.Errorf("%w: %d moves named; allowed: 1..%d", ErrMalformed, len(p.Requests), MaxMarksNamed)
	}
	return nil
}

// hostMachineOnly: accept and reject are the host machine's own.
func hostMachineOnly(c *Contract, e *Entry, author string) error {
	if author != c.Offer.Machine {
		return denied("only the host machine %s may %s contract %s", c.Offer.Machine, strings.TrimPrefix(e.Kind, "contract."), c.ID)
	}
	return nil
}

// renterOnly: stop and start are the renter's.
func renterOnly(c *Contract, e *Entry, person string) error {
	if person != c.Renter {
		return denied("only the renter may %s contract %s", strings.TrimPrefix(e.Kind, "contract."), c.ID)
	}
	return nil
}

// stepContract is what the transitions share: contract id must exist, may
// says whether the entry's author may move it, and step moves it. A
// transition the contract's state does not allow has no effect
// (ErrMalformed).
func stepContract(st *State, e *Entry, id string, may func(*Contract) error, step func(*Contract, market.Policy) (market.Contract, error)) error {
	p := st.MarketPolicy()
	c := st.Contracts[id]
	if c == nil {
		return fmt.Errorf("%w: unknown contract %q", ErrMalformed, id)
	}
	if err := may(c); err != nil {
		return err
	}
	next, err := step(c, p)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	nc := *c
	nc.Contract = next.NameMark(e.cid.String()) // a move it made is named by its entry
	st.contractsW()[c.ID] = &nc
	return nil
}

// endContracts ends, at e's time and for reason, every contract that match
// picks (see market.Terminate): a request is rejected, an accepted
// contract deleted with its end moved back to e's time, so billing stops
// there and its host removes its instance. Contracts already deleted stay.
func endContracts(st *State, e *Entry, reason string, match func(*Contract) bool) {
	p := st.MarketPolicy()
	for id, c := range st.Contracts {
		if !match(c) {
			continue
		}
		next := market.Terminate(c.Contract, e.Time, reason, p)
		if next.Removed == c.Removed && next.Rejected == c.Rejected {
			continue // unchanged: already deleted or rejected
		}
		nc := *c
		nc.Contract = next
		st.contractsW()[id] = &nc
	}
}
