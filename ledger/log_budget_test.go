package ledger

// uncount takes back what counting ineffective entry e changed in st:
// Ineffective and its machine's budget.
func uncount(st *State, e *Entry) {
	st.Ineffective--
	if b, ok := st.Budgets[e.author]; ok && b.Ineffective == 1 {
		delete(st.Budgets, e.author)
	} else if ok {
		b.Ineffective--
		st.Budgets[e.author] = b
	}
	if len(st.Budgets) == 0 {
		st.Budgets = nil
	}
}
