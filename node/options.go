package node

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/node/config"
	"github.com/cshare/cshare/node/jobsvc"
	"github.com/cshare/cshare/node/web"
	"github.com/cshare/cshare/p2p"
	"github.com/cshare/cshare/runtime"
	"github.com/cshare/cshare/runtime/hw"
)

// Version is the agent version, shown by node status and machine show.
var Version = "0.1.0-dev"

// DefaultAPI is the default API listen address.
const DefaultAPI = "127.0.0.1:7480"

// DefaultImage is the image of docker jobs submitted without --image (see
// jobsvc.DefaultImage).
const DefaultImage = jobsvc.DefaultImage

// Driver runs instances; see package runtime.
type Driver = runtime.Driver

// Options configure a node. Zero values take the documented defaults.
type Options struct {
	DataDir           string        // required
	API               string        // default 127.0.0.1:7480; port 0 picks a free port
	Listen            []string      // default TCP and QUIC on port 4001, all interfaces
	ConfigPath        string        // node.yaml; "" = defaults
	HeartbeatInterval time.Duration // default 30s (or node.yaml's heartbeat_interval)
	Name              string        // machine name; default node.yaml's name, else the host name
	Logger            *slog.Logger  // default: discard
	// The API on a non-loopback address needs TLS (both files, PEM) or
	// APIInsecureRemote; see apiserve.go.
	APITLSCert, APITLSKey string
	APIInsecureRemote     bool

	// For tests: the GPU library (default the system NVML).
	NVML hw.NVML
	// For tests: run instances with this driver instead of docker/exec.
	Driver Driver
	// Now is the node's clock (default time.Now): what it reads for
	// liveness, leases, plan ages and dispatch. Tests may run nodes under
	// testing/synctest, whose clock time.Now already is.
	Now func() time.Time
	// MergeAbove is the number of ledger heads above which a ledger.merge
	// is written (default 8; see node/peersvc/merge.go).
	MergeAbove int
	// TraceHook, if set, sees this node's GossipSub events (benchmarks).
	TraceHook p2p.TraceHook
	// HeadsHook, if set, sees each heads announcement from a peer before
	// (before=true) and after its pushed entries are taken (benchmarks).
	HeadsHook func(pushed int, before bool)
	// For tests: no mDNS discovery whatever node.yaml says.
	DisableMDNS bool
	// Bootstrap are addresses (/ip4, /ip6, /dns4, /dns6 ending in
	// /p2p/<id>) of machines to join through and to dial when this node
	// has no peer (nat.go): `--bootstrap`, repeatable.
	Bootstrap []string

	// token is the API token to serve with instead of a new one: a node
	// that Restart starts again keeps its token, so clients that wait on it
	// (member leave, org delete) go on working.
	token string
	// dash is the dashboard a node that Restart starts again carries on:
	// the browser stays signed in (node/web).
	dash *web.Dashboard
	// heartbeatLie, for tests, rewrites what each heartbeat says of this
	// machine before it is signed: a machine that lies (see
	// attack_test.go).
	heartbeatLie func(*p2p.Heartbeat)
}

// withDefaults checks o and fills in its defaults (but the heartbeat
// interval's, which needs node.yaml: see interval).
func (o Options) withDefaults() (Options, error) {
	if o.DataDir == "" {
		return o, errors.New("node: data dir is required")
	}
	// The node names paths under its data dir to others that do not share
	// its working directory (Docker's mounts of datasets, exec workdirs):
	// a data dir given relative (`--data-dir a`) is made absolute.
	abs, err := filepath.Abs(o.DataDir)
	if err != nil {
		return o, fmt.Errorf("node: data dir: %w", err)
	}
	o.DataDir = abs
	if o.API == "" {
		o.API = DefaultAPI
	}
	if err := checkAPIOptions(o); err != nil {
		return o, fmt.Errorf("node: %w", err)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MergeAbove == 0 {
		o.MergeAbove = defaultMergeAbove
	}
	if o.Name != "" {
		if err := text.CheckName("--name", o.Name); err != nil {
			return o, fmt.Errorf("node: %w", err)
		}
	}
	if o.MergeAbove < 0 {
		return o, fmt.Errorf("node: merge threshold %d is negative", o.MergeAbove)
	}
	if err := api.CheckBootstrap("--bootstrap", o.Bootstrap); err != nil {
		return o, fmt.Errorf("node: %w", err)
	}
	if len(o.Listen) == 0 {
		o.Listen = []string{"/ip4/0.0.0.0/tcp/4001", "/ip4/0.0.0.0/udp/4001/quic-v1"}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// defaultMergeAbove is the number of heads that a merge is written above
// unless Options.MergeAbove says otherwise (see node/peersvc/merge.go).
const defaultMergeAbove = 8

// interval is the heartbeat interval: the option's, else node.yaml's, else
// 30 s.
func (o Options) interval(cfg config.File) (time.Duration, error) {
	iv := o.HeartbeatInterval
	if iv == 0 {
		iv = cfg.HeartbeatInterval
	}
	if iv == 0 {
		iv = 30 * time.Second
	}
	if iv < 50*time.Millisecond || iv > time.Hour {
		return 0, fmt.Errorf("node: --heartbeat-interval: %s outside 50ms..1h", iv)
	}
	return iv, nil
}
