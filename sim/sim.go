package sim

import (
	"container/heap"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/dispatch"
	"github.com/cshare/cshare/p2p"
	"github.com/cshare/cshare/smartshare"
)

// Config is one simulation. Zero fields take the defaults named.
type Config struct {
	Machines int           // default 1000
	Slots    int           // per machine; default 8
	Interval time.Duration // heartbeat interval; default 30 s (p2p.DefaultInterval)
	// Dial is how many other machines each machine connects to, at
	// random; default 32, so about 64 connections each (the connection
	// manager's low water mark, p2p.ConnLow).
	Dial int
	// Mesh degree, its bounds, and the peers lazy gossip goes to each
	// second; default cshare's (p2p: 2, 2, 3, 2). GossipSub's defaults are
	// 6, 5, 12, 6.
	D, Dlo, Dhi, Dlazy int
	// MeshPublish publishes to the mesh only, as GossipSub does by default;
	// cshare floods its own messages to every connected peer.
	MeshPublish bool
	Latency     time.Duration // one way, per link; default 1 ms
	Bandwidth   float64       // bytes a second each machine sends; default 125e6 (1 Gbit/s)
	// CostHeartbeat and CostHeads are the CPU a machine spends on the first
	// copy of a heartbeat or a heads announcement (validation, and folding
	// the entry it pushes) before forwarding it; default 60 µs and 120 µs
	// (BenchmarkChecks: 44 to 66 µs for a heartbeat, 82 µs for an
	// announcement and its entry, before the fold; Report gives what the
	// checks cost in the run itself, on a machine that may be busy).
	CostHeartbeat, CostHeads time.Duration
	Rest                     time.Duration // the at-rest window; default 2 intervals
	JobItems                 int           // items of the job; default 10,000; negative: no job
	ItemTime                 time.Duration // one item's run; default 30 s (±10%)
	// Folders is how many machines fold the ledger with a ledger.Log;
	// default all up to 64 machines, else 4 (a Log re-folds from a
	// checkpoint for every entry that arrives after one it sorts before,
	// which costs a thousand machines' CPU too much to run on every one).
	Folders int
	// VerifyAll: every machine runs the stateless checks of every message
	// itself (signatures, decoding), not once per message.
	VerifyAll bool
	Seed      uint64
	// Progress, if set, is told the virtual time now and then.
	Progress func(now time.Duration, events int)
}

func (c *Config) defaults() error {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defD := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Machines, 1000)
	def(&c.Slots, 8)
	defD(&c.Interval, p2p.DefaultInterval)
	def(&c.Dial, 32)
	def(&c.D, 2)
	def(&c.Dlo, 2)
	def(&c.Dhi, 3)
	def(&c.Dlazy, 2)
	defD(&c.Latency, time.Millisecond)
	if c.Bandwidth == 0 {
		c.Bandwidth = 125e6
	}
	defD(&c.CostHeartbeat, 60*time.Microsecond)
	defD(&c.CostHeads, 120*time.Microsecond)
	defD(&c.Rest, 2*c.Interval)
	def(&c.JobItems, 10_000)
	defD(&c.ItemTime, 30*time.Second)
	if c.Folders == 0 {
		c.Folders = c.Machines
		if c.Machines > 64 {
			c.Folders = 4
		}
	}
	switch {
	case c.Machines < 2:
		return fmt.Errorf("sim: machines: %d; allowed: 2 or more", c.Machines)
	case c.Slots < 1 || c.Slots > 64:
		return fmt.Errorf("sim: slots: %d; allowed: 1 to 64", c.Slots)
	case c.Interval < time.Second:
		return fmt.Errorf("sim: interval: %s; allowed: 1s or more", c.Interval)
	case c.Dial < 1:
		return fmt.Errorf("sim: dial: %d; allowed: 1 or more", c.Dial)
	case c.Dlo < 1 || c.D < c.Dlo || c.Dhi < c.D:
		return fmt.Errorf("sim: mesh degree %d with bounds %d..%d; allowed: 1 <= dlo <= d <= dhi", c.D, c.Dlo, c.Dhi)
	case c.Dlazy < 0 || c.Latency < 0 || c.Bandwidth <= 0 || c.CostHeartbeat < 0 || c.CostHeads < 0:
		return errors.New("sim: dlazy, latency, bandwidth and costs must not be negative (bandwidth above 0)")
	case c.Folders < 0 || c.Folders > c.Machines:
		return fmt.Errorf("sim: folders: %d; allowed: 0 to %d", c.Folders, c.Machines)
	case c.JobItems > 1_000_000:
		return fmt.Errorf("sim: job items: %d; allowed: at most 1000000", c.JobItems)
	}
	return nil
}

// event is one thing that happens at a virtual time; seq keeps events of
// one time in the order they were scheduled.
type event struct {
	at  time.Duration
	seq uint64
	fn  func()
}

type events []event

func (q events) Len() int { return len(q) }
func (q events) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q events) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *events) Push(x any)   { *q = append(*q, x.(event)) }
func (q *events) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = event{}
	*q = old[:len(old)-1]
	return e
}

// world is one simulation run.
type world struct {
	cfg   Config
	rng   *rand.Rand
	now   time.Duration
	seq   uint64
	q     events
	nEv   int
	t0    time.Time // virtual time zero as wall time (for entries and heartbeats)
	org   string
	owner *ledger.Signer

	ms     []*machine
	byID   map[string]int32 // machine ID -> index
	byPtr  map[*byte]int32  // machine ID's bytes -> index (see machineOf)
	msgs   []*message
	ents   []*entryRec
	byCID  map[string]int32 // entry CID key -> index
	topics [2]string

	restPlan string // the plan hash with no job
	job      *jobRec

	// measurement windows
	windows                             []*window
	checkCPU                            [2]checkCost // measured cost of the stateless checks, per topic
	foldCPU                             checkCost    // measured cost of a folder's fold of one entry
	rejected, reordered, stale, fetches int
	stop                                bool
}

// checkCost sums the measured wall time of one kind of check.
type checkCost struct {
	n   int
	sum time.Duration
}

// jobRec is the job and its plan, shared by every machine (each would
// compute the same plan).
type jobRec struct {
	id        string
	entry     int32 // its job.submit entry
	items     int
	plan      smartshare.Result
	owners    *dispatch.Owners
	buckets   *dispatch.Buckets
	submitted time.Duration
	runs      []int32 // per item: runs started
	doneAt    time.Duration
	allDoneAt time.Duration // when the last machine saw every item done
	seenDone  int
}

func (w *world) at(d time.Duration, fn func()) {
	w.seq++
	heap.Push(&w.q, event{at: w.now + d, seq: w.seq, fn: fn})
}

func (w *world) wall() time.Time { return w.t0.Add(w.now) }

// Run simulates an org under cfg and reports what was measured.
func Run(cfg Config) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	w := &world{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, uint64(cfg.Machines))), t0: time.UnixMilli(1_700_000_000_000),
		byID: map[string]int32{}, byPtr: map[*byte]int32{}, byCID: map[string]int32{}}
	if err := w.setup(); err != nil {
		return nil, err
	}
	// Every machine beats first at a random moment of the first interval,
	// and runs its gossip heartbeat, flush and heads loops.
	for _, m := range w.ms {
		m := m
		w.at(time.Duration(w.rng.Int64N(int64(cfg.Interval))), func() { w.periodicBeat(m) })
		w.at(time.Duration(w.rng.Int64N(int64(time.Second))), func() { w.flushLoop(m) })
		w.at(3*cfg.Interval+time.Duration(w.rng.Int64N(int64(cfg.Interval))), func() { w.headsLoop(m) })
	}
	w.at(time.Second, w.gossipTick)
	warm := cfg.Interval + 5*time.Second
	rest := w.window("rest", warm)
	w.at(warm+cfg.Rest, func() {
		w.closeWindow(rest)
		if cfg.JobItems > 0 {
			w.submitJob()
		} else {
			w.at(5*time.Second, func() { w.stop = true }) // what is in flight arrives
		}
	})
	for len(w.q) > 0 && !w.stop {
		e := heap.Pop(&w.q).(event)
		w.now = e.at
		w.nEv++
		e.fn()
		if cfg.Progress != nil && w.nEv%2_000_000 == 0 {
			cfg.Progress(w.now, w.nEv)
		}
		if w.now > warm+cfg.Rest+time.Hour {
			return nil, errors.New("sim: the job did not finish within an hour of virtual time")
		}
	}
	return w.report(), nil
}

// setup builds the machines, the org's first entries (genesis, and every
// machine registered by invitation, approved at once), the connections
// and the meshes.
func (w *world) setup() error {
	cfg := w.cfg
	ownerKey, err := keyFrom(w.rng)
	if err != nil {
		return err
	}
	if w.owner, err = ledger.NewSigner(ownerKey); err != nil {
		return err
	}
	settings := ledger.DefaultSettings()
	settings.SmartShare.MaxCPUsLimit = int64(cfg.Machines * cfg.Slots) // an org this size lets one job use it all
	t := w.t0.UnixMilli() - 3_600_000
	gen, err := w.owner.Sign("", ledger.KindGenesis, ledger.Genesis{Name: "sim", OrgKeyID: "k1", Settings: settings}, nil, 0, t)
	if err != nil {
		return err
	}
	w.org = gen.CID().String()
	w.topics = [2]string{"/cshare/" + w.org + "/heartbeat", "/cshare/" + w.org + "/ledger"}
	w.addEntry(gen, nil)
	head := gen
	for i := 0; i < cfg.Machines; i++ {
		m, err := w.newMachine(i)
		if err != nil {
			return err
		}
		inv := w.owner.SignCapability(ledger.Capability{Org: w.org, Kind: ledger.CapInvite, ID: fmt.Sprint("inv-", i), Role: ledger.RoleMember})
		t++
		wit := w.owner.SignWitness(inv, m.ids, t)
		reg, err := m.signer.Sign(w.org, ledger.KindMachineReg, ledger.MachineRegister{Name: m.name, Cap: inv, Witness: &wit},
			[]cid.Cid{head.CID()}, head.Clock, t)
		if err != nil {
			return err
		}
		w.addEntry(reg, []int32{int32(len(w.ents) - 1)})
		head = reg
	}
	boot := make([]*ledger.Entry, len(w.ents))
	for i, r := range w.ents {
		boot[i] = r.e
	}
	for _, m := range w.ms {
		for i := range w.ents {
			growSet(&m.have, i)
			w.ents[i].reached++
		}
		m.heads = []int32{int32(len(w.ents) - 1)}
		m.clock = head.Clock
		if m.log != nil {
			errs, err := m.log.AddBatch(boot)
			if err != nil {
				return fmt.Errorf("sim: bootstrap: %w", err)
			}
			for i, e := range errs {
				if e != nil {
					return fmt.Errorf("sim: bootstrap entry %d (%s) has no effect: %w", i, boot[i].Kind, e)
				}
			}
		}
	}
	// The plan with no job, whose hash every machine announces at rest.
	w.restPlan = smartshare.Plan(w.planInput(nil)).Hash
	w.connect()
	return nil
}

func keyFrom(rng *rand.Rand) (crypto.PrivKey, error) {
	seed := make([]byte, 32)
	for i := range seed {
		seed[i] = byte(rng.Uint32())
	}
	k, _, err := crypto.GenerateEd25519Key(&seeded{seed})
	return k, err
}

// seeded reads a fixed seed (GenerateEd25519Key reads 32 bytes).
type seeded struct{ b []byte }

func (s *seeded) Read(p []byte) (int, error) {
	n := copy(p, s.b)
	s.b = s.b[n:]
	if n < len(p) {
		return n, errors.New("sim: seed exhausted")
	}
	return n, nil
}

// planInput is what every node gives SmartShare: every machine online
// with its slots, and the job when there is one.
func (w *world) planInput(j *smartshare.Job) smartshare.Input {
	in := smartshare.Input{Config: smartshare.Config{Mode: smartshare.ModeJobs, PreemptPolicy: smartshare.PolicyAggressive,
		DefaultMaxCPUs: -1, MaxCPUsLimit: w.cfg.Machines * w.cfg.Slots}}
	for _, m := range w.ms {
		in.Machines = append(in.Machines, smartshare.Machine{ID: m.ids, Slots: w.cfg.Slots})
	}
	if j != nil {
		in.Jobs = []smartshare.Job{*j}
	}
	return in
}
