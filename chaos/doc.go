// Package chaos is the nemesis of cshare (`make chaos`): its test, behind
// the chaos build tag, runs five node processes of the built binary, each in
// a network namespace of its own on a private Linux bridge, under a
// workload of range jobs whose items count their real runs in a file on the
// host (with the GPUs each holds: the nodes record two GPUs each and one
// job in three asks one), while a nemesis partitions the network, kills and
// restarts nodes with SIGKILL, pauses them with SIGSTOP and skews their
// clocks; midway a sixth node joins the org from a checkpoint (the org
// writes one every 1,000 entries) and is faulted like the others. A checker then asserts from every node's ledger, the run count
// and the processes left that no item was lost, recorded done twice or run
// twice unforced, that no two runs on one machine held one GPU at once,
// that every job ended, and that the healed nodes converge on one state and
// one plan. The package has no code outside its test; the run log's parser
// and the GPU check (runlog_test.go, gpu_test.go) build without the tag, so
// their unit tests run in `go test ./...`. TestNAT (`make nat`, nat_test.go)
// reuses its namespaces and node processes for machines behind NAT routers:
// relays inside the org, hole punching, and what goes through a relay.
package chaos
