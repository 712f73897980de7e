package replica

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cshare/cshare/ledger"
)

// TestSlowReaderDelaysNoFold: a reader blocked for a second inside View (a
// slow handler) while entries are written and imported: the writes and
// their folds complete while the reader is still blocked, and the reader's
// State stays the one of its moment (issue 28, item 2). The order is
// shown with channels: were the fold to wait for the reader, the reader
// would give up its second first.
func TestSlowReaderDelaysNoFold(t *testing.T) {
	s := newSigner(t)
	r := open(t, t.TempDir(), s, Config{})
	org := genesis(t, r)

	inside, release, readerDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var keyBefore, keyAfter, hashBefore, hashAfter string
	go func() {
		defer close(readerDone)
		r.View(func(st *ledger.State) {
			keyBefore, hashBefore = st.OrgKeyID, st.Hash()
			close(inside)
			select {
			case <-release:
			case <-time.After(time.Second):
			}
			keyAfter, hashAfter = st.OrgKeyID, st.Hash()
		})
	}()
	<-inside

	// Entries for Import: org key rotations by this machine, on top of
	// what the writes leave.
	writesDone := make(chan error, 1)
	go func() {
		writesDone <- func() error {
			for i := range 2 {
				if _, err := r.Write(context.Background(), ledger.KindOrgKey, ledger.OrgKey{KeyID: fmt.Sprintf("w%d", i)}); err != nil {
					return err
				}
			}
			var es []*ledger.Entry
			heads, clock := r.Heads()
			for i := range 4 {
				e, err := s.Sign(org, ledger.KindOrgKey, ledger.OrgKey{KeyID: fmt.Sprintf("i%d", i)}, heads, clock, time.Now().UnixMilli())
				if err != nil {
					return err
				}
				es = append(es, e)
				heads, clock = e.Parents[:0:0], e.Clock
				heads = append(heads, e.CID())
			}
			return r.Import(es)
		}()
	}()
	select {
	case err := <-writesDone:
		if err != nil {
			t.Fatal(err)
		}
	case <-readerDone:
		t.Fatal("the writes waited for a reader inside View: a slow reader delays the fold")
	}
	select {
	case <-readerDone:
		t.Fatal("the reader returned before it was released")
	default:
	}
	var got string
	r.View(func(st *ledger.State) { got = st.OrgKeyID })
	if got != "i3" {
		t.Errorf("after the writes the State's org key is %q, want i3", got)
	}
	if r.Len() != 7 {
		t.Errorf("%d entries, want 7", r.Len())
	}
	close(release)
	<-readerDone
	if keyBefore != "k0" || keyAfter != keyBefore || hashAfter != hashBefore {
		t.Errorf("the reader's State changed under it: org key %q then %q", keyBefore, keyAfter)
	}
}
