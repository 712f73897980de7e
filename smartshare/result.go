package smartshare

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"text/tabwriter"

	"github.com/cshare/cshare/internal/text"
)

func (p *planner) result() Result {
	in := p.in
	nInst, nPre := 0, 0
	for g := 0; g < p.nSlots; g++ {
		if p.slotJob[g] != 0 {
			nInst++
		}
		if p.slotFlag[g]&fPreempted != 0 && p.slotJob[g] != p.slotRun[g] {
			nPre++
		}
	}
	if nInst > len(p.outInst) {
		p.outInst = make([]Instance, nInst) // not reached: see allocResult
	}
	res := Result{
		Instances: p.outInst[:nInst:nInst],
		Preempt:   make([]Preemption, 0, nPre),
		Jobs:      p.outJobs,
	}
	// Job IDs by rank, and str(ID) of each in one contiguous block, so that
	// the per-instance work stays in cache.
	sc := p.sc
	ids := p.ids
	encOff := sized(sc.encOff, len(p.jobs)+1)
	sc.encOff = encOff
	encOff[0] = 0
	n := 0
	for _, id := range ids {
		n += len(id) + binary.MaxVarintLen64
	}
	enc := sized(sc.enc, n)[:0]
	for r, id := range ids {
		enc = appendStr(enc, id)
		encOff[r+1] = int32(len(enc))
	}
	mode := PolicyAggressive
	if p.policy == polPassive {
		mode = PolicyPassive
	}
	kinds := [3]string{"", KindPrimary, KindSecondary}
	tags := [3]byte{0, 'p', 's'}
	sc.enc = enc
	e := planEncoder{buf: sc.encBuf}
	e.begin('I', nInst)
	preempted := zeroed(sc.preempted, len(p.jobs))
	lostToHigher := zeroed(sc.lostToHigher, len(p.jobs))
	sc.preempted, sc.lostToHigher = preempted, lostToHigher
	k := 0
	for r := range p.mach {
		m := &p.mach[r]
		mid := in.Machines[m.in].ID
		first := true
		for s := int32(0); s < m.slots; s++ {
			g := m.off + s
			jr := p.slotJob[g]
			if jr != 0 {
				x := &res.Instances[k]
				k++
				kind := p.slotKind[g]
				x.Job, x.Machine, x.Slot, x.Kind = ids[jr-1], mid, int(s), kinds[kind]
				if first {
					e.machine(mid)
					first = false
				}
				// planEncoder.entry with str(job) encoded once per job,
				// by hand: a call per instance shows at a million.
				b := e.buf
				if s < 0x80 {
					b = append(b, tags[kind], byte(s))
				} else {
					b = append(b, tags[kind])
					b = binary.AppendUvarint(b, uint64(s))
				}
				b = append(b, enc[encOff[jr-1]:encOff[jr]]...)
				if len(b) >= 31<<10 {
					e.h.Write(b)
					b = b[:0]
				}
				e.buf = b
			}
			if p.slotFlag[g]&fPreempted != 0 && jr != p.slotRun[g] {
				vr := p.slotRun[g] - 1
				preempted[vr]++
				if jr != 0 && jr-1 < vr {
					lostToHigher[vr] = true
				}
				res.Preempt = append(res.Preempt, Preemption{Job: ids[vr], Machine: mid, Slot: int(s), Mode: mode})
			}
		}
	}
	e.begin('P', len(res.Preempt))
	e.preemptions(res.Preempt)
	res.Hash = e.sum()
	sc.encBuf = e.buf
	everFits := make([]int8, p.nShapes) // 0 unknown, 1 yes, -1 no
	for r := range p.jobs {
		j := &p.jobs[r]
		sum := &res.Jobs[r]
		sum.ID = ids[r]
		sum.Primaries, sum.Secondaries = j.P, j.S
		sum.Wanted = j.wanted
		sum.Preempted = int(preempted[r])
		switch {
		case j.P+j.S >= j.wanted:
			if j.ssOff && j.P >= j.primWant {
				sum.Reason = ReasonSSDisabled
			}
		case p.nSlots == 0:
			sum.Reason = ReasonNoMachine
		case !p.everFits(j, everFits):
			sum.Reason = ReasonNotMet
		case lostToHigher[r]:
			sum.Reason = ReasonPreempted
		case p.freeTotal > 0:
			sum.Reason = ReasonResources
		default:
			sum.Reason = ReasonNoMachine
		}
	}
	return res
}

// everFits reports whether one instance of j fits some machine when that
// machine is empty.
func (p *planner) everFits(j *jobState, memo []int8) bool {
	if memo[j.shape] == 0 {
		memo[j.shape] = -1
		for r := range p.mach {
			m := &p.mach[r]
			if m.slots > 0 && (j.gpus == 0 || m.capG >= j.gpus) && fitsCap(m.capC, m.capC, j.cores) && fitsCap(m.capM, m.capM, j.mem) && fitsCap(m.capD, m.capD, j.disk) {
				memo[j.shape] = 1
				break
			}
		}
	}
	return memo[j.shape] > 0
}

// hashDomain starts the canonical encoding hashed into Result.Hash.
const hashDomain = "cshare/smartshare/plan/v1\n"

// hashResult is the hex SHA-256 of the canonical encoding of a plan's
// instances and preemptions, both sorted by machine ID, then slot:
//
//	"cshare/smartshare/plan/v1\n"
//	'I' uvarint(number of instances)
//	  per instance: ['M' str(machine), when the machine differs from the
//	  previous instance's] kind ('p' primary, 's' secondary) uvarint(slot) str(job)
//	'P' uvarint(number of preemptions)
//	  per preemption: ['M' str(machine), likewise] mode ('a' aggressive,
//	  'p' passive) uvarint(slot) str(job)
//
// where str(s) is uvarint(len(s)) followed by the bytes of s, and uvarint
// is encoding/binary's unsigned varint. The encoding is fixed: changing it
// changes every hash, so it needs a new domain string. Plan computes the
// same bytes while it builds the Result.
func hashResult(insts []Instance, pre []Preemption) string {
	var e planEncoder
	e.begin('I', len(insts))
	for i := range insts {
		x := &insts[i]
		if i == 0 || insts[i-1].Machine != x.Machine {
			e.machine(x.Machine)
		}
		tag := byte('s')
		if x.Kind == KindPrimary {
			tag = 'p'
		}
		e.entry(tag, x.Slot, x.Job)
	}
	e.begin('P', len(pre))
	e.preemptions(pre)
	return e.sum()
}

// planEncoder streams the canonical encoding into SHA-256.
type planEncoder struct {
	h   hash.Hash
	buf []byte
}

func (e *planEncoder) begin(section byte, n int) {
	if e.h == nil {
		e.h = sha256.New()
		if cap(e.buf) < 32<<10 {
			e.buf = make([]byte, 0, 32<<10)
		}
		e.buf = append(e.buf[:0], hashDomain...)
	}
	e.buf = append(e.buf, section)
	e.buf = binary.AppendUvarint(e.buf, uint64(n))
}

func (e *planEncoder) machine(id string) {
	e.buf = append(e.buf, 'M')
	e.buf = appendStr(e.buf, id)
}

func (e *planEncoder) entry(tag byte, slot int, job string) {
	b := e.buf
	if slot < 0x80 && len(job) < 0x80 {
		b = append(b, tag, byte(slot), byte(len(job)))
	} else {
		b = append(b, tag)
		b = binary.AppendUvarint(b, uint64(slot))
		b = binary.AppendUvarint(b, uint64(len(job)))
	}
	b = append(b, job...)
	if len(b) >= 31<<10 {
		e.h.Write(b)
		b = b[:0]
	}
	e.buf = b
}

func (e *planEncoder) preemptions(pre []Preemption) {
	for i := range pre {
		x := &pre[i]
		if i == 0 || pre[i-1].Machine != x.Machine {
			e.machine(x.Machine)
		}
		tag := byte('a')
		if x.Mode == PolicyPassive {
			tag = 'p'
		}
		e.entry(tag, x.Slot, x.Job)
	}
}

func (e *planEncoder) sum() string {
	e.h.Write(e.buf)
	return hex.EncodeToString(e.h.Sum(nil))
}

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// WriteTable writes r for people: one row per job (in priority order) with
// its primaries, secondaries, what it could use, its preempted instances
// and the reason it has less, then the preemptions and the plan hash. IDs
// and reasons are escaped (text.Escape): the input may come from anyone.
func WriteTable(w io.Writer, r Result) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tPRIMARIES\tSECONDARIES\tWANTED\tPREEMPTED\tREASON")
	for _, j := range r.Jobs {
		reason := j.Reason
		if reason == "" {
			reason = reasonPlaceholder
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\n", text.Escape(j.ID), j.Primaries, j.Secondaries, j.Wanted, j.Preempted, text.Escape(reason))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Preempt) > 0 {
		if _, err := fmt.Fprintf(w, "\npreempt (%d):\n", len(r.Preempt)); err != nil {
			return err
		}
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  MACHINE\tSLOT\tJOB\tMODE")
		for _, x := range r.Preempt {
			fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\n", text.Escape(x.Machine), x.Slot, text.Escape(x.Job), x.Mode)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "\ninstances: %d  preemptions: %d  hash: %s\n", len(r.Instances), len(r.Preempt), r.Hash)
	return err
}
