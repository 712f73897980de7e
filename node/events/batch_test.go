package events

import (
	"fmt"
	"reflect"
	"runtime"
	"testing"
	"time"
	"weak"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/multiformats/go-multihash"

	"github.com/cshare/cshare/ledger"
)

// batchOf is what a node's tracker derives from n job.results entries of
// machine m (item i ends item i; every third fails for good, every sixth
// with an error; every fifth is a duplicate run the state did not count), and the
// state after them.
func batchOf(t *testing.T, m *ledger.Signer, from, n int, self string) (*ledger.State, []*ledger.Entry) {
	t.Helper()
	st := newState()
	mh, err := multihash.Sum([]byte("genesis"), multihash.SHA2_256, -1)
	if err != nil {
		t.Fatal(err)
	}
	parent := cid.NewCidV1(cid.DagCBOR, mh)
	items := make([]ledger.Item, from+n)
	var es []*ledger.Entry
	for i := range from + n {
		it := ledger.Item{Status: ledger.ItemDone, Machine: m.ID().String(), DurationMS: int64(i)}
		r := ledger.ItemResult{Item: int64(i + 1), DurationMS: int64(i)}
		switch {
		case i%3 == 0:
			it.Status, it.Code = ledger.ItemFailed, 2
			r.Code = 2
			if i%2 == 0 { // and some without: no error left from the one before
				r.Error = fmt.Sprintf("exit %d", i)
			}
		case i%5 == 0:
			r.DurationMS++ // a duplicate run: not the one counted
		}
		items[i] = it
		if i < from {
			continue
		}
		e, err := m.Sign("o", ledger.KindJobResults, ledger.JobResults{Job: "j1", Results: []ledger.ItemResult{r}}, []cid.Cid{parent}, 1, int64(1_000_000+i))
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
	}
	st.Jobs["j1"] = &ledger.Job{ID: "j1", Machine: self, State: ledger.JobActive, Items: ledger.ItemsOf(items...),
		Spec: ledger.JobSpec{RangeStart: 1, RangeEnd: int64(from + n)}}
	return st, es
}

// PublishBatch, which builds only what a subscriber, a hook or the ring
// takes, is seen by every reader exactly as Publish of every event:
// the ring (all of it, and by topic after an ID), a subscriber of one
// topic, a hook of some types, across batches larger and smaller than the
// ring.
func TestPublishBatchAsPublish(t *testing.T) {
	m := newSigner(t)
	self := m.ID().String()
	now := time.Unix(1700000000, 0)
	clock := func() time.Time { return now }
	for _, sizes := range [][]int{{3, 10}, {RingSize + 100, 7}, {50, RingSize * 3 / 2, 5}} {
		type change struct {
			st *ledger.State
			es []*ledger.Entry
		}
		var changes []change
		from := 0
		for _, n := range sizes {
			st, es := batchOf(t, m, from, n, self)
			changes = append(changes, change{st, es})
			from += n
		}
		for _, watch := range []string{"", "sub", "hook"} {
			name := fmt.Sprintf("%v %s", sizes, watch)
			lazy, eager := NewBus(clock), NewBus(clock)
			var subs [2]*Sub
			var hooked [2][]Event
			for i, b := range []*Bus{lazy, eager} {
				switch watch {
				case "sub":
					_, _, subs[i] = b.Subscribe(Topics{TopicLedger}, 0, false)
				case "hook":
					want := func(typ string, mine bool) bool { return mine && typ == ItemFailed }
					b.OnPublishOf(want, func(e Event) { hooked[i] = append(hooked[i], e) })
				}
			}
			var tr Tracker
			tr.Baseline(newState())
			for _, c := range changes {
				bt := tr.Ledger(c.st, c.es, self)
				if got := bt.Len(); got < len(c.es) {
					t.Fatalf("%s: batch of %d entries has %d events", name, len(c.es), got)
				}
				lazy.PublishBatch(bt)
				eager.Publish(bt.Events()...)
			}
			for _, q := range []struct {
				topics Topics
				after  uint64
			}{{nil, 0}, {Topics{TopicJobs}, 0}, {Topics{TopicLedger}, eager.next - 20}, {nil, eager.next - uint64(RingSize) - 5}} {
				a, gapA := lazy.Recent(q.topics, q.after)
				b, gapB := eager.Recent(q.topics, q.after)
				if !reflect.DeepEqual(a, b) || gapA != gapB || len(b) == 0 {
					t.Fatalf("%s: Recent(%v, %d): %d events (gap %v), want %d (gap %v)", name, q.topics, q.after, len(a), gapA, len(b), gapB)
				}
			}
			if watch == "sub" {
				lazy.Close()
				eager.Close()
				var got [2][]Event
				for i, s := range subs {
					for e := range s.C {
						got[i] = append(got[i], e)
					}
				}
				if !reflect.DeepEqual(got[0], got[1]) || len(got[1]) == 0 {
					t.Fatalf("%s: subscriber got %d events, want %d", name, len(got[0]), len(got[1]))
				}
			}
			if !reflect.DeepEqual(hooked[0], hooked[1]) || (watch == "hook") != (len(hooked[1]) > 0) {
				t.Fatalf("%s: hook got %d events, want %d", name, len(hooked[0]), len(hooked[1]))
			}
		}
	}
}

// The items a batch ends: once each, by the counted run; failed ones with
// the result's error; the code and duration are the result's, the time
// the entry's.
func TestBatchItemEvents(t *testing.T) {
	m := newSigner(t)
	var tr Tracker
	tr.Baseline(newState())
	st, es := batchOf(t, m, 0, 7, "a")
	var got []string
	for _, e := range tr.Ledger(st, es, "a").Events() {
		if e.Type != ItemDone && e.Type != ItemFailed {
			continue
		}
		got = append(got, fmt.Sprintf("%s %s %d %v %v %d code=%v ms=%v", e.Type, e.Job, *e.Item, e.Data["error"], e.Mine, e.Time.UnixMilli(), e.Data["code"], e.Data["duration_ms"]))
	}
	want := []string{
		"item.failed j1 1 exit 0 false 1000000 code=2 ms=0", "item.done j1 2 <nil> false 1000001 code=0 ms=1",
		"item.done j1 3 <nil> false 1000002 code=0 ms=2", "item.failed j1 4 <nil> false 1000003 code=2 ms=3",
		"item.done j1 5 <nil> false 1000004 code=0 ms=4", "item.failed j1 7 exit 6 false 1000006 code=2 ms=6",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("item events:\n%v\nwant\n%v", got, want)
	}
}

func newSigner(t *testing.T) *ledger.Signer {
	t.Helper()
	k, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ledger.NewSigner(k)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The ring keeps what it needs of an unbuilt event, not its batch: the
// entries of a batch's events that left the ring can be collected.
func TestRingKeepsNoBatch(t *testing.T) {
	m := newSigner(t)
	b := NewBus(func() time.Time { return time.Unix(1700000000, 0) })
	first, last := func() (weak.Pointer[ledger.Entry], weak.Pointer[ledger.Entry]) {
		var tr Tracker
		tr.Baseline(newState())
		st, es := batchOf(t, m, 0, RingSize*3/2, "a") // about 2 events an entry: the first entries' leave the ring
		b.PublishBatch(tr.Ledger(st, es, "a"))
		return weak.Make(es[0]), weak.Make(es[len(es)-1])
	}()
	runtime.GC()
	if first.Value() != nil || last.Value() == nil {
		t.Fatalf("after a GC: the first entry kept %v (want not), the last %v (want kept: its item's event is in the ring)", first.Value() != nil, last.Value() != nil)
	}
	// The ring ends with the last item's event, then job.submitted.
	if got, _ := b.Recent(Topics{TopicJobs}, 0); len(got) < 2 || got[len(got)-2].Item == nil || *got[len(got)-2].Item != int64(RingSize*3/2) {
		t.Fatalf("the ring's last job events: %+v", got[max(0, len(got)-2):])
	}
}
