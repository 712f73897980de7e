package gateway

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
)

// ArchiveProtocol is the stream protocol with which a node copies files in
// and out of a container that another machine runs, for its person: the
// asking machine's person must be the contract's renter, or may see the
// job (its submitter, an admin), as the API asks of its own.
//
// Wire: the client sends a frame (4 bytes of big-endian length, then
// JSON, at most maxArchiveFrame bytes) holding an archiveRequest; to put,
// the tar archive follows, and the client closes its side for writing.
// The server answers a frame holding an archiveAnswer; to get, the tar
// archive follows, to the end of the stream. A refusal is an answer with
// Err, and Code, the HTTP status the API answers with.
const ArchiveProtocol = protocol.ID("/cshare/archive/1.0.0")

// maxArchiveFrame bounds a request or answer frame.
const maxArchiveFrame = 8 << 10

// archiveHeaderTimeout bounds reading a request's frame; what follows
// lasts as long as the archive.
const archiveHeaderTimeout = 30 * time.Second

// Streams opens and serves libp2p streams (the node's libp2p host).
type Streams interface {
	NewStream(ctx context.Context, p peer.ID, pids ...protocol.ID) (network.Stream, error)
	SetStreamHandler(pid protocol.ID, handler network.StreamHandler)
}

type archiveRequest struct {
	Org  string `json:"org"`
	Job  bool   `json:"job,omitempty"`
	ID   string `json:"id"`
	Item int64  `json:"item,omitempty"`
	Path string `json:"path"`
	Put  bool   `json:"put,omitempty"`
}

type archiveAnswer struct {
	Err  string `json:"err,omitempty"`
	Code int    `json:"code,omitempty"`
}

func writeFrame(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(b) > maxArchiveFrame {
		return fmt.Errorf("frame of %d bytes; at most %d", len(b), maxArchiveFrame)
	}
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(b)))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

func readFrame(r io.Reader) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > maxArchiveFrame {
		return nil, fmt.Errorf("frame of %d bytes; at most %d", size, maxArchiveFrame)
	}
	b := make([]byte, size)
	_, err := io.ReadFull(r, b)
	return b, err
}

// decodeArchiveRequest reads and checks a request frame's contents.
func decodeArchiveRequest(b []byte) (archiveRequest, error) {
	var req archiveRequest
	if !utf8.Valid(b) {
		return req, errors.New("archive request: not UTF-8")
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, fmt.Errorf("archive request: %v", err)
	}
	switch {
	case req.Org == "" || req.ID == "" || len(req.ID) > 128 || len(req.Org) > 128:
		return req, errors.New("archive request: org and id are required, at most 128 bytes each")
	case req.Path == "" || len(req.Path) > api.MaxArchivePath || strings.ContainsAny(req.Path, "\x00\n\r"):
		return req, fmt.Errorf("archive request: path of %d bytes; allowed: 1 to %d bytes, one line", len(req.Path), api.MaxArchivePath)
	case req.Item < 0:
		return req, errors.New("archive request: a negative item")
	}
	return req, nil
}

// serveArchive answers one ArchiveProtocol stream.
func (s *Service) serveArchive(st network.Stream) {
	defer st.Close()
	from := st.Conn().RemotePeer()
	_ = st.SetReadDeadline(s.d.Now().Add(archiveHeaderTimeout))
	r := bufio.NewReader(st)
	b, err := readFrame(r)
	if err != nil {
		_ = st.Reset()
		return
	}
	_ = st.SetReadDeadline(time.Time{})
	refuse := func(err error) {
		code := http.StatusBadRequest
		var se *api.StatusError
		if errors.As(err, &se) {
			code = se.Code
		}
		_ = writeFrame(st, archiveAnswer{Err: strings.TrimPrefix(err.Error(), "cshare: "), Code: code})
	}
	req, err := decodeArchiveRequest(b)
	if err != nil {
		refuse(err)
		return
	}
	if req.Org != s.d.Ledger.Org() {
		refuse(api.Errorf(http.StatusForbidden, "this machine is not in org %s", req.Org))
		return
	}
	t := api.ArchiveTarget{Job: req.Job, Ref: req.ID, Item: req.Item, Path: req.Path}
	var ct copyTarget
	s.d.Ledger.View(func(st *ledger.State) {
		m := st.Machines[from.String()]
		if m == nil || m.Status != ledger.MachineApproved || st.Members[m.Owner] == nil {
			err = api.Errorf(http.StatusForbidden, "machine %s is not an approved machine of the org", from)
			return
		}
		ct, err = resolveCopy(st, m.Owner, t, s.d.Now().UnixMilli())
	})
	if err == nil && ct.ID != req.ID {
		err = api.Errorf(http.StatusBadRequest, "give the full ID") // the asking node resolved the reference
	}
	if err != nil {
		refuse(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if req.Put {
		if err := s.putHere(ctx, ct, r); err != nil {
			refuse(err)
			return
		}
		_ = writeFrame(st, archiveAnswer{})
		return
	}
	rc, err := s.getHere(ctx, ct)
	if err != nil {
		refuse(err)
		return
	}
	defer rc.Close()
	if err := writeFrame(st, archiveAnswer{}); err != nil {
		return
	}
	if _, err := io.Copy(st, rc); err != nil {
		_ = st.Reset() // the reader fails instead of taking a short archive
	}
}

// openArchive opens an ArchiveProtocol stream to ct's machine and sends
// its request.
func (s *Service) openArchive(ctx context.Context, ct copyTarget, put bool) (network.Stream, error) {
	if s.d.Streams == nil {
		return nil, errNoStreams
	}
	p, err := peer.Decode(ct.Machine)
	if err != nil {
		return nil, err
	}
	st, err := s.d.Streams.NewStream(ctx, p, ArchiveProtocol)
	if err != nil {
		return nil, api.Errorf(http.StatusBadGateway, "machine %s, which runs %s, cannot be reached: %v", ct.Machine, ct.ID, err)
	}
	req := archiveRequest{Org: s.d.Ledger.Org(), Job: ct.Job, ID: ct.ID, Item: ct.Item, Path: ct.Path, Put: put}
	if err := writeFrame(st, req); err != nil {
		_ = st.Reset()
		return nil, err
	}
	return st, nil
}

// answer reads the server's answer frame: nil, or its refusal as an API
// error.
func readAnswer(r io.Reader, machine string) error {
	b, err := readFrame(r)
	if err != nil {
		return api.Errorf(http.StatusBadGateway, "machine %s broke off the copy: %v", machine, err)
	}
	var a archiveAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		return api.Errorf(http.StatusBadGateway, "machine %s answered the copy with %q", machine, api.Ellipsize(string(b)))
	}
	if a.Err != "" {
		code := a.Code
		if code < 400 || code > 599 {
			code = http.StatusBadGateway
		}
		return api.Errorf(code, "machine %s: %s", machine, a.Err)
	}
	return nil
}

// remotePut sends body to ct's machine to unpack.
func (s *Service) remotePut(ctx context.Context, ct copyTarget, body io.Reader) error {
	st, err := s.openArchive(ctx, ct, true)
	if err != nil {
		return err
	}
	defer st.Close()
	stop := context.AfterFunc(ctx, func() { _ = st.Reset() })
	defer stop()
	answered := make(chan error, 1)
	go func() { answered <- readAnswer(st, ct.Machine) }()
	if _, err := io.Copy(st, body); err != nil {
		// The other side may have refused and gone: its answer says why.
		select {
		case aerr := <-answered:
			if aerr != nil {
				return aerr
			}
		case <-time.After(5 * time.Second):
		}
		_ = st.Reset()
		return fmt.Errorf("copy to machine %s: %w", ct.Machine, err)
	}
	_ = st.CloseWrite()
	return <-answered
}

// remoteGet is the archive ct's machine sends.
func (s *Service) remoteGet(ctx context.Context, ct copyTarget) (io.ReadCloser, error) {
	st, err := s.openArchive(ctx, ct, false)
	if err != nil {
		return nil, err
	}
	_ = st.CloseWrite()
	r := bufio.NewReader(st)
	if err := readAnswer(r, ct.Machine); err != nil {
		_ = st.Reset()
		return nil, err
	}
	return &streamReader{r: r, st: st, stop: context.AfterFunc(ctx, func() { _ = st.Reset() })}, nil
}

// streamReader reads an archive to the end of its stream.
type streamReader struct {
	r    io.Reader
	st   network.Stream
	stop func() bool
}

func (s *streamReader) Read(p []byte) (int, error) { return s.r.Read(p) }

func (s *streamReader) Close() error {
	s.stop()
	return s.st.Close()
}
