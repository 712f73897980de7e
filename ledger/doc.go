// Package ledger is the org's replicated, signed ledger and the deterministic
// fold of it into the org's State (docs/design.md §4, §5, §6).
//
// # What it owns
//
//   - Entry: one signed, content-addressed fact. Its envelope is a CBOR map
//     with integer keys (org, kind, payload, author, parents, clock, time,
//     signature) in RFC 8949 core deterministic encoding; the payload inside is
//     canonical too (checkCanonical: shortest heads, sorted unique map keys,
//     definite lengths, no tags, no floats). So an entry has exactly one
//     encoding and one CID: CIDv1, codec cbor (0x51), sha2-256 of its bytes.
//     The author signs, with Ed25519, "cshare-entry-v1\x00" followed by the
//     encoding of the entry without its signature. Caps: 64 KiB an entry
//     (ErrTooLarge), 60 KiB a payload, 64 parents, clock < 2^53. Signer.Sign
//     builds entries; Decode and DecodeWithCID check everything that can be
//     checked without the DAG (shape, canonical form, caps, signature, CID).
//     Signatures are verified with curve25519-voi by the cofactored
//     equation (edkey.VerifyCofactored): everything crypto/ed25519 accepts,
//     and signatures with small-order components, which no honest signer
//     makes; it is the rule a batch can check, so DecodeBatch and
//     DecodeBatchWithCID (entries that arrive together) verify signatures in
//     batches and agree with Decode entry by entry (TestDecodeBatch,
//     FuzzDecodeEntry). The author's expanded key, peer ID and ID string
//     are cached.
//   - Apply: the pure fold of one entry into State, with the authority rules.
//     An entry Apply refuses is kept in the DAG with no effect, on every node
//     alike: only admins (and the owner) approve, reject, invite, change
//     roles, remove members, rotate the org key and change settings; the
//     owner's role cannot be changed or removed; members submit jobs, and
//     modify or cancel their own (admins any); only approved machines report
//     job results; a machine updates only itself.
//   - The fold as a table (fold.go): Apply checks what every entry shares
//     (time, genesis first, org, not deleted), then looks the kind up in
//     folds, a map from kind to that kind's fold function; kinds done by a
//     person find the acting person first (actingPerson). Lookups only:
//     nothing ranges over the table. Each kind's fold sits beside its
//     validator, in a file by area:
//     fold_org.go: org.genesis, org.update, org.key, org.transfer,
//     org.delete (ValidateSettings);
//     fold_machines.go: machine.register, machine.update, ledger.merge
//     (a machine as itself), machine.approve, machine.reject,
//     machine.remove;
//     fold_members.go: member.role, member.remove, and actingPerson and
//     needAdmin, the authority checks the others share;
//     fold_jobs.go: job.submit, job.modify, job.cancel, job.results
//     (ValidateJobSpec, ValidateJobModify);
//     fold_market.go: contract.request, .accept, .reject, .stop, .start,
//     .extend, .rm (ValidateContractSpec), and endContracts;
//     fold_datasets.go: dataset.add, dataset.rm, dataset.access
//     (ValidateDatasetAdd, ValidateDatasetAccess), and which datasets a
//     job may mount.
//     fold_sshkeys.go: sshkey.add, sshkey.rm (CheckSSHKey, in sshkey.go):
//     a person's SSH public keys, which the nodes' SSH gateways read;
//     checkpoint.go and archive.go: ledger.checkpoint, at whose fold
//     finished jobs leave the State for a summary (or altogether past
//     jobs.retain), handed whole to the State's sink for the node's disk.
//     testdata/fold/*.txt are scenarios of each kind's authority rule
//     (fold_scenario_test.go; regenerate with -rewrite).
//   - Capability and Token: an org key or invite code is a capability signed
//     by an admin (kind, id, role, expiry, uses) plus bootstrap addresses,
//     printed as "cshare1" + base64url(CBOR). ParseToken checks the shape and
//     the signature; Apply checks, at the position of the machine.register
//     that carries it, that the issuer is an admin there, that an org key's
//     id is the current one (org.key rotates it) and that an org key grants
//     member only, that an invite grants member or admin (never owner), and
//     for both kinds expiry (against the register entry's own time: the fold
//     has no clock, so a joiner who lies about the time can stretch an
//     expiry, but never uses) and uses. An org key admits a pending machine
//     (approved at once if the org does not require approval); an invite
//     admits it approved, with its role.
//   - Contracts (contract.go and fold_market.go, issue 18): offers are gossiped, not written;
//     a contract.request (a member, for themselves) carries the offer as its
//     host machine signed it (SignOffer, verified against the machine's key
//     and the org) and is folded by market.Open at its position: a request
//     whose GPUs an earlier one holds is rejected there, naming it, so the
//     first in ledger order wins on every node. contract.accept and
//     contract.reject are the host machine's own; stop and start the
//     renter's; extend the host person's; rm the renter's or the host's. A
//     transition the contract's state does not allow has no effect
//     (ErrMalformed). Times are the entries' own: accept and extend carry
//     the host's clock. ContractReservations is what running contracts hold
//     at a time, for SmartShare. Removing a person does not end their
//     contracts: they run to their end. contract.ack (the host machine)
//     and contract.witness (a third person's machine) stamp the moves
//     billing counts (market/billing.go).
//   - Policies (fold_policies.go, issue 30): org.update sets them; the
//     fold refuses a register beyond max_machines_per_user and a submit
//     beyond max_job_memory (ErrPolicy), queues jobs beyond
//     max_concurrent_jobs_per_user and lets them run in priority order as
//     others end, and fails a job on a job.expire at or past its first
//     start + max_job_runtime.
//   - Usage (usage.go): State.Usage, per person and machine over a window,
//     from the State alone.
//   - Log: the DAG in its one total order, with the State folded from it.
//   - Snapshots (cow.go, items.go): Log.Snapshot freezes the State for
//     readers; the fold goes on with a copy that shares what it does not
//     write (maps, objects, a job's items by chunks of 256).
//   - ledger/store: Badger, blocks by CID (SyncWrites) and small metadata.
//
// # The Log's invariants (what the tests check)
//
//   - Total order: entries sort by (clock, CID bytes); an entry's clock is
//     1 + the largest clock of its parents (Add refuses any other), so
//     parents sort first. The order never depends on arrival.
//   - Convergence: the State, and every entry's verdict, are a function of
//     the set of entries alone: any delivery order, one by one or in batches
//     of any size, gives the same State.Hash() (TestPropertyDeliveryOrder,
//     a rapid property over random multi-author DAGs with concurrent
//     branches, back-dated entries and power struggles; the authority
//     scenario tests replay every permutation).
//   - Authority: an entry without authority at its position has no effect,
//     and says why (Log.Verdict, Add's result), wrapping ErrNotAuthority or
//     ErrMalformed.
//   - Revocation wins: when an effective entry R removes or demotes member A,
//     every entry by A that sorts before R and is not an ancestor of R (R's
//     author had not seen it) is void (ErrVoid): it has no effect, whatever
//     its kind, including job results of A's machine (the items stay pending
//     and are run again). This stops a removed admin from back-dating entries
//     onto old parents. Entries by A sorting after R need no rule: A has lost
//     the role there. When two revocations void each other (two admins
//     removing each other concurrently), the higher role wins, then the
//     earlier grant, then the lower CID; the loser's revocation is void and
//     the winner's stands. Voids are computed to a fixed point from the DAG
//     (see Log.resolve). checkRevocationWins checks the rule on every random
//     DAG.
//   - Late entries: an entry sorting before folded entries re-folds from the
//     nearest checkpoint before it; checkpoints always equal a fresh fold of
//     their prefix (checkInternal, after every Add of random deliveries). A
//     change that can change the void set (a member.role or member.remove,
//     or any entry sorting before the last of those) recomputes it from
//     scratch, re-folding from the first position that can change: with
//     voids in the distant past that can mean most of the ledger, which is
//     acceptable because role changes are rare human acts.
//   - Snapshots: a frozen State never changes: it encodes to the same
//     bytes after any later folds (TestSnapshotsImmutable over random DAGs
//     and batches; the fold scenarios, before every entry of every kind),
//     and a Log snapshotted after every batch folds to the same State as
//     one never snapshotted.
//   - Jobs: the first completion of an item in total order counts; later
//     ones are ignored; a failure is retried up to the job's retries, then
//     the item fails; the job is done when every item is done, failed when
//     every item is finished and one failed. Removing a member removes its
//     machines and cancels its active jobs.
//
// Nothing here reads a clock, does IO (except ledger/store), or iterates a
// map into an output order. A Log is not safe for concurrent use; a frozen
// State may be read by any number of goroutines.
package ledger
