package p2p

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// LogsProtocol is the stream protocol with which a node asks the machine that
// ran an agenda item for the item's output, which stays on that machine.
//
// Wire: the client sends one frame (as in SyncProtocol), a CBOR map
// {"org", "job", "item"}, and the server answers with one frame
// {"size": n} or {"err": text, "missing": bool}, then n raw bytes, and
// closes. Only approved machines of the org that may see the job (machines
// of its submitter, of admins and of the owner: LogSource.MaySee) are
// answered.
const LogsProtocol = protocol.ID("/cshare/logs/1.0.0")

// Logs limits.
const (
	maxLogRequest = 1024
	logsTimeout   = time.Minute
)

// LogsRequest names one agenda item's output.
type LogsRequest struct {
	Org  string `cbor:"org"`
	Job  string `cbor:"job"`
	Item int64  `cbor:"item"`
}

type logsHeader struct {
	Size    int64  `cbor:"size,omitempty"`
	Err     string `cbor:"err,omitempty"`
	Missing bool   `cbor:"missing,omitempty"`
}

// LogSource is the node's side of LogsProtocol.
type LogSource interface {
	// LogsOrg is the org the node belongs to ("" before it has one).
	LogsOrg() string
	// MaySee says whether machine p may have the output of job's items:
	// nil if p is an approved machine of the org whose person may see the
	// job, else why not (sent back to p as the refusal).
	MaySee(p peer.ID, job string) error
	// OpenLog opens the output of item of job, with its size. An error
	// wrapping ErrNoLog says the node has none; others are refusals.
	OpenLog(job string, item int64) (io.ReadCloser, int64, error)
}

// ErrNoLog says the machine asked has no output for the item.
var ErrNoLog = errors.New("p2p: no output for that item here")

// ErrLogsRefused says the machine asked refused the request.
var ErrLogsRefused = errors.New("p2p: logs refused")

// decodeLogsRequest reads and checks a request frame's contents.
func decodeLogsRequest(b []byte) (LogsRequest, error) {
	var req LogsRequest
	if len(b) > maxLogRequest {
		return req, fmt.Errorf("%w: logs request of %d bytes", ErrTooLarge, len(b))
	}
	if err := syncDec.Unmarshal(b, &req); err != nil {
		return req, fmt.Errorf("p2p: logs request: %w", err)
	}
	if req.Org == "" || req.Job == "" {
		return req, errors.New("p2p: logs request: org and job are required")
	}
	return req, nil
}

// ServeLogs registers the logs protocol handler on h.
func ServeLogs(h host.Host, src LogSource) {
	h.SetStreamHandler(LogsProtocol, func(s network.Stream) {
		defer s.Close()
		_ = s.SetDeadline(time.Now().Add(logsTimeout))
		r, w := bufio.NewReader(s), bufio.NewWriter(s)
		b, err := hbReadFrame(r, maxLogRequest)
		if err != nil {
			_ = s.Reset()
			return
		}
		req, err := decodeLogsRequest(b)
		if err != nil {
			_ = writeSyncFrame(w, logsHeader{Err: err.Error()})
			return
		}
		if org := src.LogsOrg(); org == "" || req.Org != org {
			_ = writeSyncFrame(w, logsHeader{Err: "not an approved machine of org " + req.Org})
			return
		}
		if err := src.MaySee(s.Conn().RemotePeer(), req.Job); err != nil {
			_ = writeSyncFrame(w, logsHeader{Err: err.Error()})
			return
		}
		f, size, err := src.OpenLog(req.Job, req.Item)
		if err != nil {
			_ = writeSyncFrame(w, logsHeader{Err: err.Error(), Missing: errors.Is(err, ErrNoLog)})
			return
		}
		defer f.Close()
		if err := writeSyncFrame(w, logsHeader{Size: size}); err != nil {
			return
		}
		if _, err := io.CopyN(w, f, size); err != nil {
			_ = s.Reset()
			return
		}
		_ = w.Flush()
	})
}

// FetchLog asks machine p for the output of req's item, at most limit bytes.
// The error wraps ErrNoLog when p has none, ErrLogsRefused when p refused.
func FetchLog(ctx context.Context, h host.Host, p peer.ID, req LogsRequest, limit int64) ([]byte, error) {
	s, r, err := request(ctx, h, p, LogsProtocol, logsTimeout, req)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	var hdr logsHeader
	if err := readSyncFrame(r, &hdr); err != nil {
		_ = s.Reset()
		return nil, fmt.Errorf("p2p: logs response from %s: %w", p, err)
	}
	switch {
	case hdr.Missing:
		return nil, fmt.Errorf("%w: %s", ErrNoLog, hdr.Err)
	case hdr.Err != "":
		return nil, fmt.Errorf("%w: %s", ErrLogsRefused, hdr.Err)
	case hdr.Size < 0 || hdr.Size > limit:
		_ = s.Reset()
		return nil, fmt.Errorf("p2p: logs response from %s: %d bytes, limit %d", p, hdr.Size, limit)
	}
	out := make([]byte, hdr.Size)
	if _, err := io.ReadFull(r, out); err != nil {
		_ = s.Reset()
		return nil, fmt.Errorf("p2p: logs from %s: %w", p, err)
	}
	return out, nil
}
