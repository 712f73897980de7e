package config

import "gopkg.in/yaml.v3"

// Runtime is the runtime: section.
type Runtime struct {
	Exec   *bool // nil = false
	Docker *bool // nil = true
	// RecordGPUs (record_gpus: N) declares N GPUs this machine does not
	// have (devices 0..N-1, "Recorded GPU", 16 GB) and makes the Docker
	// driver record their device requests instead of sending them: for
	// tests and demos of the market on machines without GPUs. 0: off.
	RecordGPUs int
}

// Discovery is the discovery: section: how this machine finds the other
// machines of its org besides the addresses it remembers.
type Discovery struct {
	MDNS *bool // nil = true
}

// MDNSEnabled reports whether the node looks for peers on the local network
// with mDNS. A peer found this way is only dialled: membership decides what
// its messages do.
func (d Discovery) MDNSEnabled() bool { return d.MDNS == nil || *d.MDNS }

// ExecEnabled reports whether the exec driver may run instances.
func (r Runtime) ExecEnabled() bool { return r.Exec != nil && *r.Exec }

// DockerEnabled reports whether the Docker driver may run instances.
func (r Runtime) DockerEnabled() bool { return r.Docker == nil || *r.Docker }

func (p *parser) runtime(n *yaml.Node, path string) (Runtime, error) {
	var r Runtime
	entries, err := p.mapping(n, path, "exec", "docker", "record_gpus")
	if err != nil {
		return r, err
	}
	for _, e := range entries {
		if e.name == "record_gpus" {
			v, err := p.bounded(e.value, e.path, "0..64")
			if err != nil {
				return r, err
			}
			if v < 0 || v > 64 {
				return r, p.errf(e.value, e.path, "%d is outside 0..64", v)
			}
			r.RecordGPUs = int(v)
			continue
		}
		b, err := p.boolValue(e)
		if err != nil {
			return r, err
		}
		switch e.name {
		case "exec":
			r.Exec = &b
		case "docker":
			r.Docker = &b
		}
	}
	return r, nil
}

// Metrics is the metrics: section.
type Metrics struct {
	// Public opens the API's GET /metrics without the token (for a
	// Prometheus server that scrapes it); everything else still needs it.
	Public bool
}

func (p *parser) metrics(n *yaml.Node, path string) (Metrics, error) {
	var m Metrics
	entries, err := p.mapping(n, path, "public")
	if err != nil {
		return m, err
	}
	for _, e := range entries {
		if m.Public, err = p.boolValue(e); err != nil {
			return m, err
		}
	}
	return m, nil
}

func (p *parser) discovery(n *yaml.Node, path string) (Discovery, error) {
	b, err := p.oneBool(n, path, "mdns")
	return Discovery{MDNS: b}, err
}

// oneBool reads a section whose one key, key, is true or false; nil when
// the key is absent.
func (p *parser) oneBool(n *yaml.Node, path, key string) (*bool, error) {
	entries, err := p.mapping(n, path, key)
	if err != nil {
		return nil, err
	}
	var out *bool
	for _, e := range entries {
		b, err := p.boolValue(e)
		if err != nil {
			return nil, err
		}
		out = &b
	}
	return out, nil
}

// boolValue reads a mapping entry that must be true or false.
func (p *parser) boolValue(e entry) (bool, error) {
	if e.value.Kind != yaml.ScalarNode || e.value.ShortTag() != "!!bool" {
		return false, p.errf(e.value, e.path, "%s is not true or false", kindName(e.value))
	}
	var b bool
	if err := e.value.Decode(&b); err != nil {
		return false, p.errf(e.value, e.path, "%s is not true or false", show(e.value))
	}
	return b, nil
}

// Relay is the relay: section: whether this machine serves as a circuit
// relay for its org's approved machines (p2p's nat.go).
type Relay struct {
	Serve *bool // nil = when this machine finds itself publicly reachable
}

// NAT is the nat: section.
type NAT struct {
	// PortMap asks the router for a port mapping (UPnP, NAT-PMP), so that
	// machines outside reach this one directly.
	PortMap *bool // nil = true
}

// PortMapEnabled reports whether the node asks the router for a port
// mapping.
func (n NAT) PortMapEnabled() bool { return n.PortMap == nil || *n.PortMap }

func (p *parser) relay(n *yaml.Node, path string) (Relay, error) {
	b, err := p.oneBool(n, path, "serve")
	return Relay{Serve: b}, err
}

func (p *parser) nat(n *yaml.Node, path string) (NAT, error) {
	b, err := p.oneBool(n, path, "portmap")
	return NAT{PortMap: b}, err
}
