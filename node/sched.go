package node

import (
	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/replica"
)

// The scheduler (package sched) is built in Start; these are the node's
// hooks to wake it.

func (n *Node) kickScheduler() { signal(n.kick) }

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// runCounts sums, over the ledger's jobs, the runs it knows of and the
// duplicates among them.
func runCounts(rep *replica.Replica) (all, dups int64) {
	rep.View(func(st *ledger.State) {
		for _, j := range st.Jobs {
			all += j.RunCount()
			dups += j.Duplicates
		}
	})
	return all, dups
}
