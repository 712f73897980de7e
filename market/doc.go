// Package market is the pure core of cshare's market (docs/design.md §14,
// issue 18): offers and their checks, Vast's offer query language, the
// allocation of GPUs and baselines to rental contracts, the contract state
// machine, costs, and what running contracts reserve. Like smartshare it
// has no goroutines, clock, IO or randomness: time is an argument, ties
// are broken by ledger order and IDs, and no map order reaches an output,
// so every node computes the same answer from the same ledger.
//
// It does not own signing, gossip or the ledger: an Offer arrives here
// already verified (its ID is the content address the signing layer gave
// it), and the ledger's fold calls Open, Accept, Reject, Stop, Start,
// Extend and Remove in its total order, keeping an entry whose transition
// errs without effect.
//
// # Offers and queries
//
// An Offer is part of one machine: some of its GPUs (by device index),
// CPUs, memory and disk, at a price per hour (micro-dollars) and a disk
// price per GB-month, open from Created to Until, with a minimum contract
// duration. Offer.Check checks its own figures, Offer.Fits checks it
// against the machine's hardware. ParseQuery reads Vast's grammar
// (`gpus>=2 gpu_name in [RTX_4090,H100_SXM] price<1.5`; see query.go for
// the fields and units), ParseOrder a sort order (`price,gpus-`), and
// Search filters and sorts listings, by price when no order is given and
// always then by offer ID, so its output does not depend on its input's
// order. A bad query is a *QueryError: one line naming the term and what
// is allowed there.
//
// # Allocation
//
// On an offer with GPUs a contract asks for GPUs; on one without, for
// CPUs. Its share (asked of the offer's total) sets its baselines: CPU
// (millicores), memory and shm (half the offer's memory is its shm pool),
// and, unless asked, its disk. Baselines are what the contract keeps
// under contention; it may burst to the ceilings (the whole offer) while
// the machine is idle, at the risk Alloc.OOMRisk states. Disk is fixed at
// creation. A request takes the lowest-indexed GPUs of its offer that no
// other contract on the machine holds at its time; a contract holds its
// GPUs (or, on a CPU offer, its cores) while requested or running, and
// its disk until deleted. So of two requests for the same GPUs the first
// in ledger order gets them and the second is rejected, naming the holder.
//
// # Lifecycle
//
// requested -> running <-> stopped -> expired -> deleted, and rejected.
// The host's Accept starts the contract at the accept's time and sets its
// end (Duration later, or the offer's end); Reject refuses it with a
// reason; a request the host never answers reads as rejected once its
// offer ends. The renter stops and starts it; a start needs its own GPUs
// free. At its end a contract is expired and cannot start; the host may
// Extend it (an expired contract comes back stopped, since its GPUs may
// be another's by then); Policy.DeleteAfter (48h by default) after its end
// it is deleted, and Remove deletes it at once. Expired and deleted follow
// from the time State is asked at; nothing needs to be written for them.
// A rejected request holds nothing: its allocation keeps no GPU or core,
// so no message names it as a holder. Terminate ends a contract for a
// reason outside the market (its renter or host left the org, the org
// was deleted): a request is rejected, an accepted contract deleted with
// its end moved back to then, so it costs nothing after.
//
// # Figures
//
// Every figure is compared before it is added or multiplied: times are
// 0..MaxTime (the year 9999) or the transition is refused, durations at
// most MaxDuration (Extend refuses, with ErrDuration, what would take a
// contract past ten years from its start), offers' figures are bounded
// by Check, and costs saturate at the largest int64 instead of wrapping.
// So no end, deletion time or cost can overflow (CheckFigures states it;
// TestPropertyFiguresNeverOverflow checks it for any 64-bit figures).
//
// # Time, trust and costs
//
// Each transition is checked at its entry's time. The host signs Accept
// and Extend, so start and end are the host's clock. A renter's clock may
// run ahead of the host's, so a start may pass its check while, by the
// host's clock, another contract still runs on the GPU: Resolve settles
// such claims at read time, in order of the time each contract last
// started (then ledger order), and the later claimant waits. Billing is
// by the second (billing.go): compute while the contract runs, storage
// while it exists, within its term and nothing after its removal, from
// its Marks: each move's request time, the host's acknowledgement (Ack)
// and a third machine's witness (Witness), so that neither side moves a
// billed time in its favour by more than AckSlack (docs/design.md §14).
//
// # Invariants the tests check
//
//   - No GPU is held by two contracts that run at any time, and an offer's
//     cores are never over-held, whatever the operations and their times
//     (TestNoGPUHeldTwice); when entries follow one clock, the fold's
//     checks alone keep requested and running contracts exclusive and
//     Resolve has nothing to settle (TestClaimsExclusiveOnOneClock); when a
//     renter's start races a newer contract on its GPU, the one that
//     started first runs and the other waits (TestResolveClockAhead).
//   - The same operations give the same contracts; Resolve, Reservations,
//     Usage and Search do not depend on their input's order
//     (TestDeterministic, TestSearch).
//   - Usage is the sum of contract costs, renters' equals hosts'; a cost
//     grows with time, stops at the end and at the removal, runs no longer
//     than the contract exists, and splits additively to within a
//     micro-dollar (TestCostsAdditive); the billing scenarios
//     (testdata/billing.txt) forge late, early and missing
//     acknowledgements and back-dated requests.
//   - The baselines of the contracts holding an offer fit in the offer
//     (TestBaselinesWithinOffer).
//   - A transition that errs leaves the contract unchanged.
//
// Scenarios are in testdata/*.txt (scenario_test.go); parsers are fuzzed
// (fuzz_test.go).
package market
