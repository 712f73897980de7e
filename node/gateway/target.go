package gateway

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/market"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/node/ref"
)

// Who may enter what (docs/design.md §23): pure functions of the State,
// the user name the client gave, the key it proved, this machine and now.

// Target is what an SSH user name names: a contract (CONTRACT_ID), or an
// item of a job (JOB_ID.ITEM). Ref is the ID, or a unique prefix or
// suffix of it as the CLI takes them (a job's name too).
type Target struct {
	Job  bool
	Ref  string
	Item int64
}

// MaxUser bounds an SSH user name.
const MaxUser = 128

// String is the target as a user name.
func (t Target) String() string {
	if t.Job {
		return t.Ref + "." + strconv.FormatInt(t.Item, 10)
	}
	return t.Ref
}

// ParseUser reads an SSH user name: CONTRACT_ID, or JOB_ID.ITEM (the job
// reference before the last dot, the item number after it). A reference
// is printable text without spaces or control characters, at most
// MaxUser bytes in all.
func ParseUser(user string) (Target, error) {
	if user == "" {
		return Target{}, errors.New("no user name: ssh to CONTRACT_ID@host or JOB_ID.ITEM@host")
	}
	if len(user) > MaxUser {
		return Target{}, fmt.Errorf("user name of %d bytes; allowed: CONTRACT_ID or JOB_ID.ITEM, at most %d bytes", len(user), MaxUser)
	}
	for i, r := range user {
		if r == ' ' || r == '@' || r == '/' || r == ':' || text.Unsafe(r) || r == 0xfffd {
			return Target{}, fmt.Errorf("user name %s: byte %d is not allowed; allowed: CONTRACT_ID or JOB_ID.ITEM", text.Quote(text.Clip(user)), i)
		}
	}
	i := strings.LastIndexByte(user, '.')
	if i < 0 {
		return Target{Ref: user}, nil
	}
	job, n := user[:i], user[i+1:]
	item, err := strconv.ParseInt(n, 10, 64)
	if job == "" || err != nil || item < 0 || n != strconv.FormatInt(item, 10) {
		return Target{}, fmt.Errorf("user name %s: after the last dot comes an item number; allowed: CONTRACT_ID or JOB_ID.ITEM", text.Quote(text.Clip(user)))
	}
	return Target{Job: true, Ref: job, Item: item}, nil
}

// Grant is what an authorised connection may enter, and who entered.
type Grant struct {
	Target
	// ID is the contract's or the job's full ID; Driver the job's
	// driver ("docker" for a contract).
	ID     string
	Driver string
	// Person is the person whose key it is (for a contract's own key, its
	// renter); Key the key's fingerprint; ContractKey says the key was
	// the contract's own.
	Person      string
	Key         string
	ContractKey bool
	// Env is the CSHARE_* variables every session gets.
	Env []string
}

// Refusal is why a connection may not enter: a message for the person at
// the client, who may not be who they claim.
type Refusal struct{ Msg string }

func (r *Refusal) Error() string { return r.Msg }

func refuse(format string, a ...any) error { return &Refusal{Msg: fmt.Sprintf(format, a...)} }

// Authorize says whether the key of fingerprint fp may enter t on
// machine at now (unix ms). A contract: its renter's keys and its own
// key, while it runs on this machine. A job's item: the submitter's keys
// and admins', while the job is active and the item not finished. Whether
// the item runs here is the runtime's to say. The reference resolves only
// among what the key's persons may enter, so a refusal tells a key
// nothing of others' contracts and jobs.
func Authorize(st *ledger.State, t Target, fp, machine string, now int64) (Grant, error) {
	g := Grant{Target: t, Key: fp}
	var persons []string // whose key fp is, sorted
	admin := false
	for _, p := range st.SSHKeyPersons() {
		if st.Members[p] != nil && st.HasSSHKey(p, fp) {
			persons = append(persons, p)
			admin = admin || st.IsAdmin(p)
		}
	}
	if !t.Job {
		return authorizeContract(st, g, persons, machine, now)
	}
	if len(persons) == 0 {
		return g, unknownKey(fp)
	}
	return authorizeJob(st, g, persons, admin)
}

func unknownKey(fp string) error {
	return refuse("cshare: key %s is not in the org's ledger; add it with: cshare user ssh-key add FILE.pub", fp)
}

// contractKeyFP is the fingerprint of a contract's own key ("" for none).
func contractKeyFP(c *ledger.Contract) string {
	if c.Spec.SSHKey == "" {
		return ""
	}
	k, err := ledger.CheckSSHKey("ssh_key", c.Spec.SSHKey)
	if err != nil {
		return ""
	}
	return k.Fingerprint
}

func authorizeContract(st *ledger.State, g Grant, persons []string, machine string, now int64) (Grant, error) {
	var cands []ref.Candidate
	own := map[string]bool{} // contracts whose own key fp is
	for _, c := range st.SortedContracts() {
		switch {
		case slices.Contains(persons, c.Renter):
		case c.Spec.SSHKey != "" && contractKeyFP(c) == g.Key:
			own[c.ID] = true
		default:
			continue
		}
		cands = append(cands, ref.Candidate{ID: c.ID})
	}
	if len(persons) == 0 && len(own) == 0 {
		return g, unknownKey(g.Key)
	}
	id, err := ref.Resolve("contract", "cshare contract ls", g.Ref, cands)
	if err != nil {
		// As the API does, another's contract is no business of this key:
		// it hears what it would of one that does not exist.
		return g, refuse("cshare: %s (for key %s: only a contract's renter's keys and its own key enter it)", refMessage(err), g.Key)
	}
	c := st.Contracts[id]
	g.ID, g.Driver, g.Person, g.ContractKey = id, "docker", c.Renter, own[id]
	if state := c.State(now, st.MarketPolicy()); state != market.StateRunning {
		return g, refuse("cshare: contract %s is %s; only a running contract can be entered", id, state)
	}
	if c.Offer.Machine != machine {
		return g, refuse("cshare: contract %s runs on machine %s, not this one; use: cshare contract ssh %s", id, c.Offer.Machine, id)
	}
	g.Env = []string{"CSHARE_CONTRACT=" + id}
	return g, nil
}

func authorizeJob(st *ledger.State, g Grant, persons []string, admin bool) (Grant, error) {
	var cands []ref.Candidate
	for _, j := range st.SortedJobs() {
		if admin || slices.Contains(persons, j.Submitter) {
			cands = append(cands, ref.Candidate{ID: j.ID, Name: j.Spec.Name})
		}
	}
	id, err := ref.Resolve("job", "cshare job ls", g.Ref, cands)
	if err != nil {
		return g, refuse("cshare: %s (for key %s: a job's submitter's and admins' keys enter it)", refMessage(err), g.Key)
	}
	j := st.Jobs[id]
	g.ID, g.Driver = id, j.Spec.Driver
	g.Person = j.Submitter
	if !slices.Contains(persons, j.Submitter) {
		for _, p := range persons { // an admin's key
			if st.IsAdmin(p) {
				g.Person = p
				break
			}
		}
	}
	if j.State != ledger.JobActive {
		return g, refuse("cshare: job %s is %s; only a running item can be entered", id, j.State)
	}
	if g.Item < j.Spec.RangeStart || g.Item > j.Spec.RangeEnd {
		return g, refuse("cshare: job %s has no item %d; its items are %d..%d", id, g.Item, j.Spec.RangeStart, j.Spec.RangeEnd)
	}
	if it := j.Items.At(int(g.Item - j.Spec.RangeStart)); it.Status != ledger.ItemPending {
		return g, refuse("cshare: item %d of job %s has finished (%s); only a running item can be entered", g.Item, id, itemStatus(it.Status))
	}
	g.Env = []string{"CSHARE_JOB_ID=" + id, "CSHARE_ITEM=" + strconv.FormatInt(g.Item, 10)}
	return g, nil
}

func itemStatus(s uint8) string {
	switch s {
	case ledger.ItemDone:
		return "done"
	case ledger.ItemFailed:
		return "failed"
	}
	return "pending"
}

// refMessage is ref.Resolve's error without its HTTP status.
func refMessage(err error) string {
	var se *api.StatusError
	if errors.As(err, &se) {
		return se.Msg
	}
	return err.Error()
}
