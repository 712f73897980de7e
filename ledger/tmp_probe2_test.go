package ledger

import (
	"testing"
	"time"

	"github.com/cshare/cshare/ledger/store"
)

func TestProbeApply(t *testing.T) {
	b := &testing.B{}
	_ = b
	setup, raws := benchLedger(t, 5000)
	st, _ := store.Open(t.TempDir(), nil)
	defer st.Close()
	l := NewLog()
	for _, e := range setup {
		l.Add(e)
	}
	var td, ta, ts time.Duration
	batch := []store.Block{}
	for i := range raws {
		s := time.Now()
		e, err := Decode(raws[i])
		if err != nil {
			t.Fatal(err)
		}
		td += time.Since(s)
		s = time.Now()
		if ae, err := l.Add(e); err != nil || ae != nil {
			t.Fatal(ae, err)
		}
		ta += time.Since(s)
		s = time.Now()
		batch = append(batch, store.Block{CID: e.CID(), Data: e.Bytes()})
		if len(batch) == 1000 {
			st.PutBlocks(batch)
			batch = batch[:0]
		}
		ts += time.Since(s)
	}
	t.Log(td/5000, ta/5000, ts/5000)
}
