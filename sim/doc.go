// Package sim simulates a whole cshare org on one machine, in virtual time,
// to measure what its machines cost each other in gossip at sizes no test
// mesh reaches (a thousand machines; docs/scale.md).
//
// It owns the simulated transport and nothing of the node: machines are
// plain values driven by one event queue, one goroutine, a seeded random
// source, so a run is deterministic. What crosses the simulated links is
// what cshare sends, encoded by cshare's own code: signed heartbeats
// (p2p.Heartbeat), heads announcements (replica.HeadsPayload inside
// p2p.EncodeHeads) carrying signed ledger entries (ledger.Signer), and the
// entries a sync answer carries. GossipSub is reproduced, not run: per topic
// a mesh of degree D (cshare's 2 to 3, or GossipSub's default 6) over each
// machine's connections, flood publishing to every connected peer (cshare's
// setting), forwarding to the mesh once a message is validated, a seen-cache
// by message ID (sha256 of the data), and lazy gossip (IHAVE to Dlazy peers
// outside the mesh every second with the IDs of the last 3 seconds, IWANT
// back for what is missing). Sizes are those of GossipSub's protobuf RPCs
// (go-libp2p-pubsub/pb). Each machine's uplink serialises what it sends
// at Config.Bandwidth, each link adds Config.Latency, and each first copy
// of a message costs its receiver Config.CostHeartbeat or CostHeads of CPU
// before it is forwarded.
//
// Every machine validates every message as the node does: the signature
// and shape checks of p2p.DecodeVerifyHeartbeat, p2p.DecodeVerifyHeads,
// replica.ParseHeadsPayload and ledger.DecodeBatch (run once per message
// and shared by the machines unless Config.VerifyAll: their verdict is a
// function of the bytes alone), then its own checks (an approved machine, a
// sequence above the last). Machines fold the ledger: the first
// Config.Folders with a real ledger.Log; the others keep the entries they
// have, their heads, and the job's agenda (the first result of an item
// counts), which is what dispatch reads. Every slot picks its items with
// node/dispatch.Next from its machine's view (agenda, leases from the
// heartbeats it accepted through dispatch.Leases, announced instances), so
// two slots taking one item shows as items run twice.
//
// The node's behaviour is reduced to what shapes its traffic: a heartbeat
// every interval (less a random tenth), a change heartbeat when an
// instance takes an item (paced as node/sched paces them: settle and gap of
// 10 ms a machine, at most a quarter interval), results flushed into one
// job.results entry a second while any are pending, a heads announcement
// with every entry written and every 3 intervals, a fetch from the
// announcing machine when heads are missing after the pushed entries are
// folded, and from a heartbeat's machine 300 ms after its heartbeat named
// missing heads. The plan is computed once, by smartshare.Plan, when the
// job is submitted (every node computes the same one). Connections do not
// fail; machines do not restart.
package sim
