package node

import (
	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/ref"
)

// candidate is something a reference may name (see package ref).
type candidate = ref.Candidate

// resolveRef finds the ID that r names among cands (see ref.Resolve).
func resolveRef(kind, list, r string, cands []candidate) (string, error) {
	return ref.Resolve(kind, list, r, cands)
}

// jobCandidates are the jobs person may see (every job for person "").
func jobCandidates(st *ledger.State, person string) []candidate {
	js := st.SortedJobs()
	out := make([]candidate, 0, len(js))
	for _, j := range js {
		if person == "" || st.CanSee(person, j) {
			out = append(out, candidate{ID: j.ID, Name: j.Spec.Name})
		}
	}
	return out
}
