package ledger

import (
	"encoding/hex"
	"fmt"

	"github.com/fxamacker/cbor/v2"
	"github.com/ipfs/go-cid"

	"github.com/cshare/cshare/market"
)

// Checkpoints (issue 29, docs/design.md §5.6): an admin machine writes a
// ledger.checkpoint entry every so often, naming the hash of the State
// folded from the entry's ancestors. A checkpoint is a barrier in the total
// order (log_barrier.go): its ancestors sort before it and every other
// entry after it, so the State at a barrier never changes again and a new
// node can start from it.

// KindCheckpoint is a checkpoint entry.
const KindCheckpoint = "ledger.checkpoint"

// Checkpoint is a ledger.checkpoint's payload.
type Checkpoint struct {
	// Prev is the CID of the checkpoint this one follows in the chain of
	// barriers, "" for the first. It must be an ancestor.
	Prev string `cbor:"prev,omitempty"`
	// Entries is how many entries the named State folded (its Applied +
	// Ineffective): the checkpoint's ancestors.
	Entries int64 `cbor:"entries"`
	// Hash is State.Hash() of that State, 64 lowercase hex digits.
	Hash string `cbor:"hash"`
}

// CheckCheckpoint checks a checkpoint payload's form.
func CheckCheckpoint(p Checkpoint) error {
	if len(p.Hash) != 64 {
		return fmt.Errorf("%w: checkpoint hash: %d characters; allowed: 64 lowercase hex digits", ErrMalformed, len(p.Hash))
	}
	if b, err := hex.DecodeString(p.Hash); err != nil || hex.EncodeToString(b) != p.Hash {
		return fmt.Errorf("%w: checkpoint hash: not 64 lowercase hex digits", ErrMalformed)
	}
	if p.Entries < 1 {
		return fmt.Errorf("%w: checkpoint entries: %d; allowed: 1 or more", ErrMalformed, p.Entries)
	}
	if p.Prev != "" {
		if _, err := cid.Decode(p.Prev); err != nil {
			return fmt.Errorf("%w: checkpoint prev: %v", ErrMalformed, err)
		}
	}
	return nil
}

// foldCheckpoint: an admin's checkpoint. It changes nothing but the count
// of entries; its barrier (the order) is the Log's. The fold checks the
// count it names against the State before it (which is the fold of its
// ancestors, the barrier rule): a cheap check that the author counted what
// it hashed. The hash itself is checked by whoever loads the snapshot.
func foldCheckpoint(st *State, e *Entry, _, person string) error {
	var p Checkpoint
	if err := DecodePayload(e.Payload, &p); err != nil {
		return err
	}
	if err := CheckCheckpoint(p); err != nil {
		return err
	}
	if err := needAdmin(st, person, "write a checkpoint"); err != nil {
		return err
	}
	if n := st.Applied + st.Ineffective; p.Entries != n {
		return fmt.Errorf("%w: checkpoint names %d entries; its ancestors are %d", ErrMalformed, p.Entries, n)
	}
	archiveJobs(st, e.Time) // archive.go
	return nil
}

// stateDecMode decodes a State snapshot: no tags, no indefinite lengths, no
// duplicate or unknown keys; the sizes a large org's State reaches (the
// bytes are bounded by the caller, MaxStateSize).
var stateDecMode = func() cbor.DecMode {
	m, err := cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		MaxNestedLevels:   24,
		MaxArrayElements:  1 << 30,
		MaxMapPairs:       1 << 30,
		IndefLength:       cbor.IndefLengthForbidden,
		TagsMd:            cbor.TagsForbidden,
		ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
		UTF8:              cbor.UTF8DecodeInvalid, // OrderKey.CID is a binary key string
	}.DecMode()
	if err != nil {
		panic(err)
	}
	return m
}()

// MaxStateSize bounds a State snapshot a node accepts: 4 GiB.
const MaxStateSize = 4 << 30

// EncodeState is the State's canonical encoding: the bytes State.Hash
// hashes.
func EncodeState(st *State) ([]byte, error) { return encMode.Marshal(st) }

// DecodeState decodes a State from its canonical encoding. It accepts only
// bytes that EncodeState gives back unchanged, so the decoded State has
// the hash of b; anything else is ErrMalformed.
func DecodeState(b []byte) (*State, error) {
	if len(b) > MaxStateSize {
		return nil, fmt.Errorf("%w: state snapshot of %d bytes; at most %d", ErrTooLarge, len(b), MaxStateSize)
	}
	st := &State{left: &leftJobs{}}
	if err := stateDecMode.Unmarshal(b, st); err != nil {
		return nil, fmt.Errorf("%w: state snapshot: %v", ErrMalformed, err)
	}
	again, err := encMode.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("%w: state snapshot: %v", ErrMalformed, err)
	}
	if string(again) != string(b) {
		return nil, fmt.Errorf("%w: state snapshot is not in canonical form", ErrMalformed)
	}
	if err := checkState(st); err != nil {
		return nil, err
	}
	return st, nil
}

// checkState refuses what the fold would trip on: a table NewState makes
// that is missing (null), or a null record in one. The State's content is
// as good as the signed hash it matches.
func checkState(st *State) error {
	if st.Members == nil || st.Machines == nil || st.CapUses == nil || st.Jobs == nil || st.Revoked == nil || st.Contracts == nil {
		return fmt.Errorf("%w: state snapshot: a table is null", ErrMalformed)
	}
	for k, v := range st.Members {
		if v == nil {
			return fmt.Errorf("%w: state snapshot: member %q is null", ErrMalformed, k)
		}
	}
	for k, v := range st.Machines {
		if v == nil {
			return fmt.Errorf("%w: state snapshot: machine %q is null", ErrMalformed, k)
		}
	}
	for k, v := range st.Jobs {
		if v == nil {
			return fmt.Errorf("%w: state snapshot: job %q is null", ErrMalformed, k)
		}
	}
	for k, v := range st.Revoked {
		if v == nil {
			return fmt.Errorf("%w: state snapshot: revocation %q is null", ErrMalformed, k)
		}
	}
	for k, v := range st.Contracts {
		if v == nil {
			return fmt.Errorf("%w: state snapshot: contract %q is null", ErrMalformed, k)
		}
	}
	for k, v := range st.Datasets {
		if v == nil {
			return fmt.Errorf("%w: state snapshot: dataset %q is null", ErrMalformed, k)
		}
	}
	return nil
}

// LedgerSettings are the org's ledger settings (org set ledger.*).
type LedgerSettings struct {
	// CheckpointEvery is entries between checkpoints; CheckpointEveryMS
	// the time instead (at most one of them is set; neither:
	// DefaultCheckpointEvery entries).
	CheckpointEvery   int64 `cbor:"checkpoint_every,omitempty"`
	CheckpointEveryMS int64 `cbor:"checkpoint_every_ms,omitempty"`
	// RetainMS: entries below the newest checkpoint every online machine
	// has passed, and older than this, are pruned (0: kept on disk).
	RetainMS int64 `cbor:"retain_ms,omitempty"`
}

// Bounds of the ledger settings.
const (
	DefaultCheckpointEvery = 10_000
	MinCheckpointEvery     = 100
	MaxCheckpointEvery     = 10_000_000
	MinCheckpointEveryMS   = 60_000              // a minute
	MaxCheckpointEveryMS   = 30 * 24 * 3_600_000 // 30 days
	MinRetainMS            = 3_600_000           // an hour
)

// CheckLedgerSettings checks the ledger settings; the error names the
// setting as org set takes it.
func CheckLedgerSettings(s LedgerSettings) error {
	switch {
	case s.CheckpointEvery != 0 && s.CheckpointEveryMS != 0:
		return fmt.Errorf("ledger.checkpoint_every: both a count of entries and a time; allowed: one of them")
	case s.CheckpointEvery != 0 && (s.CheckpointEvery < MinCheckpointEvery || s.CheckpointEvery > MaxCheckpointEvery):
		return fmt.Errorf("ledger.checkpoint_every: %d entries; allowed: %d .. %d entries, or a time from 1m to 30d", s.CheckpointEvery, MinCheckpointEvery, MaxCheckpointEvery)
	case s.CheckpointEveryMS != 0 && (s.CheckpointEveryMS < MinCheckpointEveryMS || s.CheckpointEveryMS > MaxCheckpointEveryMS):
		return fmt.Errorf("ledger.checkpoint_every: %d ms; allowed: a time from 1m to 30d, or %d .. %d entries", s.CheckpointEveryMS, MinCheckpointEvery, MaxCheckpointEvery)
	case s.RetainMS != 0 && (s.RetainMS < MinRetainMS || s.RetainMS > market.MaxDuration):
		return fmt.Errorf("ledger.retain: %d ms; allowed: 0 (keep) or 1h .. 10 years", s.RetainMS)
	}
	return nil
}

// applyLedger sets an org.update's ledger settings on s and checks them.
func applyLedger(s *LedgerSettings, p OrgUpdate) error {
	if p.LedgerCheckpointEvery != nil {
		s.CheckpointEvery, s.CheckpointEveryMS = *p.LedgerCheckpointEvery, 0
	}
	if p.LedgerCheckpointEveryMS != nil {
		s.CheckpointEvery, s.CheckpointEveryMS = 0, *p.LedgerCheckpointEveryMS
	}
	if p.LedgerRetainMS != nil {
		s.RetainMS = *p.LedgerRetainMS
	}
	if err := CheckLedgerSettings(*s); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return nil
}

// CheckpointDue reports whether an admin machine should write a checkpoint:
// entries have been folded since the last one (or since genesis), and now
// (unix ms) is at least the setting's time past last (ms), or the count of
// entries since is at least the setting's count.
func (s LedgerSettings) CheckpointDue(since int64, last, now int64) bool {
	if since <= 0 {
		return false
	}
	if s.CheckpointEveryMS > 0 {
		return now-last >= s.CheckpointEveryMS
	}
	every := s.CheckpointEvery
	if every == 0 {
		every = DefaultCheckpointEvery
	}
	return since >= every
}
