package ledger

import "github.com/fxamacker/cbor/v2"

// itemChunk is how many items an ItemList keeps per chunk: what a fold
// copies when it writes one item of a published job (see cow.go).
const itemChunk = 256

// ItemList is a job's agenda, item i being the job's RangeStart+i. It is
// kept in chunks of itemChunk items, so that the fold of a job's results
// after a snapshot copies only the chunks it writes, not a million items.
// Readers use Len, At and AppendRange; the zero value is empty.
type ItemList struct {
	chunks [][]Item
	n      int
	// shared, when not nil, says which chunks this list shares with a
	// published one (share): they are copied before their first write.
	shared []bool
}

// NewItemList is a list of n pending items.
func NewItemList(n int) ItemList {
	l := ItemList{n: n}
	for lo := 0; lo < n; lo += itemChunk {
		l.chunks = append(l.chunks, make([]Item, min(itemChunk, n-lo)))
	}
	return l
}

// ItemsOf is a list holding items (for tests and simulations).
func ItemsOf(items ...Item) ItemList {
	l := NewItemList(len(items))
	for i, it := range items {
		*l.at(i) = it
	}
	return l
}

// Len is the number of items.
func (l ItemList) Len() int { return l.n }

// At is item i (0 <= i < Len).
func (l ItemList) At(i int) Item { return l.chunks[i/itemChunk][i%itemChunk] }

// Status is item i's status.
func (l ItemList) Status(i int) uint8 { return l.chunks[i/itemChunk][i%itemChunk].Status }

// AppendRange appends items lo..hi-1 to dst.
func (l ItemList) AppendRange(dst []Item, lo, hi int) []Item {
	for lo < hi {
		c, o := lo/itemChunk, lo%itemChunk
		k := min(hi-lo, itemChunk-o)
		dst = append(dst, l.chunks[c][o:o+k]...)
		lo += k
	}
	return dst
}

// Slice is a copy of every item.
func (l ItemList) Slice() []Item { return l.AppendRange(make([]Item, 0, l.n), 0, l.n) }

// at is item i, writable: a chunk shared with a published list is copied
// first.
func (l *ItemList) at(i int) *Item {
	c := i / itemChunk
	if l.shared != nil && l.shared[c] {
		l.chunks[c] = append([]Item(nil), l.chunks[c]...)
		l.shared[c] = false
	}
	return &l.chunks[c][i%itemChunk]
}

// share is a list equal to l whose writes copy the chunks they touch
// instead of writing l's.
func (l ItemList) share() ItemList {
	if l.n == 0 {
		return l
	}
	c := ItemList{chunks: append([][]Item(nil), l.chunks...), n: l.n, shared: make([]bool, len(l.chunks))}
	for i := range c.shared {
		c.shared[i] = true
	}
	return c
}

// clone is a deep copy of l.
func (l ItemList) clone() ItemList {
	c := ItemList{chunks: make([][]Item, len(l.chunks)), n: l.n}
	for i, ch := range l.chunks {
		c.chunks[i] = append([]Item(nil), ch...)
	}
	return c
}

// MarshalCBOR encodes the items as one flat array, as a []Item encodes:
// the chunks are how they are kept, not part of the state or its hash.
func (l ItemList) MarshalCBOR() ([]byte, error) {
	if l.n == 0 {
		return encMode.Marshal([]Item(nil)) // as a nil []Item: a zero or archived Job's
	}
	return encMode.Marshal(l.Slice())
}

// UnmarshalCBOR decodes a flat array of items.
func (l *ItemList) UnmarshalCBOR(b []byte) error {
	var flat []Item
	if err := cbor.Unmarshal(b, &flat); err != nil {
		return err
	}
	*l = ItemsOf(flat...)
	return nil
}
