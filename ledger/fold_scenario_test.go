package ledger

import (
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"
	"golang.org/x/crypto/ssh"

	"github.com/cshare/cshare/market"
)

// TestFoldScenarios runs the scripts in testdata/fold: entries in, verdicts
// and state out (regenerate the expected output with -rewrite). Actors are
// named; each is a machine with a key of its own (owner founds the org),
// acting for itself unless it joined for a person. IDs in the output are
// the names. Every entry is written on the log's heads, 1 ms after the
// last. The language:
//
//	org [name=acme]                     the genesis, by owner
//	join who=m [person=p] [via=invite|orgkey] [role=member] [by=owner]
//	     [id=inv-N] [key=k1] [uses=1] [cap-org=other]
//	                                    machine.register with an invite (id)
//	                                    or org key (key) by's machine signed,
//	                                    witnessed by owner's when it needs a
//	                                    witness; for person if given
//	<kind> by=m [org=other] [after=D] [skew=D] args...
//	                                    an entry of that kind by machine m,
//	                                    D (a Go duration) after the last
//	                                    entry, or written on a clock D off;
//	                                    mark=NAME names the entry (a
//	                                    contract's move) for moves=NAME,...
//	                                    the args are the payload (see
//	                                    payload below); an unknown kind has
//	                                    an empty payload
//	state [after=D]                     the State, compactly (D later)
//	usage                               every person's usage, all time
//	budget n=N                          the machines' budget of entries
//	                                    without effect (log_budget.go);
//	                                    state shows the budgets from then
//
// A write prints ok, or refused and the verdict; a refusal must leave the
// State as it was. An entry the log does not take (another org's) prints
// the log's error and Apply's verdict on a copy of the State.
func TestFoldScenarios(t *testing.T) {
	paths, err := filepath.Glob("testdata/fold/*.txt")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			s := &foldScenario{actors: map[string]*actor{}, aliases: map[string]string{}}
			datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
				return s.run(t, d)
			})
		})
	}
}

type foldScenario struct {
	w       *world
	actors  map[string]*actor
	names   []string          // actors in order of first mention
	aliases map[string]string // job and contract names -> IDs
	sets    []string          // dataset names, for their CIDs
	keys    []string          // SSH key names, for their fingerprints
	other   string            // another org's ID
	lastCP  string            // the last checkpoint that took effect
	budgets bool              // state shows the budgets (after a budget command)
}

// args reads a command's key=value arguments; done fails the test on any
// it did not read.
type args struct {
	t    *testing.T
	d    *datadriven.TestData
	read map[string]bool
}

func (a *args) has(key string) bool { a.read[key] = true; return a.d.HasArg(key) }

func (a *args) str(key, def string) string {
	if !a.has(key) {
		return def
	}
	var v string
	a.d.ScanArgs(a.t, key, &v)
	return v
}

func (a *args) num(key string, def int64) int64 {
	if !a.has(key) {
		return def
	}
	n, err := strconv.ParseInt(a.str(key, ""), 10, 64)
	if err != nil {
		a.t.Fatalf("%s: %v", key, err)
	}
	return n
}

// dur reads a Go duration ("90s", "-5s") as ms.
func (a *args) dur(key string) int64 {
	d, err := time.ParseDuration(a.str(key, "0s"))
	if err != nil {
		a.t.Fatalf("%s: %v", key, err)
	}
	return d.Milliseconds()
}

func (a *args) done() {
	for _, c := range a.d.CmdArgs {
		if !a.read[c.Key] {
			a.t.Fatalf("%s: unknown argument %s", a.d.Cmd, c.Key)
		}
	}
}

func (s *foldScenario) actor(name string) *actor {
	if a := s.actors[name]; a != nil {
		return a
	}
	if name == "owner" {
		s.w.t.Fatalf("owner is the org's founder: write org first")
	}
	a := newActor(s.w.t, byte(len(s.names)+2))
	s.actors[name] = a
	s.names = append(s.names, name)
	return a
}

// id is the ID of a named actor, job or contract.
func (s *foldScenario) id(name string) string {
	if id, ok := s.aliases[name]; ok {
		return id
	}
	return s.actor(name).id
}

// text replaces the IDs in out with their names.
func (s *foldScenario) text(out string) string {
	out = strings.ReplaceAll(out, s.w.org, "acme-org")
	if s.other != "" {
		out = strings.ReplaceAll(out, s.other, "other-org")
	}
	for _, n := range s.names {
		out = strings.ReplaceAll(out, s.actors[n].id, n)
	}
	for n, id := range s.aliases {
		out = strings.ReplaceAll(out, id, n)
	}
	for _, n := range s.sets {
		out = strings.ReplaceAll(out, datasetCID(n), "cid:"+n)
	}
	for _, n := range s.keys {
		k, _ := CheckSSHKey("key", scenarioSSHKey(n))
		out = strings.ReplaceAll(out, k.Fingerprint, "fp:"+n)
	}
	return out
}

// sshKey is the public key named name (see scenarioSSHKey), remembered
// so that its fingerprint prints as fp:name.
func (s *foldScenario) sshKey(name string) string {
	if !slices.Contains(s.keys, name) {
		s.keys = append(s.keys, name)
	}
	return scenarioSSHKey(name)
}

// scenarioSSHKey is a stand-in ed25519 public key derived from name, in
// canonical authorized_keys form with name as its comment.
func scenarioSSHKey(name string) string {
	seed := sha256.Sum256([]byte("ssh:" + name))
	pub, err := ssh.NewPublicKey(ed25519.NewKeyFromSeed(seed[:]).Public())
	if err != nil {
		panic(err)
	}
	return strings.TrimSuffix(string(ssh.MarshalAuthorizedKey(pub)), "\n") + " " + name
}

func (s *foldScenario) run(t *testing.T, d *datadriven.TestData) string {
	a := &args{t: t, d: d, read: map[string]bool{}}
	if d.Cmd == "org" {
		s.w = newWorldNamed(t, a.str("name", "acme"))
		s.actors["owner"], s.names = s.w.owner, append(s.names, "owner")
		a.done()
		return "ok"
	}
	if s.w == nil {
		t.Fatalf("%s before org", d.Cmd)
	}
	s.w.t = t
	if d.Cmd == "usage" {
		a.done()
		return s.usage()
	}
	if d.Cmd == "budget" {
		s.w.log.budget, s.budgets = int(a.num("n", IneffectiveBudget)), true
		a.done()
		return "ok"
	}
	if d.Cmd == "state" {
		if a.has("after") {
			s.w.now += a.dur("after") // read later
		}
		a.done()
		return s.state()
	}
	var by *actor
	kind, payload := d.Cmd, any(nil)
	if d.Cmd == "join" {
		by = s.actor(a.str("who", ""))
		kind, payload = KindMachineReg, s.register(a, by)
	} else {
		by = s.actor(a.str("by", ""))
		payload = s.payload(a, kind)
	}
	org := s.w.org
	if a.str("org", "") == "other" {
		org = s.otherOrg()
	}
	as := a.str("as", "")
	mark := a.str("mark", "")
	if a.has("after") {
		s.w.now += a.dur("after") // the world's clock moves on
	}
	at := s.w.tick()
	if a.has("skew") {
		at += a.dur("skew") // the author's clock is off; the world's is not moved
	}
	a.done()

	before := s.w.log.State().Hash()
	e := sign(t, by, org, kind, payload, at, s.w.heads()...)
	snap := freeze(t, s.w.log, "before "+kind) // TestSnapshotsImmutable, for every kind
	verdict, err := s.w.log.Add(e)
	snap.check(t, kind)
	if err != nil {
		// The log keeps no entry of another org; Apply refuses it too.
		return s.text(fmt.Sprintf("not added: %v\nApply: %v", err, Apply(s.w.log.State().Clone(), e)))
	}
	if as != "" {
		switch {
		case strings.HasPrefix(kind, "job."):
			s.aliases[as] = JobIDFor(e)
		case strings.HasPrefix(kind, "contract."):
			s.aliases[as] = ContractIDFor(e)
		}
	}
	if mark != "" {
		s.aliases[mark] = e.CID().String()
	}
	if verdict == nil {
		if kind == KindCheckpoint {
			s.lastCP = e.CID().String()
		}
		return "ok"
	}
	st := s.w.log.State().Clone()
	uncount(st, e) // the only change an ineffective entry makes
	if st.Hash() != before {
		t.Fatalf("%s was refused (%v) but changed the state", kind, verdict)
	}
	return s.text("refused: " + verdict.Error())
}

// otherOrg is the ID of another org, founded by owner.
func (s *foldScenario) otherOrg() string {
	if s.other == "" {
		g := sign(s.w.t, s.w.owner, "", KindGenesis, Genesis{Name: "other", OrgKeyID: "k1", Settings: DefaultSettings()}, s.w.now)
		s.other = g.CID().String()
	}
	return s.other
}

// register is who's machine.register: a capability of kind via (invite or
// orgkey) signed by by's machine, with a delegation from person if given.
func (s *foldScenario) register(a *args, who *actor) MachineRegister {
	issuer := s.actor(a.str("by", "owner"))
	org := s.w.org
	if a.str("cap-org", "") == "other" {
		org = s.otherOrg()
	}
	c := Capability{Org: org, Role: a.str("role", RoleMember), Uses: a.num("uses", 1)}
	switch via := a.str("via", "invite"); via {
	case "invite":
		c.Kind, c.ID = CapInvite, a.str("id", fmt.Sprintf("inv-%d", s.w.now))
	case "orgkey":
		c.Kind, c.ID, c.Uses = CapOrgKey, a.str("key", "k1"), a.num("uses", 0)
	default:
		s.w.t.Fatalf("via=%s: want invite or orgkey", via)
	}
	c = issuer.s.SignCapability(c)
	p := MachineRegister{Name: a.str("who", ""), Cap: c}
	if NeedsWitness(c) {
		wt := s.w.owner.s.SignWitness(c, who.id, s.w.now)
		p.Witness = &wt
	}
	if a.has("person") {
		name := a.str("person", "")
		d := s.actor(name).s.SignDelegation(name, who.id, s.w.org)
		p.Delegation = &d
	}
	return p
}

// datasetCID is datasetCID(name), printed as cid:name.
func (s *foldScenario) datasetCID(name string) string {
	if !slices.Contains(s.sets, name) {
		s.sets = append(s.sets, name)
	}
	return datasetCID(name)
}

// datasetCID is a stand-in root CID for the dataset called name.
func datasetCID(name string) string {
	h := sha256.Sum256([]byte(name))
	mh, _ := multihash.Encode(h[:], multihash.SHA2_256)
	return cid.NewCidV1(cid.Raw, mh).String()
}

// scenarioGPUs are the two GPUs a host has with machine.update gpus=2, and
// the offer of contract.request holds.
var scenarioGPUs = []GPU{{Index: 0, Name: "RTX 4090", MemoryMB: 24576}, {Index: 1, Name: "RTX 4090", MemoryMB: 24576}}

// payload builds kind's payload from the args: names of actors, jobs and
// contracts stand for their IDs.
func (s *foldScenario) payload(a *args, kind string) any {
	switch kind {
	case KindOrgUpdate:
		var p OrgUpdate
		if a.has("approval") {
			p.RequireMachineApproval = ptr(a.str("approval", "") == "true")
		}
		if a.has("name") {
			p.Name = ptr(a.str("name", ""))
		}
		if a.has("mode") {
			p.SmartShareMode = ptr(a.str("mode", ""))
		}
		if a.has("delete-after") {
			p.MarketDeleteAfter = ptr(a.num("delete-after", 0))
		}
		if a.has("jobs-retain") { // a Go duration, or 0 (keep)
			ms := int64(0)
			if v := a.str("jobs-retain", ""); v != "0" {
				ms = a.dur("jobs-retain")
			}
			p.JobsRetainMS = &ms
		}
		if a.has("policies") {
			// policies=NAME:VALUE,... in stored units (ms, MB, counts)
			p.Policies = map[string]int64{}
			for _, kv := range strings.Split(a.str("policies", ""), ",") {
				k, v, _ := strings.Cut(kv, ":")
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					s.w.t.Fatalf("policies: %q: %v", kv, err)
				}
				p.Policies[k] = n
			}
		}
		return p
	case KindOrgKey:
		return OrgKey{KeyID: a.str("id", "")}
	case KindOrgTransfer:
		return OrgTransfer{To: s.id(a.str("to", ""))}
	case KindOrgDelete:
		return OrgDelete{Name: a.str("name", "")}
	case KindMachineApprove, KindMachineReject, KindMachineRemove:
		return MachineRef{Machine: s.id(a.str("machine", ""))}
	case KindMachineUpdate:
		p := MachineUpdate{Name: a.str("name", ""), Hardware: Hardware{CPUs: a.num("cpus", 4), MemoryMB: 65536, DiskMB: 1 << 20}}
		p.Hardware.GPUs = scenarioGPUs[:a.num("gpus", 0)]
		return p
	case KindMerge:
		return Merge{}
	case KindCheckpoint: // of the State as it is (the entry names every head)
		st := s.w.log.State()
		return Checkpoint{Prev: s.lastCP, Entries: a.num("entries", st.Applied+st.Ineffective), Hash: st.Hash()}
	case KindMemberRole:
		return MemberRole{Member: s.id(a.str("member", "")), Role: a.str("role", "")}
	case KindMemberRemove:
		return MemberRef{Member: s.id(a.str("member", ""))}
	case KindJobSubmit:
		p := JobSpec{Driver: "exec", Cmd: []string{"true"}, RangeStart: 1, RangeEnd: a.num("items", 1),
			Priority: a.num("priority", 5), CPUs: 1, Retries: a.num("retries", 0), MemoryMB: a.num("memory", 0), Nonce: []byte{byte(s.w.now)}}
		if a.has("mount") {
			p.Datasets = []DatasetMount{{Name: a.str("mount", ""), CID: s.datasetCID(a.str("mount", "")), Path: "/data"}}
		}
		return p
	case KindJobModify:
		return JobModify{Job: s.id(a.str("job", "")), Priority: ptr(a.num("priority", 5))}
	case KindJobCancel, KindJobStart, KindJobExpire:
		return JobRef{Job: s.id(a.str("job", ""))}
	case KindJobResults:
		r := ItemResult{Item: a.num("item", 1), Code: a.num("code", 0), DurationMS: 10}
		if a.has("started") { // the run's start, this long before the entry
			r.Started = s.w.now - a.dur("started")
		}
		return JobResults{Job: s.id(a.str("job", "")), Results: []ItemResult{r}}
	case KindContractRequest:
		host := s.actor(a.str("host", "owner"))
		var gpus []market.GPU
		for _, g := range scenarioGPUs {
			gpus = append(gpus, market.GPU{Index: g.Index, Name: g.Name, MemoryMB: g.MemoryMB})
		}
		o := host.s.SignOffer(s.w.org, market.Offer{GPUs: gpus, CPUs: 16, MemoryMB: 65536, DiskMB: 102400,
			Price: 2_000_000, Created: s.w.now, Until: s.w.now + 100*market.Hour})
		spec := ContractSpec{Image: "cshare-test:latest"}
		if a.has("sshkey") {
			spec.SSHKey = s.sshKey(a.str("sshkey", ""))
		}
		if a.has("raw-sshkey") {
			spec.SSHKey = a.str("raw-sshkey", "")
		}
		return ContractRequest{Offer: o, Ask: market.Ask{GPUs: a.num("gpus", 1), Duration: 10 * market.Hour},
			Spec: spec, Nonce: []byte{byte(s.w.now)}}
	case KindContractAccept, KindContractStop, KindContractStart, KindContractRm:
		return ContractRef{Contract: s.id(a.str("contract", ""))}
	case KindContractAck, KindContractWitness:
		var reqs []string
		for _, m := range strings.Split(a.str("moves", ""), ",") {
			reqs = append(reqs, s.id(m))
		}
		return ContractMarks{Contract: s.id(a.str("contract", "")), Requests: reqs}
	case KindContractReject:
		return ContractReject{Contract: s.id(a.str("contract", "")), Reason: a.str("reason", "")}
	case KindContractExtend:
		return ContractExtend{Contract: s.id(a.str("contract", "")), Duration: a.num("hours", 1) * market.Hour}
	case KindDatasetAdd:
		name := a.str("name", "")
		return DatasetAdd{Name: name, CID: s.datasetCID(name), Size: 1 << 20, Blocks: 4, Access: a.str("access", AccessOrg)}
	case KindDatasetRm:
		return DatasetRef{Name: a.str("name", "")}
	case KindDatasetAccess:
		return DatasetAccess{Name: a.str("name", ""), Access: a.str("access", "")}
	case KindSSHKeyAdd:
		if a.has("raw") {
			return SSHKeyAdd{Key: a.str("raw", "")}
		}
		k := s.sshKey(a.str("key", ""))
		switch m := a.str("mangle", ""); m {
		case "":
		case "double-space":
			k = strings.Replace(k, " ", "  ", 1)
		case "options":
			k = "no-pty " + k
		case "two-lines":
			k += "\n" + k
		default:
			s.w.t.Fatalf("mangle=%s: want double-space, options or two-lines", m)
		}
		return SSHKeyAdd{Key: k}
	case KindSSHKeyRm:
		if a.has("fp") {
			return SSHKeyRef{Fingerprint: a.str("fp", "")}
		}
		k, _ := CheckSSHKey("key", s.sshKey(a.str("key", "")))
		return SSHKeyRef{Fingerprint: k.Fingerprint}
	}
	if !strings.Contains(kind, ".") {
		s.w.t.Fatalf("unknown command %q", kind)
	}
	return struct{}{}
}

// usage prints every person's usage with any, over all time.
func (s *foldScenario) usage() string {
	var lines []string
	for _, p := range s.w.log.State().Usage(0, market.MaxTime).Persons {
		if p.Consumption != (Consumption{}) {
			lines = append(lines, s.text(fmt.Sprintf("%s cpu=%d mem=%d done=%d failed=%d jobs=%d", p.ID, p.CPUMilliMS, p.MemoryMBMS, p.ItemsDone, p.ItemsFailed, p.Jobs)))
		}
	}
	return strings.Join(lines, "\n")
}

// state prints the State compactly, every list sorted.
func (s *foldScenario) state() string {
	st := s.w.log.State()
	var lines []string
	add := func(format string, a ...any) { lines = append(lines, s.text(fmt.Sprintf(format, a...))) }
	org := fmt.Sprintf("org %s owner=%s key=%s approval=%t mode=%s", st.Name, st.Owner, st.OrgKeyID,
		st.Settings.RequireMachineApproval, st.Settings.SmartShare.Mode)
	for _, n := range PolicyNames {
		if v := st.Settings.Policies.Get(n); v != 0 {
			org += fmt.Sprintf(" %s=%s", n, FormatPolicy(n, v))
		}
	}
	if st.Deleted {
		org += " deleted"
	}
	lines = append(lines, s.text(org))
	var rest []string
	for _, m := range st.Members {
		rest = append(rest, s.text(fmt.Sprintf("member %s %s", m.ID, m.Role)))
	}
	for _, m := range st.Machines {
		rest = append(rest, s.text(fmt.Sprintf("machine %s %s person=%s", m.ID, m.Status, m.Owner)))
	}
	for _, j := range st.Jobs {
		line := fmt.Sprintf("job %s %s by=%s done=%d/%d priority=%d", j.ID, j.State, j.Submitter, j.Done, j.Total(), j.Priority)
		if a := j.Archived; a != nil {
			line += fmt.Sprintf(" archived: attempts=%d runs=%d dups=%d usage=%d late=%d", a.Attempts, a.Runs, j.Duplicates, len(a.Usage), len(a.Late))
		}
		if j.Queued != "" {
			line += " queued: " + j.Queued
		}
		if j.Started != 0 {
			line += fmt.Sprintf(" started=+%s", market.FormatDuration(j.Started-s.w.gen.Time))
		}
		if strings.HasPrefix(j.Error, "policy.") {
			line += ": " + j.Error
		}
		rest = append(rest, s.text(line))
	}
	for _, c := range st.Contracts {
		line := fmt.Sprintf("contract %s %s renter=%s host=%s", c.ID, c.State(s.w.now, st.MarketPolicy()), c.Renter, c.Host)
		if run, _ := c.Billing(s.w.now); run > 0 {
			line += fmt.Sprintf(" ran=%s cost=$%s", market.FormatDuration(run), market.FormatMoney(c.Cost(s.w.now).Total))
		}
		if why := c.Why(s.w.now, st.MarketPolicy()); why != "" {
			line += ": " + why
		}
		rest = append(rest, s.text(line))
	}
	for _, d := range st.Datasets {
		rest = append(rest, s.text(fmt.Sprintf("dataset %s %s owner=%s", d.Name, d.Access, d.Owner)))
	}
	for _, p := range st.SSHKeyPersons() {
		var fps []string
		for _, k := range st.SSHKeysOf(p) {
			fps = append(fps, k.Fingerprint)
		}
		rest = append(rest, s.text(fmt.Sprintf("sshkeys %s %s", p, strings.Join(fps, " "))))
	}
	for id, b := range st.Budgets {
		if !s.budgets {
			break
		}
		line := fmt.Sprintf("budget %s without-effect=%d", id, b.Ineffective)
		if b.Capped != nil {
			line += " capped"
		}
		rest = append(rest, s.text(line))
	}
	slices.Sort(rest) // the maps' order is no order
	lines = append(lines, rest...)
	add("ineffective %d", st.Ineffective)
	return strings.Join(lines, "\n")
}
