package smartshare

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"text/tabwriter"
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
	res := Result{
		Instances: make([]Instance, 0, nInst),
		Preempt:   make([]Preemption, 0, nPre),
		Jobs:      make([]JobSummary, len(p.jobs)),
	}
	mode := PolicyAggressive
	if p.policy == polPassive {
		mode = PolicyPassive
	}
	preempted := make([]int32, len(p.jobs))
	for r := range p.mach {
		m := &p.mach[r]
		mid := in.Machines[m.in].ID
		for s := int32(0); s < m.slots; s++ {
			g := m.off + s
			if jr := p.slotJob[g]; jr != 0 {
				kind := KindSecondary
				if p.slotKind[g] == kPrimary {
					kind = KindPrimary
				}
				res.Instances = append(res.Instances, Instance{Job: in.Jobs[p.jobs[jr-1].in].ID, Machine: mid, Slot: int(s), Kind: kind})
			}
			if p.slotFlag[g]&fPreempted != 0 && p.slotJob[g] != p.slotRun[g] {
				vr := p.slotRun[g] - 1
				preempted[vr]++
				res.Preempt = append(res.Preempt, Preemption{Job: in.Jobs[p.jobs[vr].in].ID, Machine: mid, Slot: int(s), Mode: mode})
			}
		}
	}
	everFits := make([]int8, p.nShapes) // 0 unknown, 1 yes, -1 no
	for r := range p.jobs {
		j := &p.jobs[r]
		sum := &res.Jobs[r]
		sum.ID = in.Jobs[j.in].ID
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
		case j.preByPrim && preempted[r] > 0:
			sum.Reason = ReasonPreempted
		case p.freeTotal > 0:
			sum.Reason = ReasonResources
		default:
			sum.Reason = ReasonNoMachine
		}
	}
	res.Hash = hashResult(res.Instances, res.Preempt)
	return res
}

// everFits reports whether one instance of j fits some machine when that
// machine is empty.
func (p *planner) everFits(j *jobState, memo []int8) bool {
	if memo[j.shape] == 0 {
		memo[j.shape] = -1
		for r := range p.mach {
			m := &p.mach[r]
			if m.slots > 0 && (j.gpus == 0 || m.capG >= j.gpus) && fitsCap(m.capC, m.capC, j.cores) && fitsCap(m.capM, m.capM, j.mem) {
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
// instances and preemptions (both sorted by machine ID, then slot):
//
//	"cshare/smartshare/plan/v1\n"
//	'I' uvarint(#instances)
//	  per run of instances on one machine:
//	    str(machine) uvarint(#in run)
//	    per instance: uvarint(slot) str(job) kind ('p' primary, 's' secondary)
//	'P' uvarint(#preemptions)
//	  per run of preemptions on one machine:
//	    str(machine) uvarint(#in run)
//	    per preemption: uvarint(slot) str(job) mode ('a' aggressive, 'p' passive)
//
// where str(s) is uvarint(len(s)) followed by the bytes of s, and uvarint
// is encoding/binary's unsigned varint. The encoding is fixed: changing it
// changes every hash, so it needs a new domain string.
func hashResult(insts []Instance, pre []Preemption) string {
	h := sha256.New()
	buf := make([]byte, 0, 16<<10)
	flush := func() {
		if len(buf) > 15<<10 {
			h.Write(buf)
			buf = buf[:0]
		}
	}
	buf = append(buf, hashDomain...)
	buf = append(buf, 'I')
	buf = binary.AppendUvarint(buf, uint64(len(insts)))
	for i := 0; i < len(insts); {
		m := insts[i].Machine
		k := i
		for k < len(insts) && insts[k].Machine == m {
			k++
		}
		buf = appendStr(buf, m)
		buf = binary.AppendUvarint(buf, uint64(k-i))
		for ; i < k; i++ {
			x := &insts[i]
			buf = binary.AppendUvarint(buf, uint64(x.Slot))
			buf = appendStr(buf, x.Job)
			if x.Kind == KindPrimary {
				buf = append(buf, 'p')
			} else {
				buf = append(buf, 's')
			}
			flush()
		}
	}
	buf = append(buf, 'P')
	buf = binary.AppendUvarint(buf, uint64(len(pre)))
	for i := 0; i < len(pre); {
		m := pre[i].Machine
		k := i
		for k < len(pre) && pre[k].Machine == m {
			k++
		}
		buf = appendStr(buf, m)
		buf = binary.AppendUvarint(buf, uint64(k-i))
		for ; i < k; i++ {
			x := &pre[i]
			buf = binary.AppendUvarint(buf, uint64(x.Slot))
			buf = appendStr(buf, x.Job)
			if x.Mode == PolicyPassive {
				buf = append(buf, 'p')
			} else {
				buf = append(buf, 'a')
			}
			flush()
		}
	}
	h.Write(buf)
	return hex.EncodeToString(h.Sum(nil))
}

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// WriteTable writes r for people: one row per job (in priority order) with
// its primaries, secondaries, what it could use, its preempted instances
// and the reason it has less, then the preemptions and the plan hash.
func WriteTable(w io.Writer, r Result) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tPRIMARIES\tSECONDARIES\tWANTED\tPREEMPTED\tREASON")
	for _, j := range r.Jobs {
		reason := j.Reason
		if reason == "" {
			reason = reasonPlaceholder
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\n", j.ID, j.Primaries, j.Secondaries, j.Wanted, j.Preempted, reason)
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
			fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\n", x.Machine, x.Slot, x.Job, x.Mode)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "\ninstances: %d  preemptions: %d  hash: %s\n", len(r.Instances), len(r.Preempt), r.Hash)
	return err
}
