// Package dispatch decides which agenda item a slot takes next, with no
// dispatcher (docs/design.md §9): every node works it out for its own instances
// from the same inputs, the job's agenda and the plan.
//
// It owns the deterministic part of agenda dispatch: the owner Ring (items
// to planned instances by consistent hashing), the item Buckets that find
// an owner's items fast, the Owners of a job under a plan, the lease book
// as data (Leases), and Next, which, given a read-only View, a slot's
// Cursor and the time, returns the slot's next item. It has no locks, no
// clock, no goroutines and no I/O: package node gathers the View under its
// locks, keeps the caches (rings, buckets, owners) and passes its now.
//
// Invariants its tests check:
//   - Ring.ItemsOf gives exactly the items Ring.OwnerOf gives an owner, and
//     NewRing's in-place sort equals a comparison sort by (place, owner).
//   - While the plans agree and no owner is missing, slots deciding at the
//     same moment never take the same item; an owner's pick is its own
//     whatever it knows of others' leases, no thief that knows at least the
//     leases the owner knows takes it, and two thieves never take the same
//     item whatever each knows (a thief takes only the items it backs up,
//     Ring.BackupOf); for OwnerGrace after a plan change, while machines
//     may decide by the old plan or the new, two thieves still never take
//     the same item (a thief leaves an item another slot backs up under the
//     previous plan). Every node changes plans on the same ledger entry and
//     wakes its idle slots, so slots decide at once just after a change:
//     until OwnerGrace+IdleSteal after the job's owners change, slots
//     deciding from one view never take the same item, however long they
//     have been idle (a thief leaves alone, like the owner, the items that
//     changed owner, an owner's reserve is among the items it may take,
//     and an idle slot's clock starts again OwnerGrace after the change).
//     Two slots never take the same orphan (an item whose owner does not
//     run) whatever leases each knows, while their nodes agree on which
//     owners run: each orphan's takers (Ring.Takers) depend on the ring and
//     on who runs only, the first takes it when idle and the k-th only in
//     the k-th span of IdleSteal of an idle slot's orphan clock, which
//     starts again when the orphans it sees change; so slots that wake
//     together, however long idle, never take one orphan twice, and none
//     is left behind while its first taker runs.
//   - Every pending item is taken by some running slot in bounded time,
//     whoever of its owners is gone (orphans), reserved (IdleSteal) or
//     just moved by a plan change (OwnerGrace).
//   - A machine's claim on an item that the plan never places lapses
//     grace after it was first seen, however often it is dropped and made
//     again; a claim the plan placed while it was held counts until it is
//     dropped (Leases.Counts); with an item timeout, no claim counts once
//     the timeout plus one heartbeat interval has passed since it was
//     first seen, until the item's runs in the ledger change.
//   - Results do not depend on map iteration order.
package dispatch
