// Package p2p owns cshare's networking edge: the machine identity (an
// Ed25519 libp2p key persisted with LoadOrCreateKey; its peer ID is the
// machine ID), the libp2p host (TCP and QUIC, Noise, yamux, a connection
// manager with watermarks 64/256, a resource manager with libp2p's default
// limits scaled to the machine, no relay or NAT service), the GossipSub router
// and the org topics with their validators, heartbeats, and the heartbeat
// catch-up stream protocol. Other stream protocols (block exchange, job RPC)
// register on Host.LibP2P(); the ledger sync engine lives in p2p/sync*.go,
// the item-output protocol in logs.go, and the witness protocol, with which
// a joiner gets an approved machine's countersignature of its invite
// redemption (WitnessProtocol), in witness.go.
//
// # A closed org
//
// Once the host has joined an org, the Gate (gate.go) admits only the
// org's machines (approved or pending, from the node's ledger), joiners
// that proved a current org key or usable invite over AdmitProtocol
// (admit.go: a challenge-response signed by the joiner's machine key,
// bound to a fresh nonce and to both peer IDs), and machines that were
// removed or rejected, which are served the ledger only up to the entry
// that says so (SyncHorizon). A connection gater refuses peers that failed
// admission or were cut off; a sweep closes strangers' connections after
// Probation, and former machines' after DepartGrace; every inbound
// stream's protocol is checked at negotiation (through the resource
// manager, so every protocol is covered): sync to machines, joiners and
// former machines; heartbeat fetch, logs, the dataset exchange and
// anything else to approved machines; admission, witnessing, tombstones,
// identify, ping and pubsub itself to anyone connected. Pubsub's
// subscription filter takes subscriptions to the org's ledger topic from
// machines and joiners only, and to its other topics (heartbeats, offers)
// from approved machines only, so nothing else is published to anyone
// else; the peer filter keeps the same peers out of each topic's mesh and
// gossip. A sender over a topic's rate limit (ratelimit.go)
// has its excess ignored and, when it floods, is graylisted.
//
// # Gossip
//
// Pubsub carries only small signed signals (docs/design.md §8):
//
//   - /cshare/<org>/ledger: heads announcements. The payload is opaque to this
//     package (the sync layer encodes it); on the wire it is wrapped with a
//     per-sender sequence number and signed by the sender's machine key, so
//     every PublishHeads call is a new message even with unchanged heads.
//     Only registered machines (Membership.IsMachine) may announce.
//   - /cshare/<org>/heartbeat: Heartbeat, canonical CBOR, signed by the
//     machine's key over a domain tag and the org ID, with a Seq that grows
//     across restarts (seeded from unix nanoseconds). Only approved machines
//     (Membership.IsApproved) may send one.
//
// Router settings: message data capped at MaxPayloadSize (64 KiB; the wire
// limit is 4 KiB more for the libp2p envelope, so a full-size payload still
// reaches the validators, which reject anything larger and count it);
// message IDs are sha256 of the data; libp2p's envelope signatures are off
// (StrictNoSign: pubsub drops any message that carries one), because every
// message carries its sender's own Ed25519 signature, which the validators
// check with a cached expanded key (internal/edkey): one verification per
// message per node instead of two. A forwarder can relay a genuine message
// but not alter or forge one. Peer scoring is on. Validation queues are
// deep (a wide job starting everywhere at once is a burst) and messages
// dropped for want of room are counted in cshare_gossip_dropped_total.
//
// Validators (inline on pubsub's workers; Membership must answer fast)
// drop, without penalty, messages of a sender over its rate limit, and
// reject, which costs the forwarding peer score (about five invalid messages
// in half an hour get a peer graylisted), messages that are too large,
// undecodable or non-canonical, unsigned or with a bad signature (checked
// against the key of the machine the message names), from a non-member, and
// heartbeat replays: Seq equal to the last accepted from that machine, or
// older than it by more than ReorderWindow (Seq counts nanoseconds). A
// heartbeat older than the last accepted one by less than that was overtaken
// or delayed on the way: it is ignored without penalty, and
// so is a heads announcement not newer than the sender's last (heads are
// cumulative, so the newer one supersedes it). Our own messages echoed back
// are ignored. A message from a non-member is only ignored, not rejected,
// when the Membership implements LagAware and says our ledger may lag behind
// the sender's. Counters: cshare_gossip_rejected_total{topic,reason} and
// cshare_gossip_ignored_total{topic,reason} with topic "ledger" or
// "heartbeat"; per Org, Rejected() and Ignored() keyed "<topic>/<reason>".
// The IP-colocation score penalty is off: the machines of one office share a
// public address.
//
// Content-hash IDs mean identical data is one message whoever sends it;
// heartbeats and heads envelopes always differ (machine, seq), so this only
// removes true duplicates.
//
// # Catching up
//
// A node that starts or reconnects learns the state of all machines without
// waiting an interval in two ways. (1) The node registers Org.SetBeat; when a
// peer joins the heartbeat topic the Org calls it (coalesced, at most once per
// BeatMinGap), so both sides of a new connection publish a fresh heartbeat at
// once. (2) Org.FetchSeen / FetchHeartbeats ask one connected peer over
// HeartbeatProtocol (/cshare/hb/1.0.0) for the latest heartbeat it knows of
// every approved machine, with its age; each is re-verified before use.
//
// Liveness is the pure bookkeeping the node keeps of heartbeats: Observe with
// the time passed in, Online = a heartbeat within OfflineAfter (3) intervals.
package p2p
