package config

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// show renders a scalar for an error message: strings quoted, numbers and
// booleans as written, long values cut short.
func show(n *yaml.Node) string {
	v := n.Value
	if len(v) > 40 {
		v = v[:40] + "..."
	}
	if n.ShortTag() == "!!str" || strings.ContainsFunc(v, func(r rune) bool { return !unicode.IsPrint(r) }) || !utf8.ValidString(v) {
		return strconv.Quote(v)
	}
	return v
}

type parser struct {
	src   string
	lines map[string]int
}

func (p *parser) errf(n *yaml.Node, key, format string, args ...any) *Error {
	line := 0
	if n != nil {
		line = n.Line
	}
	return &Error{File: p.src, Line: line, Key: key, Msg: key + ": " + fmt.Sprintf(format, args...)}
}

func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 8; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	switch n.ShortTag() {
	case "!!str":
		return show(n) + " (a string)"
	case "!!bool":
		return show(n) + " (a boolean)"
	}
	return show(n)
}

// entry is one key: value pair of a mapping.
type entry struct {
	name  string
	path  string
	key   *yaml.Node
	value *yaml.Node // alias-resolved
}

// mapping checks that n is a mapping with only allowed, distinct keys, and
// returns its entries with null values left out. path is the mapping's own
// key path ("" at the top).
func (p *parser) mapping(n *yaml.Node, path string, allowed ...string) ([]entry, error) {
	n = deref(n)
	if isNull(n) {
		return nil, nil
	}
	if n.Kind != yaml.MappingNode {
		if path == "" {
			e := p.errf(n, "the top level", "is %s; expected a mapping with keys %s", kindName(n), strings.Join(allowed, ", "))
			e.Key = ""
			return nil, e
		}
		return nil, p.errf(n, path, "is %s; expected a mapping with keys %s", kindName(n), strings.Join(allowed, ", "))
	}
	var out []entry
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), n.Content[i+1]
		full := k.Value
		if path != "" {
			full = path + "." + k.Value
		}
		if k.Kind != yaml.ScalarNode || !contains(allowed, k.Value) {
			name := full
			if k.Kind != yaml.ScalarNode {
				name = "(" + kindName(k) + ")"
				if path != "" {
					name = path + "." + name
				}
			}
			where := "at the top level"
			if path != "" {
				where = "under " + path
			}
			return nil, &Error{File: p.src, Line: k.Line, Key: name,
				Msg: fmt.Sprintf("unknown key %s; allowed %s: %s", strconv.Quote(name), where, strings.Join(allowed, ", "))}
		}
		if first, dup := seen[k.Value]; dup {
			return nil, p.errf(k, full, "is given twice (lines %d and %d)", first, k.Line)
		}
		seen[k.Value] = k.Line
		p.lines[full] = k.Line
		v = deref(v)
		if isNull(v) {
			continue
		}
		out = append(out, entry{name: k.Value, path: full, key: k, value: v})
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (p *parser) file(doc *yaml.Node) (File, error) {
	var f File
	root := doc
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) == 0 {
			return f, nil
		}
		root = doc.Content[0]
	}
	entries, err := p.mapping(root, "", "name", "heartbeat_interval", "resources", "runtime", "discovery", "metrics", "registries", "disk", "ssh", "jupyter", "relay", "nat", "notify")
	if err != nil {
		return f, err
	}
	for _, e := range entries {
		switch e.name {
		case "name":
			if e.value.Kind != yaml.ScalarNode {
				return f, p.errf(e.value, e.path, "is %s; expected a machine name", kindName(e.value))
			}
			f.Name = e.value.Value
			if f.Name == "" {
				return f, p.errf(e.value, e.path, "is empty; give a name or remove the key")
			}
		case "heartbeat_interval":
			if f.HeartbeatInterval, err = p.duration(e); err != nil {
				return f, err
			}
		case "resources":
			if f.Resources, err = p.resources(e.value, e.path); err != nil {
				return f, err
			}
		case "runtime":
			if f.Runtime, err = p.runtime(e.value, e.path); err != nil {
				return f, err
			}
		case "discovery":
			if f.Discovery, err = p.discovery(e.value, e.path); err != nil {
				return f, err
			}
		case "metrics":
			if f.Metrics, err = p.metrics(e.value, e.path); err != nil {
				return f, err
			}
		case "registries":
			if f.Registries, err = p.registries(e.value, e.path); err != nil {
				return f, err
			}
		case "disk":
			if f.Disk, err = p.disk(e.value, e.path); err != nil {
				return f, err
			}
		case "ssh":
			if f.SSH, err = p.ssh(e.value, e.path); err != nil {
				return f, err
			}
		case "jupyter":
			if f.Jupyter, err = p.jupyter(e.value, e.path); err != nil {
				return f, err
			}
		case "relay":
			if f.Relay, err = p.relay(e.value, e.path); err != nil {
				return f, err
			}
		case "nat":
			if f.NAT, err = p.nat(e.value, e.path); err != nil {
				return f, err
			}
		case "notify":
			if f.Notify, err = p.notify(e.value, e.path); err != nil {
				return f, err
			}
		}
	}
	return f, nil
}
