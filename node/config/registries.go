package config

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// Registry is one entry of registries: a server and either a user name and
// password or an identity token.
type Registry struct {
	Server, Username, Password, Token string
}

func (p *parser) registries(n *yaml.Node, path string) ([]Registry, error) {
	if isNull(n) {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, p.errf(n, path, "is %s; expected a list of {server, username, password} or {server, token}", kindName(n))
	}
	var out []Registry
	for i, item := range n.Content {
		ipath := fmt.Sprintf("%s[%d]", path, i)
		entries, err := p.mapping(item, ipath, "server", "username", "password", "token")
		if err != nil {
			return nil, err
		}
		var r Registry
		for _, e := range entries {
			if e.value.Kind != yaml.ScalarNode {
				return nil, p.errf(e.value, e.path, "is %s; expected text", kindName(e.value))
			}
			switch e.name {
			case "server":
				r.Server = e.value.Value
			case "username":
				r.Username = e.value.Value
			case "password":
				r.Password = e.value.Value
			case "token":
				r.Token = e.value.Value
			}
		}
		switch {
		case r.Server == "":
			return nil, p.errf(item, ipath+".server", "is missing; name the registry, e.g. ghcr.io")
		case r.Token == "" && (r.Username == "" || r.Password == ""):
			return nil, p.errf(item, ipath, "needs username and password, or token")
		case r.Token != "" && r.Password != "":
			return nil, p.errf(item, ipath, "has both password and token; give one")
		}
		out = append(out, r)
	}
	return out, nil
}

// RegistryFor returns the credentials for an image reference's registry, or
// nil. Images without a registry host belong to docker.io.
func (f File) RegistryFor(image string) *Registry {
	host := "docker.io"
	if i := strings.IndexByte(image, '/'); i > 0 {
		if h := image[:i]; strings.ContainsAny(h, ".:") || h == "localhost" {
			host = h
		}
	}
	for i := range f.Registries {
		r := &f.Registries[i]
		if r.Server == host || strings.TrimPrefix(strings.TrimPrefix(r.Server, "https://"), "http://") == host {
			return r
		}
	}
	return nil
}
