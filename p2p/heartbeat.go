package p2p

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/fxamacker/cbor/v2"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/internal/edkey"
	"github.com/cshare/cshare/internal/regauth"
)

// MaxPayloadSize is the largest pubsub message data (a heartbeat, a heads
// announcement) that validators accept. The pubsub wire limit is this plus
// envelopeSlack, so that a payload of exactly MaxPayloadSize still fits with
// its libp2p envelope (from, seqno, topic, signature) and reaches the
// validators, which reject anything larger (and count it).
const (
	MaxPayloadSize = 64 << 10
	envelopeSlack  = 4 << 10
	hbSigDomain    = "cshare-heartbeat-v1\x00"
)

// Errors returned by heartbeat decoding and verification.
var (
	ErrTooLarge     = errors.New("p2p: message too large")
	ErrMalformed    = errors.New("p2p: malformed message")
	ErrUnsigned     = errors.New("p2p: heartbeat not signed")
	ErrBadSignature = errors.New("p2p: bad heartbeat signature")
)

// Resources is a machine's resource vector. Cores is in millicores.
type Resources struct {
	Cores    int64 `cbor:"cores" json:"cores"`
	MemoryMB int64 `cbor:"memory_mb" json:"memory_mb"`
	DiskMB   int64 `cbor:"disk_mb" json:"disk_mb"`
	GPUs     int64 `cbor:"gpus" json:"gpus"`
	Slots    int64 `cbor:"slots" json:"slots"`
}

// RunningInstance is one instance a machine announces as running (the lease
// on its agenda item, see docs/design.md §9).
type RunningInstance struct {
	Job      string `cbor:"job" json:"job"`
	Slot     int64  `cbor:"slot" json:"slot"`
	Kind     string `cbor:"kind" json:"kind"`
	Item     int64  `cbor:"item" json:"item"`
	Instance string `cbor:"instance" json:"instance"`
	Started  int64  `cbor:"started" json:"started"`
	// What the instance's run uses, as its driver last sampled it: CPU in
	// millicores (1000 is one core busy) and memory in MiB (rounded up);
	// OOMKilled: its last run was killed at its memory cap. Omitted when
	// zero; one-letter keys keep the largest heartbeat under the gossip
	// limit (TestLargestHeartbeatFits).
	CPUMilli  int64 `cbor:"c,omitempty" json:"cpu_milli,omitempty"`
	MemoryMB  int64 `cbor:"m,omitempty" json:"memory_mb,omitempty"`
	OOMKilled bool  `cbor:"o,omitempty" json:"oom_killed,omitempty"`
}

// DatasetFetch is a dataset a machine is fetching for its jobs' instances:
// others show it as the reason the instances' items wait.
type DatasetFetch struct {
	CID  string `cbor:"cid" json:"cid"`
	Have int64  `cbor:"have" json:"have"` // bytes stored so far (estimated from blocks)
	Size int64  `cbor:"size" json:"size"` // bytes of the dataset
}

// MaxFetches is the most dataset fetches a heartbeat lists.
const MaxFetches = 16

// Heartbeat is the signed liveness and load signal a machine gossips on
// /cshare/<org>/heartbeat. Sig is an Ed25519 signature by the machine's
// libp2p key over hbSigDomain || org || 0x00 || canonical CBOR of the
// heartbeat without Sig; binding the org stops cross-org replay.
type Heartbeat struct {
	Machine   string            `cbor:"machine" json:"machine"` // peer ID (base58)
	Seq       uint64            `cbor:"seq" json:"seq"`
	Time      int64             `cbor:"time" json:"time"`         // unix ms, advisory
	Interval  int64             `cbor:"interval" json:"interval"` // ms
	Free      Resources         `cbor:"free" json:"free"`
	Total     Resources         `cbor:"total" json:"total"`
	Instances []RunningInstance `cbor:"instances" json:"instances"`
	Heads     []string          `cbor:"heads" json:"heads"` // ledger head CIDs
	PlanHash  string            `cbor:"plan_hash" json:"plan_hash"`
	Addrs     []string          `cbor:"addrs" json:"addrs"`
	Version   string            `cbor:"version" json:"version"`
	Name      string            `cbor:"name" json:"name"`
	Fetches   []DatasetFetch    `cbor:"fetches,omitempty" json:"fetches,omitempty"`
	// DiskFull: the machine's data dir is below its reserve, so it takes
	// no new item and refuses writes (internal/diskguard). Omitted when
	// false, so a heartbeat of a machine with room is what it always was.
	DiskFull bool `cbor:"disk_full,omitempty" json:"disk_full,omitempty"`
	// SSH is the machine's SSH gateway (node.yaml ssh.listen), nil when it
	// has none: omitted then, so the heartbeat of a machine without one
	// is what it always was. (A node older than the field refuses the
	// heartbeat of a machine that has one: decoding is strict.)
	SSH *SSHGateway `cbor:"ssh,omitempty" json:"ssh,omitempty"`
	// Jupyter is the machine's Jupyter proxy (node.yaml jupyter.listen),
	// nil when it has none: omitted then, as SSH.
	Jupyter *JupyterProxy `cbor:"jupyter,omitempty" json:"jupyter,omitempty"`
	// JupyterDirect is the host port each of the machine's direct
	// jupyter contracts publishes (contract ID -> port; at most
	// MaxJupyterDirect, by ID), omitted when none.
	JupyterDirect map[string]int64 `cbor:"jupyter_direct,omitempty" json:"jupyter_direct,omitempty"`
	// Relay: the machine serves as a circuit relay for the org's machines
	// (nat.go); private machines reserve slots on such machines. Set by
	// PublishHeartbeat; omitted when false, so a heartbeat of a machine
	// that does not relay is what it always was.
	Relay bool `cbor:"relay,omitempty" json:"relay,omitempty"`
	// Age is the machine's age X25519 recipient ("age1..."): a job's
	// submitter seals registry credentials to it (internal/regauth).
	// Omitted when empty; a node older than the field refuses the
	// heartbeat of a machine that sets it (decoding is strict), as for SSH.
	Age string `cbor:"age,omitempty" json:"age,omitempty"`
	// Barrier is the depth of the newest checkpoint barrier the machine
	// has folded (docs/design.md §5.6): a node keeps on disk only the
	// entries below the newest barrier every online machine has passed.
	// Omitted when 0 (none yet), as Age.
	Barrier int64  `cbor:"barrier,omitempty" json:"barrier,omitempty"`
	Sig     []byte `cbor:"sig,omitempty" json:"sig,omitempty"`
}

// SSHGateway is a machine's SSH gateway as its heartbeat announces it:
// the TCP port it listens on (on the machine's addresses) and its host
// key, in authorized_keys form ("ssh-ed25519 AAAA...").
type SSHGateway struct {
	Port    int64  `cbor:"port" json:"port"`
	HostKey string `cbor:"host_key" json:"host_key"`
}

// MaxSSHHostKey bounds SSHGateway.HostKey: an authorized_keys line, about
// 80 bytes for the gateway's ed25519 key (256 leaves room for any
// elliptic-curve key, and the heartbeat room for the Jupyter and age
// fields).
const MaxSSHHostKey = 256

// JupyterProxy is a machine's Jupyter proxy as its heartbeat announces it:
// the HTTPS port it listens on and its certificate's fingerprint
// ("sha256//" and the base64 SHA-256 of its public key, as curl's
// --pinnedpubkey takes it).
type JupyterProxy struct {
	Port int64  `cbor:"port" json:"port"`
	Cert string `cbor:"cert" json:"cert"`
}

// MaxJupyterCert bounds JupyterProxy.Cert.
const MaxJupyterCert = 64

// MaxJupyterDirect bounds Heartbeat.JupyterDirect, whose contract IDs
// are at most MaxJupyterDirectID bytes: a heartbeat stays under the
// gossip limit.
const (
	MaxJupyterDirect   = 8
	MaxJupyterDirectID = 16
)

var (
	gossipEnc cbor.EncMode
	gossipDec cbor.DecMode
)

func init() {
	var err error
	gossipEnc, err = cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		panic(err)
	}
	gossipDec, err = cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		MaxNestedLevels:   8,
		MaxArrayElements:  4096,
		MaxMapPairs:       64,
		IndefLength:       cbor.IndefLengthForbidden,
		TagsMd:            cbor.TagsForbidden,
		ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
	}.DecMode()
	if err != nil {
		panic(err)
	}
}

// MachineID parses hb.Machine.
func (hb *Heartbeat) MachineID() (peer.ID, error) {
	id, err := peer.Decode(hb.Machine)
	if err != nil {
		return "", fmt.Errorf("%w: machine: %v", ErrMalformed, err)
	}
	return id, nil
}

// signingBytes is what Sig covers.
func (hb *Heartbeat) signingBytes(org string) ([]byte, error) {
	c := *hb
	c.Sig = nil
	return signedBytes(hbSigDomain, org, &c)
}

// signedBytes is what a gossip message's sender signs: a domain tag, the
// org (binding it stops cross-org replay), a zero byte, and the canonical
// encoding of the message without its signature (unsigned).
func signedBytes(domain, org string, unsigned any) ([]byte, error) {
	body, err := gossipEnc.Marshal(unsigned)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(domain)+len(org)+1+len(body))
	out = append(out, domain...)
	out = append(out, org...)
	out = append(out, 0)
	return append(out, body...), nil
}

// Sign sets hb.Sig with key, for org.
func (hb *Heartbeat) Sign(org string, key crypto.PrivKey) error {
	b, err := hb.signingBytes(org)
	if err != nil {
		return err
	}
	sig, err := key.Sign(b)
	if err != nil {
		return err
	}
	hb.Sig = sig
	return nil
}

// Verify checks hb.Sig against the public key embedded in hb.Machine.
func (hb *Heartbeat) Verify(org string) error {
	if len(hb.Sig) == 0 {
		return ErrUnsigned
	}
	key, err := edkey.OfID(hb.Machine)
	if err != nil {
		return fmt.Errorf("%w: machine key: %v", ErrMalformed, err)
	}
	b, err := hb.signingBytes(org)
	if err != nil {
		return err
	}
	if !key.Verify(b, hb.Sig) {
		return ErrBadSignature
	}
	return nil
}

// EncodeHeartbeat returns the canonical CBOR encoding of hb (with Sig).
func EncodeHeartbeat(hb *Heartbeat) ([]byte, error) {
	return gossipEnc.Marshal(hb)
}

// DecodeHeartbeat strictly decodes a heartbeat: size-capped, no unknown or
// duplicate fields, no tags or indefinite lengths, and the input must be the
// canonical encoding (so one heartbeat has exactly one byte form and one
// content-hash message ID). It checks schema, not the signature.
func DecodeHeartbeat(data []byte) (Heartbeat, error) {
	var hb Heartbeat
	if len(data) > MaxPayloadSize {
		return hb, ErrTooLarge
	}
	if err := gossipDec.Unmarshal(data, &hb); err != nil {
		return Heartbeat{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	again, err := gossipEnc.Marshal(&hb)
	if err != nil || !bytes.Equal(again, data) {
		return Heartbeat{}, fmt.Errorf("%w: not canonical", ErrMalformed)
	}
	if _, err := hb.MachineID(); err != nil {
		return Heartbeat{}, err
	}
	if hb.Seq == 0 || hb.Interval < 0 {
		return Heartbeat{}, fmt.Errorf("%w: seq/interval", ErrMalformed)
	}
	if hb.Barrier < 0 || hb.Barrier > 1<<40 {
		return Heartbeat{}, fmt.Errorf("%w: barrier: %d; allowed: 0 to 2^40", ErrMalformed, hb.Barrier)
	}
	if len(hb.Fetches) > MaxFetches {
		return Heartbeat{}, fmt.Errorf("%w: %d fetches; allowed: at most %d", ErrMalformed, len(hb.Fetches), MaxFetches)
	}
	for _, ri := range hb.Instances {
		if ri.CPUMilli < 0 || ri.MemoryMB < 0 || ri.CPUMilli > 1<<40 || ri.MemoryMB > 1<<40 {
			return Heartbeat{}, fmt.Errorf("%w: instance %q uses %d millicores, %d MiB; allowed: 0 to 2^40", ErrMalformed, ri.Instance, ri.CPUMilli, ri.MemoryMB)
		}
	}
	for _, f := range hb.Fetches {
		if len(f.CID) == 0 || len(f.CID) > 128 || f.Have < 0 || f.Size < 0 || f.Have > f.Size {
			return Heartbeat{}, fmt.Errorf("%w: fetch of %q: have %d of %d bytes; allowed: a CID of 1 to 128 characters, 0 <= have <= size", ErrMalformed, f.CID, f.Have, f.Size)
		}
	}
	if g := hb.SSH; g != nil && (g.Port < 1 || g.Port > 65535 || g.HostKey == "" || len(g.HostKey) > MaxSSHHostKey) {
		return Heartbeat{}, fmt.Errorf("%w: ssh: port %d, host key of %d bytes; allowed: a port 1..65535 and a host key of 1..%d bytes", ErrMalformed, g.Port, len(g.HostKey), MaxSSHHostKey)
	}
	if hb.Age != "" {
		if err := regauth.CheckRecipient("age", hb.Age); err != nil {
			return Heartbeat{}, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
	}
	if err := checkJupyter(hb.Jupyter); err != nil {
		return Heartbeat{}, err
	}
	if len(hb.JupyterDirect) > MaxJupyterDirect {
		return Heartbeat{}, fmt.Errorf("%w: jupyter_direct: %d contracts; allowed: at most %d", ErrMalformed, len(hb.JupyterDirect), MaxJupyterDirect)
	}
	for c, p := range hb.JupyterDirect {
		if c == "" || len(c) > MaxJupyterDirectID || p < 1 || p > 65535 {
			return Heartbeat{}, fmt.Errorf("%w: jupyter_direct: port %d of a contract of %d bytes; allowed: a port 1..65535, a contract of 1..%d bytes", ErrMalformed, p, len(c), MaxJupyterDirectID)
		}
	}
	return hb, nil
}

func checkJupyter(j *JupyterProxy) error {
	if j != nil && (j.Port < 1 || j.Port > 65535 || j.Cert == "" || len(j.Cert) > MaxJupyterCert) {
		return fmt.Errorf("%w: jupyter: port %d, cert of %d bytes; allowed: a port 1..65535 and a cert of 1..%d bytes", ErrMalformed, j.Port, len(j.Cert), MaxJupyterCert)
	}
	return nil
}

// DecodeVerifyHeartbeat decodes data and verifies its signature for org.
func DecodeVerifyHeartbeat(org string, data []byte) (Heartbeat, error) {
	hb, err := DecodeHeartbeat(data)
	if err != nil {
		return hb, err
	}
	if err := hb.Verify(org); err != nil {
		return Heartbeat{}, err
	}
	return hb, nil
}
