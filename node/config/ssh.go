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

func (p *parser) ssh(n *yaml.Node, path string) (SSH, error) {
	var s SSH
	entries, err := p.mapping(n, path, "listen")
	if err != nil {
		return s, err
	}
	for _, e := range entries {
		if e.value.Kind != yaml.ScalarNode || e.value.ShortTag() != "!!str" {
			return s, p.errf(e.value, e.path, "is %s; expected an address such as \":2222\"", kindName(e.value))
		}
		if err := checkListen(e.value.Value); err != "" {
			return s, p.errf(e.value, e.path, "%s is %s; allowed: HOST:PORT or :PORT, such as \":2222\"", show(e.value), err)
		}
		s.Listen = e.value.Value
	}
	return s, nil
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
