// Package smartshare is the SmartShare balancer of cshare (docs/design.md
// §10): a pure function from the replicated state (org config,
// machines and their slots, jobs, running instances) to a plan (the target
// layout of instances on concrete slots, the preemptions needed to reach
// it, and a per-job explanation). Every node runs Plan on the same Input
// and acts only on its own slots, so Plan is exactly deterministic: no
// goroutines, clocks, IO or randomness that reaches the output, no map
// iteration, integer arithmetic only; the same Input with its slices in any
// order gives the same Result and Hash.
//
// The package owns: the Go types of the plan input and result and their
// JSON forms, Validate and DecodeInput (strict, one-line errors naming the
// field), Plan, the canonical plan hash, WriteTable and RunPlanCommand (the
// `cshare smartshare plan` command). It does not own how the state is
// built (ledger fold), nor carrying the plan out (node, runtime).
//
// # Semantics
//
// Jobs are ranked by priority (1 highest .. 9999 lowest; 0 means 9999),
// then submission time (smaller first), then ID. A job wants
// min(cpus, items_remaining) primaries and min(effective max_cpus - cpus,
// the rest of its items) secondaries, where the effective max_cpus is the
// job's max_cpus, or the org default when unspecified, with "*" or any
// negative value meaning max_cpus_limit and anything above the limit capped
// to it; max_cpus 0, or mode "none", means no secondaries. A job never has
// more instances than items left, so no instance sits idle.
//
// Primaries are placed in rank order. A primary outranks every secondary:
// a job's missing primaries may preempt any other job's secondaries (unless
// the policy is "disabled"), whatever the two jobs' priorities:
// secondaries run "at a lower priority" (docs/design.md §10). Running
// primaries are never preempted, even for a higher-priority job's
// primaries: that job waits.
//
// The slots not taken by primaries (the surplus) are water-filled over the
// jobs that have all their primaries: every job gets min(cap, L)
// secondaries for the largest level L that fits, and the r slots left over
// go one each to jobs below their cap, first to jobs already running L+1
// secondaries, then in rank order. So any two jobs below their caps differ
// by at most one secondary, and an imbalance of one never causes a
// preemption (from an empty farm the leftover simply goes by rank). With
// preemption disabled, a job keeps the secondaries it runs (they are a
// floor) and only free slots are shared out.
//
// Running instances stay where they are whenever they can. Each job keeps
// its running instances up to what it wants, oldest first (primaries
// first); its first min(kept, cpus) are labelled primaries, so when a
// primary ends one of the job's running secondaries (the oldest) becomes a
// primary instead of a new one starting. A running instance that is no
// longer wanted (its job is gone, its items ran out, max_cpus or the limit
// went down, or its machine no longer has the capacity) is simply absent
// from the target: that is not a preemption. A preemption is a running
// instance whose slot (or, with resources, whose share of the machine) is
// given to another job.
//
// Victims are the running secondaries a job has over its share (its
// "excess"), taken from the lowest-ranked job first and, within a job,
// most recently started first (larger Started; ties by machine, then slot,
// descending). Aggressive preemptions stop now; passive ones let the
// instance finish its current item. In both cases Result.Instances already
// shows the new occupant of the slot: the node starts it when the slot is
// free. With policy "disabled" nothing is ever preempted and new work
// waits for free slots.
//
// # Machine resources
//
// A job may need, per instance, cores (millicores), memory_mb and gpus; a
// machine may declare its capacity. Zero cores or memory on a machine means
// "not declared, unconstrained"; a job needing GPUs only fits machines with
// that many GPUs left. An instance fits a slot when the machine's remaining
// capacity covers it, and a machine never runs more than Slots instances.
// When no job's needs are constrained by any machine, placement is pure
// counting (the "count model" above, realised slot by slot). Otherwise:
//
//   - New instances take a free slot on the first machine, in best-fit
//     order (fewest GPUs, then fewest cores, then least memory, then ID),
//     that fits them, so plain jobs leave GPU machines to the jobs that
//     need them.
//   - A missing primary that fits no free slot may take a machine that it
//     would fit with all that machine's secondaries gone; there it preempts
//     secondaries in victim order (excess secondaries first) until it fits,
//     then spares any that turned out not to be needed.
//   - Secondaries are placed one at a time, the job with the fewest first
//     (then by rank): a free slot that fits, or else the slot of a secondary
//     of a job with at least two more whose removal makes room (the job with
//     the most first, then the lowest priority). Passes repeat until nothing
//     changes, which makes the plan a fixed point.
//
// # Reasons
//
// JobSummary.Reason is set when a job has fewer instances than it wants:
// requirements_not_met when no machine could hold even one instance of it
// when empty; preempted_by_higher_priority when some of its running
// instances were given to higher-ranked jobs in this plan;
// resource_limits when slots are free but none fits it; otherwise
// no_machine_available (no slots, or every slot holds work that may not be
// taken from, including a fair share of secondaries). A job that has all it
// wants but could use more items gets smartshare_disabled when SmartShare
// is off for it (mode none, or max_cpus 0).
//
// # Hash
//
// Result.Hash is the hex SHA-256 of a canonical byte encoding of
// Result.Instances and Result.Preempt, documented at hashResult. It is
// fixed forever (testdata/hash.txt pins values); another encoding needs a
// new domain string.
//
// # Invariants and the tests that check them
//
// The invariants are written in invariants_test.go as functions of
// (Input, Result), independent of the planner, and checked by one rapid
// property test each (props_test.go; small and medium farms, random or
// settled running instances, with and without resources) and on every
// `plan` of the datadriven scenarios in testdata/*.txt (scenario_test.go):
//
//   - capacity: one instance per slot, slots in range, sorted layout, each
//     machine's slots, cores, memory and GPUs respected; every preemption is
//     a running instance whose job loses the slot. TestPropCapacity.
//   - primary floor: a job never has fewer primaries than
//     min(cpus, items, instances it ran), never more than min(cpus, items),
//     secondaries only with all primaries; a needed running primary never
//     moves. TestPropPrimaryFloor.
//   - caps: at most max(effective max_cpus, cpus) instances, at most
//     items_remaining, no secondaries with SmartShare off. TestPropCaps.
//   - balance: two jobs with all their primaries, one below its cap, differ
//     by at most one secondary; with preemption disabled the larger one got
//     no new secondaries; with resources the imbalance cannot be fixed by a
//     free slot or a swap. TestPropBalance.
//   - no idle slot: no free slot fits a job that could use more instances.
//     TestPropNoIdle.
//   - victim order (without resources): preemptions only when no slot is
//     free and only to give the slot to another job; a job's victims are
//     its most recently started secondaries; a job that lost instances never
//     ends with fewer secondaries than a lower-priority job.
//     TestPropVictimOrder.
//   - modes: "disabled" preempts nothing; every preemption carries the
//     configured mode. TestPropModes.
//   - summaries agree with the layout and the hash recomputes.
//     TestPropSummary.
//   - determinism: shuffled input slices give an identical Result.
//     TestPropDeterminism.
//   - fixed point: carry the plan out (its instances become the running
//     ones) and plan again: no preemptions, the same layout.
//     TestPropFixedPoint.
//   - monotonicity: one more slot never lowers any job's number of
//     instances, when no machine resources constrain placement.
//     TestPropMonotone. With resources this is false in general (a slot on
//     a small machine can let a lower-priority job's primary fit elsewhere,
//     and a primary outranks a secondary): TestMonotoneFailsWithResources
//     pins a counterexample.
//   - the resource-aware secondary phase gives the same per-job counts as
//     the count model when no resources apply.
//     TestPropRepairMatchesCountModel.
//   - Plan never panics and stays deterministic on invalid input.
//     TestPlanInvalidInput; DecodeInput never panics and what it accepts
//     plans within the invariants: FuzzDecodeInput.
//
// # Cost
//
// Without resource constraints Plan is O((slots + jobs) log jobs + running
// instances): a sort of the jobs, one pass over the slots to keep running
// instances, a binary search for the water level, and one pass to place new
// instances and build the result; there is no jobs x slots term
// (BenchmarkPlanSlots, BenchmarkPlanJobs). With resources, the free-slot
// search keeps one cursor per distinct job shape (cores, memory, gpus), and
// a job with needs that looks for a swap scans the slots of the machines
// its shape could ever use; failures are cached per shape until something
// that could change them happens. The worst case grows with shapes x slots
// (BenchmarkPlanResources10kJobs100kSlots: 64 shapes).
//
// Validate bounds the input so that Plan's memory stays bounded: at most
// MaxSlotsPerMachine slots per machine and MaxTotalSlots in all; resources
// at most MaxResource (cores, memory) and MaxGPUs.
package smartshare
