// Package chaos is the nemesis of cshare (`make chaos`): its test, behind
// the chaos build tag, runs five node processes of the built binary, each in
// a network namespace of its own on a private Linux bridge, under a
// workload of range jobs whose items count their real runs in a file on the
// host, while a nemesis partitions the network, kills and restarts nodes
// with SIGKILL, pauses them with SIGSTOP and skews their clocks. A checker
// then asserts from every node's ledger, the run count and the processes
// left that no item was lost, recorded done twice or run twice unforced,
// that every job ended, and that the healed nodes converge on one state and
// one plan. The package has no code outside its test.
package chaos
