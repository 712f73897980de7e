package config

import (
	"net"
	"strconv"

	"gopkg.in/yaml.v3"
)

// SSH is the ssh: section: the node's SSH gateway (package node/gateway),
// off unless listen is set.
type SSH struct {
	// Listen is the gateway's TCP address, HOST:PORT or :PORT ("" = no
	// gateway). Port 0 takes a free port (tests).
	Listen string
}

// Jupyter is the jupyter: section: the node's HTTPS proxy into its
// jupyter-mode contracts (package node/jupyter), off unless listen is set.
type Jupyter struct {
	// Listen is the proxy's TCP address, HOST:PORT or :PORT ("" = no
	// proxy). Port 0 takes a free port (tests).
	Listen string
}

func (p *parser) ssh(n *yaml.Node, path string) (SSH, error) {
	l, err := p.listen(n, path, ":2222")
	return SSH{Listen: l}, err
}

func (p *parser) jupyter(n *yaml.Node, path string) (Jupyter, error) {
	l, err := p.listen(n, path, ":8443")
	return Jupyter{Listen: l}, err
}

// listen parses a section whose one key is listen, an address such as
// example.
func (p *parser) listen(n *yaml.Node, path, example string) (string, error) {
	entries, err := p.mapping(n, path, "listen")
	if err != nil {
		return "", err
	}
	var l string
	for _, e := range entries {
		if e.value.Kind != yaml.ScalarNode || e.value.ShortTag() != "!!str" {
			return "", p.errf(e.value, e.path, "is %s; expected an address such as %q", kindName(e.value), example)
		}
		if err := checkListen(e.value.Value); err != "" {
			return "", p.errf(e.value, e.path, "%s is %s; allowed: HOST:PORT or :PORT, such as %q", show(e.value), err, example)
		}
		l = e.value.Value
	}
	return l, nil
}

// checkListen says what is wrong with a listen address ("" for nothing).
func checkListen(a string) string {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return "not HOST:PORT"
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || port != strconv.FormatUint(p, 10) {
		return "not a port from 0 to 65535"
	}
	if host != "" && net.ParseIP(host) == nil && len(host) > 253 {
		return "a host name that is too long"
	}
	return ""
}
