package sched

import (
	"strconv"
	"strings"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/jobspec"
	"github.com/cshare/cshare/smartshare"
)

// One admission rule for cores, memory and GPUs: a job that no approved
// machine of the org could fit (one instance, on an empty machine) is
// accepted, since machines may join later, with a warning at submit that
// names the resource and the largest machine's value; `job show` gives the
// same text as its requirements_not_met reason. No resource is refused at
// submit while another waits.

// machineCapacity is a machine as the balancer sees it: its slots and, when
// its heartbeats' limits are known, its cores (millicores), memory and GPUs
// (0 cores or memory: not declared, unconstrained).
func machineCapacity(m *ledger.Machine) smartshare.Machine {
	slots := int(m.Limits.MaxConcurrentJobs)
	if !m.HasLimits {
		slots = int(m.Hardware.CPUs)
	}
	mc := smartshare.Machine{ID: m.ID, Slots: max(slots, 0)}
	if m.HasLimits {
		mc.Cores = m.Hardware.CPUs * 1000 * m.Limits.CPULimit / 100
		mc.MemoryMB = m.Limits.MemoryLimit
		mc.GPUs = len(m.Limits.GPUs)
		mc.DiskMB = m.Limits.DiskLimit // jobs' --disk counts against it
	}
	return mc
}

// Unfit says why no approved machine of st could hold one instance of a
// job with spec's needs, naming each resource that no machine has enough
// of and the largest machine's value; "" when some machine fits it, or when
// the org has no machine that takes jobs at all (then no resource is at
// fault).
func Unfit(st *ledger.State, spec ledger.JobSpec) string {
	var ms []smartshare.Machine
	for _, m := range st.SortedMachines() {
		if m.Status != ledger.MachineApproved {
			continue
		}
		if mc := machineCapacity(m); mc.Slots > 0 {
			if spec.GPUMemoryMB > 0 && m.HasLimits { // only its GPUs with the memory asked for count
				mc.GPUs = 0
				for _, g := range m.Limits.GPUs {
					if g.MemoryMB >= spec.GPUMemoryMB {
						mc.GPUs++
					}
				}
			}
			ms = append(ms, mc)
		}
	}
	why := unfitOn(ms, spec.Cores, spec.MemoryMB, spec.GPUs)
	if why != "" && spec.GPUMemoryMB > 0 && strings.Contains(why, "GPU") {
		why += " with at least " + jobspec.FormatMB(spec.GPUMemoryMB) + " of memory each"
	}
	return why
}

// unfitOn is Unfit over the balancer's machines, by its own rule
// (smartshare's everFits: an empty machine with a slot, enough GPUs, and
// enough cores and memory where it declares them).
func unfitOn(ms []smartshare.Machine, cores, memMB, gpus int64) string {
	if len(ms) == 0 {
		return ""
	}
	fitsCap := func(cap, need int64) bool { return need == 0 || cap == 0 || cap >= need }
	var coresOK, memOK, gpusOK bool
	var maxCores, maxMem, maxGPUs int64
	for _, m := range ms {
		c, mem, g := fitsCap(m.Cores, cores), fitsCap(m.MemoryMB, memMB), int64(m.GPUs) >= gpus
		if c && mem && g {
			return ""
		}
		coresOK, memOK, gpusOK = coresOK || c, memOK || mem, gpusOK || g
		maxCores, maxMem, maxGPUs = max(maxCores, m.Cores), max(maxMem, m.MemoryMB), max(maxGPUs, int64(m.GPUs))
	}
	var why []string
	if !coresOK {
		why = append(why, jobspec.FormatCores(cores)+" cores per instance, above the largest machine's "+jobspec.FormatCores(maxCores))
	}
	if !memOK {
		why = append(why, jobspec.FormatMB(memMB)+" memory per instance, above the largest machine's "+jobspec.FormatMB(maxMem))
	}
	if !gpusOK {
		why = append(why, plural(gpus, "GPU")+" per instance, above the largest machine's "+strconv.FormatInt(maxGPUs, 10))
	}
	if len(why) == 0 {
		var need []string
		if cores > 0 {
			need = append(need, jobspec.FormatCores(cores)+" cores")
		}
		if memMB > 0 {
			need = append(need, jobspec.FormatMB(memMB)+" memory")
		}
		if gpus > 0 {
			need = append(need, plural(gpus, "GPU"))
		}
		why = append(why, "no machine has "+strings.Join(need, ", ")+" together")
	}
	return strings.Join(why, "; ")
}

func plural(n int64, what string) string {
	s := strconv.FormatInt(n, 10) + " " + what
	if n != 1 {
		s += "s"
	}
	return s
}

// UnfitWarning is the warning of a submitted job that no machine fits.
func UnfitWarning(why string) string {
	return "no approved machine of the org can run one instance of this job yet: " + why +
		"; it is accepted and waits until such a machine joins (cshare machine ls)"
}

// UnfitReason is `job show`'s requirements_not_met reason with what the
// job needs and the org lacks.
func UnfitReason(why string) string {
	return "requirements_not_met: no machine of the org can run one instance: " + why
}
