package p2p

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// HeartbeatProtocol is the request/response stream with which a starting
// node asks one connected peer for the latest heartbeat it knows of every
// machine.
//
// Wire: the client sends one frame, a CBOR map {"org": ID}, and closes its
// write side; the server answers with one frame per machine, CBOR
// {"hb": <the heartbeat's signed canonical bytes>, "age_ms": <how long ago
// the server accepted it>}, then closes. A frame is a uvarint length and
// that many bytes. The server answers only peers that are machines of the
// org; the client re-verifies every heartbeat's signature.
const HeartbeatProtocol protocol.ID = "/cshare/hb/1.0.0"

const (
	maxFetchEntries = 10000
	maxRequestSize  = 1024
	fetchTimeout    = 10 * time.Second
	maxAgeMs        = int64(30 * 24 * time.Hour / time.Millisecond)
)

type hbRequest struct {
	Org string `cbor:"org"`
}

type hbEntry struct {
	HB    []byte `cbor:"hb"`
	AgeMs int64  `cbor:"age_ms"`
}

func hbWriteFrame(w *bufio.Writer, b []byte) error {
	var n [binary.MaxVarintLen64]byte
	if _, err := w.Write(n[:binary.PutUvarint(n[:], uint64(len(b)))]); err != nil {
		return err
	}
	_, err := w.Write(b)
	return err
}

// hbReadFrame reads one frame; io.EOF only at a clean frame boundary.
func hbReadFrame(r *bufio.Reader, max int) ([]byte, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		return nil, err
	}
	if n > uint64(max) {
		return nil, fmt.Errorf("%w: frame of %d bytes", ErrTooLarge, n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, io.ErrUnexpectedEOF
	}
	return b, nil
}

func (h *Host) org(name string) *Org {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.orgs[name]
}

func (h *Host) handleHeartbeatStream(s network.Stream) {
	defer s.Close()
	_ = s.SetDeadline(time.Now().Add(fetchTimeout))
	br := bufio.NewReader(s)
	raw, err := hbReadFrame(br, maxRequestSize)
	if err != nil {
		_ = s.Reset()
		return
	}
	var req hbRequest
	if err := gossipDec.Unmarshal(raw, &req); err != nil {
		_ = s.Reset()
		return
	}
	o := h.org(req.Org)
	if o == nil || !o.m.IsMachine(s.Conn().RemotePeer()) {
		_ = s.Reset()
		return
	}
	bw := bufio.NewWriter(s)
	for _, e := range o.snapshot(time.Now()) {
		b, err := gossipEnc.Marshal(&e)
		if err != nil {
			continue
		}
		if err := hbWriteFrame(bw, b); err != nil {
			_ = s.Reset()
			return
		}
	}
	if err := bw.Flush(); err != nil {
		_ = s.Reset()
	}
}

// snapshot lists the cached heartbeats of approved machines, by machine ID.
func (o *Org) snapshot(now time.Time) []hbEntry {
	o.mu.Lock()
	keys := make([]string, 0, len(o.cache))
	for k := range o.cache {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]hbEntry, 0, len(keys))
	cached := make([]cachedHB, 0, len(keys))
	for _, k := range keys {
		cached = append(cached, o.cache[k])
	}
	o.mu.Unlock()
	for _, c := range cached {
		id, err := c.hb.MachineID()
		if err != nil || !o.m.IsApproved(id) {
			continue
		}
		age := now.Sub(c.at).Milliseconds()
		if age < 0 {
			age = 0
		}
		out = append(out, hbEntry{HB: c.raw, AgeMs: age})
	}
	return out
}

// FetchHeartbeats asks peer p, over HeartbeatProtocol, for the latest
// heartbeat it knows of every machine. Each one is re-verified (signature,
// org, schema) and kept only if its machine is approved in our Membership.
// Use FetchSeen to also learn how old each heartbeat is.
func (o *Org) FetchHeartbeats(ctx context.Context, p peer.ID) ([]Heartbeat, error) {
	seen, err := o.FetchSeen(ctx, p)
	if err != nil {
		return nil, err
	}
	out := make([]Heartbeat, len(seen))
	for i, s := range seen {
		out[i] = s.Heartbeat
	}
	return out, nil
}

// FetchSeen is FetchHeartbeats with the local time each heartbeat was
// accepted by p (now minus the age p reports), for Liveness.Observe: a node
// that starts must not mistake a machine that went silent minutes ago for an
// online one. Fetched heartbeats are also kept in this Org's cache (so this
// node can answer others) but are not passed to OnHeartbeat callbacks and do
// not advance the gossip validator's sequence numbers.
func (o *Org) FetchSeen(ctx context.Context, p peer.ID) ([]Seen, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, fetchTimeout)
		defer cancel()
	}
	s, err := o.h.h.NewStream(ctx, p, HeartbeatProtocol)
	if err != nil {
		return nil, fmt.Errorf("p2p: fetch heartbeats from %s: %w", p, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(dl)
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			_ = s.Reset()
		case <-done:
		}
	}()
	out, err := o.fetch(s)
	if err != nil {
		_ = s.Reset()
		return nil, fmt.Errorf("p2p: fetch heartbeats from %s: %w", p, err)
	}
	_ = s.Close()
	return out, nil
}

func (o *Org) fetch(s network.Stream) ([]Seen, error) {
	req, err := gossipEnc.Marshal(&hbRequest{Org: o.name})
	if err != nil {
		return nil, err
	}
	bw := bufio.NewWriter(s)
	if err := hbWriteFrame(bw, req); err != nil {
		return nil, err
	}
	if err := bw.Flush(); err != nil {
		return nil, err
	}
	if err := s.CloseWrite(); err != nil {
		return nil, err
	}
	br := bufio.NewReader(s)
	best := map[string]int{}
	var out []Seen
	for n := 0; ; n++ {
		raw, err := hbReadFrame(br, MaxPayloadSize+64)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if n >= maxFetchEntries {
			return nil, fmt.Errorf("%w: more than %d heartbeats", ErrTooLarge, maxFetchEntries)
		}
		now := time.Now()
		var e hbEntry
		if err := gossipDec.Unmarshal(raw, &e); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		hb, err := DecodeVerifyHeartbeat(o.name, e.HB)
		if err != nil {
			o.h.log.Debug("fetched heartbeat dropped", "org", o.name, "peer", s.Conn().RemotePeer(), "err", err)
			continue
		}
		id, _ := hb.MachineID()
		if !o.m.IsApproved(id) {
			continue
		}
		ageMs := min(max(e.AgeMs, 0), maxAgeMs)
		seen := Seen{Heartbeat: hb, At: now.Add(-time.Duration(ageMs) * time.Millisecond)}
		o.remember(hb, e.HB, seen.At)
		if i, ok := best[hb.Machine]; ok {
			if out[i].Heartbeat.Seq < hb.Seq {
				out[i] = seen
			}
			continue
		}
		best[hb.Machine] = len(out)
		out = append(out, seen)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Heartbeat.Machine < out[j].Heartbeat.Machine })
	return out, nil
}
