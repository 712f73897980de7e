package events

import (
	"reflect"
	"testing"

	"github.com/cshare/cshare/ledger"
)

// cborKeys is the cbor tags of struct type t's fields, in order.
func cborKeys(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		out = append(out, t.Field(i).Tag.Get("cbor"))
	}
	return out
}

// resultsView has ledger.JobResults' keys and ledger.ItemResult's: a key
// added there and not here would make every payload that uses it decode
// with an error here (unknown field), and its items end with no event.
func TestResultsViewMirrors(t *testing.T) {
	for _, c := range []struct{ view, ledger reflect.Type }{
		{reflect.TypeFor[resultsView](), reflect.TypeFor[ledger.JobResults]()},
		{reflect.TypeFor[resultView](), reflect.TypeFor[ledger.ItemResult]()},
	} {
		if got, want := cborKeys(c.view), cborKeys(c.ledger); !reflect.DeepEqual(got, want) {
			t.Errorf("%v's keys are %q, %v's are %q", c.view, got, c.ledger, want)
		}
	}
}

// A payload decodes into a resultsView when, and only when, it decodes
// into a ledger.JobResults, and to the same values, whether scan reads it
// or ledger.DecodePayload; decoding one after another into the same view
// leaves nothing of the one before. What a signer writes, scan reads.
func FuzzResultsView(f *testing.F) {
	var v resultsView
	for _, p := range []ledger.JobResults{
		{Job: "j1", Results: []ledger.ItemResult{{Item: 1, Code: 2, DurationMS: 3, OutputSize: 4, Instance: "i", Error: "exit 2", Started: 5, OOMKilled: true}}},
		{Job: "é", Results: []ledger.ItemResult{{Item: 7, Stopped: true, TimedOut: true}, {Item: 8, Error: string(make([]byte, 300))}}},
		{},
	} {
		b, err := ledger.EncodePayload(p)
		if err != nil {
			f.Fatal(err)
		}
		if len(p.Results) > 0 && !v.scan(b) { // (no results: null, which decode reads)
			f.Errorf("scan does not read %x, a signer's %+v", b, p)
		}
		f.Add(b)
	}
	f.Add([]byte{0xa1, 0x63, 'j', 'o', 'b', 0xf6})                                      // null
	f.Add([]byte{0xa1, 0x63, 'j', 'o', 'b', 0x62, 0xff, 0xfe})                          // not UTF-8
	f.Add([]byte{0xa1, 0x63, 'j', 'o', 'b', 0x7f, 0x61, 'a', 0xff})                     // indefinite
	f.Add([]byte{0xa1, 0x63, 'j', 'o', 'b', 0x78, 0x01, 'a'})                           // 1-byte length
	f.Add([]byte{0xa1, 0x63, 'j', 'o', 'b', 0x42, 'a', 'b'})                            // a byte string
	f.Add([]byte{0xa1, 0x63, 'J', 'O', 'B', 0x61, 'a'})                                 // another case
	f.Add([]byte{0xa2, 0x63, 'j', 'o', 'b', 0x61, 'a', 0x63, 'j', 'o', 'b', 0x61, 'b'}) // twice
	f.Add([]byte{0xa1, 0x63, 'j', 'o', 'b', 0x61, 'a', 0x00})                           // trailing
	f.Add([]byte{0xa1, 0x67, 'r', 'e', 's', 'u', 'l', 't', 's', 0x81, 0xa2, 0x64, 'c', 'o', 'd', 'e', 0x3b,
		0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x64, 'i', 't', 'e', 'm', 0x1b, 0x80, 0, 0, 0, 0, 0, 0, 0}) // int64's least, and an overflow
	f.Add([]byte{0xa1, 0x67, 'r', 'e', 's', 'u', 'l', 't', 's', 0x81, 0xa1, 0x63, 'o', 'o', 'm', 0xf4}) // false
	f.Add([]byte{0xa1, 0x67, 'r', 'e', 's', 'u', 'l', 't', 's', 0xf6})                                  // null results
	long, err := ledger.EncodePayload(ledger.JobResults{Job: "a long job ID, longer than any here", Results: make([]ledger.ItemResult, 5)})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := v.decode(long); err != nil { // something to leave behind
			t.Fatal(err)
		}
		var want ledger.JobResults
		werr := ledger.DecodePayload(data, &want)
		gerr := v.decode(data)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("ledger.JobResults: %v; resultsView: %v", werr, gerr)
		}
		if werr != nil {
			return
		}
		got := ledger.JobResults{Job: string(v.Job)}
		for _, r := range v.Results {
			got.Results = append(got.Results, ledger.ItemResult{Item: r.Item, Code: r.Code, DurationMS: r.DurationMS, OutputSize: r.OutputSize,
				Instance: string(r.Instance), Error: string(r.Error), Started: r.Started, Stopped: r.Stopped, OOMKilled: r.OOMKilled, TimedOut: r.TimedOut})
		}
		if len(want.Results) == 0 && len(got.Results) == 0 {
			want.Results, got.Results = nil, nil // [] and absent alike
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("resultsView decodes %+v, ledger.JobResults %+v", got, want)
		}
	})
}
