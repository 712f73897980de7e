package ledger

import "testing"

// TestRunList: runs come back in order across chunks, and a clone keeps
// its own view while both it and the original go on adding.
func TestRunList(t *testing.T) {
	var l RunList
	for i := 0; i < 3000; i++ {
		l.Add(Run{Item: int64(i)})
	}
	if l.Len() != 3000 {
		t.Fatalf("Len = %d", l.Len())
	}
	for _, c := range l {
		if cap(c) > maxRunChunk {
			t.Fatalf("a chunk of %d runs", cap(c))
		}
	}
	c := l.clone()
	l.Add(Run{Item: -1})
	c.Add(Run{Item: -2})
	check := func(l RunList, last int64) {
		t.Helper()
		i := int64(0)
		l.Each(func(r Run) {
			want := i
			if i == 3000 {
				want = last
			}
			if r.Item != want {
				t.Fatalf("run %d is item %d, want %d", i, r.Item, want)
			}
			i++
		})
		if i != 3001 {
			t.Fatalf("%d runs", i)
		}
	}
	check(l, -1)
	check(c, -2)
}
