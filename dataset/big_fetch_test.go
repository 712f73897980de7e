package dataset

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

func TestExchangeFetchTwoLevels(t *testing.T) {
	dir := t.TempDir()
	if err := writeGolden(dir, "two-levels"); err != nil {
		t.Fatal(err)
	}
	seed := newNode(t, all)
	res, err := Import(context.Background(), seed.bs, filepath.Join(dir, "two-levels"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	fetcher := newNode(t, all)
	connect(t, fetcher.h, seed.h)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t0 := time.Now()
	if err := fetcher.x.Fetch(ctx, res.CID, nil); err != nil {
		t.Fatal(err)
	}
	t.Logf("fetched %d MB in %s", res.Size/1e6, time.Since(t0))
}
