package p2p

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/libp2p/go-libp2p/core/peer"
)

type ptLogs struct {
	org      string
	approved map[peer.ID]bool
	logs     map[string][]byte // "job/item" -> output
	secret   string            // a job no machine may see
}

func (s *ptLogs) LogsOrg() string { return s.org }
func (s *ptLogs) MaySee(p peer.ID, job string) error {
	switch {
	case !s.approved[p]:
		return errors.New("not an approved machine")
	case job == s.secret:
		return errors.New("may not see job " + job)
	}
	return nil
}
func (s *ptLogs) OpenLog(job string, item int64) (io.ReadCloser, int64, error) {
	if job == "refuse" {
		return nil, 0, errors.New("job refuse is unknown")
	}
	b, ok := s.logs[fmt.Sprintf("%s/%d", job, item)]
	if !ok {
		return nil, 0, fmt.Errorf("%w: item %d of job %s", ErrNoLog, item, job)
	}
	return io.NopCloser(bytes.NewReader(b)), int64(len(b)), nil
}

// TestFetchLog: an approved machine of the org gets an item's output, whole
// (a large one too); a missing output, a refusal, a stranger, another org and
// an output over the caller's limit each give their own error.
func TestFetchLog(t *testing.T) {
	server, client, stranger := ptHost(t, nil), ptHost(t, nil), ptHost(t, nil)
	big := bytes.Repeat([]byte("frame output\n"), 300000) // 3.9 MB: many frames
	src := &ptLogs{org: ptOrg, approved: map[peer.ID]bool{client.ID(): true}, secret: "j2",
		logs: map[string][]byte{"j1/7": []byte("hello from item 7\n"), "j1/8": big, "j1/9": {}}}
	ServeLogs(server.LibP2P(), src)
	ptConnect(t, client, server)
	ptConnect(t, stranger, server)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	fetch := func(h *Host, req LogsRequest, limit int64) ([]byte, error) {
		return FetchLog(ctx, h.LibP2P(), server.ID(), req, limit)
	}
	for item, want := range map[int64][]byte{7: []byte("hello from item 7\n"), 8: big, 9: {}} {
		got, err := fetch(client, LogsRequest{Org: ptOrg, Job: "j1", Item: item}, 16<<20)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("item %d: %d bytes, %v; want %d bytes", item, len(got), err, len(want))
		}
	}
	for _, c := range []struct {
		name  string
		h     *Host
		req   LogsRequest
		limit int64
		is    error
		says  string
	}{
		{"missing", client, LogsRequest{Org: ptOrg, Job: "j1", Item: 1}, 1 << 20, ErrNoLog, "item 1 of job j1"},
		{"refused by the source", client, LogsRequest{Org: ptOrg, Job: "refuse", Item: 1}, 1 << 20, ErrLogsRefused, "unknown"},
		{"another person's job", client, LogsRequest{Org: ptOrg, Job: "j2", Item: 1}, 1 << 20, ErrLogsRefused, "may not see job j2"},
		{"stranger", stranger, LogsRequest{Org: ptOrg, Job: "j1", Item: 7}, 1 << 20, ErrLogsRefused, "not an approved machine"},
		{"other org", client, LogsRequest{Org: "other", Job: "j1", Item: 7}, 1 << 20, ErrLogsRefused, "not an approved machine"},
		{"no job", client, LogsRequest{Org: ptOrg, Item: 7}, 1 << 20, ErrLogsRefused, "org and job are required"},
		{"over the limit", client, LogsRequest{Org: ptOrg, Job: "j1", Item: 8}, 1 << 20, nil, "limit"},
	} {
		_, err := fetch(c.h, c.req, c.limit)
		if err == nil || (c.is != nil && !errors.Is(err, c.is)) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v; want %v saying %q", c.name, err, c.is, c.says)
		}
	}
}

// FuzzDecodeLogsRequest: any bytes give a request with org and job, or an
// error; never a panic.
func FuzzDecodeLogsRequest(f *testing.F) {
	for _, r := range []LogsRequest{{Org: ptOrg, Job: "j1", Item: 7}, {Org: "o", Job: "j", Item: -1}, {}} {
		b, err := cbor.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0xa3, 0x63})
	f.Add(bytes.Repeat([]byte{0x9f}, 2000))
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := decodeLogsRequest(b)
		if err == nil && (req.Org == "" || req.Job == "") {
			t.Fatalf("accepted %+v", req)
		}
		if len(b) > maxLogRequest && err == nil {
			t.Fatalf("accepted %d bytes", len(b))
		}
	})
}
