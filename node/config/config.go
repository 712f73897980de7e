package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/cshare/cshare/ledger/jobspec"
	"github.com/cshare/cshare/runtime/hw"
)

// Bounds and defaults of the node keys.
const (
	DefaultHeartbeatInterval = 30 * time.Second
	MinHeartbeatInterval     = time.Second
	MaxHeartbeatInterval     = time.Hour
	// MaxConcurrentJobsLimit caps job slots per machine. A heartbeat lists
	// every instance (and every finished item not yet in the ledger), and it
	// must fit in a gossip message (64 KiB): 256 slots take at most ~55 KB.
	MaxConcurrentJobsLimit = 256
	MaxNameLength          = 64 // bytes
	MaxFileSize            = 1 << 20
)

// File is node.yaml as written. Pointer fields and a nil GPUs slice mean the
// key was absent; File{} is a valid config in which everything takes its
// default. Use Limits to get the effective values.
type File struct {
	Name              string        // "" = not set
	HeartbeatInterval time.Duration // 0 = not set; see Heartbeat
	Resources         Resources
	Runtime           Runtime
	Discovery         Discovery
	// Registries are credentials for private image registries, used when
	// this machine pulls a job's image. They stay on this machine: they are
	// never written to the ledger.
	Registries []Registry

	src   string         // path given to Load, for error locations
	lines map[string]int // key path -> line, for error locations
}

// Resources is the resources: section.
type Resources struct {
	CPULimit          *int   // percent
	MemoryLimit       *int64 // MB
	DiskLimit         *int64 // MB
	MaxConcurrentJobs *int
	// GPUs is nil when the key is absent or null (offer every detected GPU),
	// and non-nil but empty for "gpus: []" (offer none).
	GPUs []GPU
}

// GPU is one entry of resources.gpus.
type GPU struct {
	Device   int
	MemoryMB *int64 // nil = all of the GPU's memory
}

// Registry is one entry of registries: a server and either a user name and
// password or an identity token.
type Registry struct {
	Server, Username, Password, Token string
}

// Runtime is the runtime: section.
type Runtime struct {
	Exec   *bool // nil = false
	Docker *bool // nil = true
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

// Heartbeat is the heartbeat interval to use: the configured one or 30s.
func (f File) Heartbeat() time.Duration {
	if f.HeartbeatInterval == 0 {
		return DefaultHeartbeatInterval
	}
	return f.HeartbeatInterval
}

// Error is a config error. Error() is one line: Msg, which starts with the
// key, then the location when known.
type Error struct {
	File string // path given to Load; "" from Parse
	Line int    // 1-based; 0 when unknown
	Key  string // full key path, e.g. "resources.gpus[0].device"; "" for syntax and top-level errors
	Msg  string // one line, without location
}

func (e *Error) Error() string {
	switch {
	case e.File != "" && e.Line > 0:
		return fmt.Sprintf("%s (%s:%d)", e.Msg, e.File, e.Line)
	case e.File != "":
		return fmt.Sprintf("%s (%s)", e.Msg, e.File)
	case e.Line > 0:
		return fmt.Sprintf("%s (line %d)", e.Msg, e.Line)
	}
	return e.Msg
}

// Load reads and parses the config file at path. An empty path means no
// file: the zero File, every key at its default.
func Load(path string) (File, error) {
	if path == "" {
		return File{}, nil
	}
	fh, err := os.Open(path)
	if err != nil {
		return File{}, fmt.Errorf("config: %w", err)
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, MaxFileSize+1))
	if err != nil {
		return File{}, fmt.Errorf("config: %w", err)
	}
	return parse(path, data)
}

// Parse parses node.yaml content. Empty content is the zero File.
func Parse(data []byte) (File, error) {
	return parse("", data)
}

func parse(src string, data []byte) (f File, err error) {
	defer func() {
		// yaml.v3 has panicked on hostile input before; a config error
		// must never take the node down with a stack trace.
		if r := recover(); r != nil {
			f, err = File{}, &Error{File: src, Msg: oneLine(fmt.Sprintf("invalid YAML: %v", r))}
		}
	}()
	if len(data) > MaxFileSize {
		return File{}, &Error{File: src, Msg: fmt.Sprintf("config file is larger than %d bytes", MaxFileSize)}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return File{}, nil
		}
		return File{}, syntaxError(src, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return File{}, &Error{File: src, Line: extra.Line, Msg: "only one YAML document is allowed (found a second after ---)"}
	} else if !errors.Is(err, io.EOF) {
		return File{}, syntaxError(src, err)
	}

	p := &parser{src: src, lines: map[string]int{}}
	f, err = p.file(&doc)
	if err != nil {
		return File{}, err
	}
	if err := strictDecode(src, data); err != nil {
		return File{}, err
	}
	f.src, f.lines = src, p.lines
	if err := f.check(); err != nil {
		return File{}, err
	}
	return f, nil
}

// strictDecode decodes the document once more with yaml.v3's own strict
// mode (KnownFields). The walk in parser already rejects everything this
// rejects, with better messages; this is a second line of defence that keeps
// the key set honest.
func strictDecode(src string, data []byte) error {
	type rawGPU struct {
		Device yaml.Node `yaml:"device"`
		Memory yaml.Node `yaml:"memory"`
	}
	type raw struct {
		Name              yaml.Node `yaml:"name"`
		HeartbeatInterval yaml.Node `yaml:"heartbeat_interval"`
		Resources         *struct {
			CPULimit          yaml.Node `yaml:"cpu_limit"`
			MemoryLimit       yaml.Node `yaml:"memory_limit"`
			DiskLimit         yaml.Node `yaml:"disk_limit"`
			MaxConcurrentJobs yaml.Node `yaml:"max_concurrent_jobs"`
			GPUs              []rawGPU  `yaml:"gpus"`
		} `yaml:"resources"`
		Runtime *struct {
			Exec   yaml.Node `yaml:"exec"`
			Docker yaml.Node `yaml:"docker"`
		} `yaml:"runtime"`
		Discovery *struct {
			MDNS yaml.Node `yaml:"mdns"`
		} `yaml:"discovery"`
		Registries []struct {
			Server   yaml.Node `yaml:"server"`
			Username yaml.Node `yaml:"username"`
			Password yaml.Node `yaml:"password"`
			Token    yaml.Node `yaml:"token"`
		} `yaml:"registries"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var r raw
	if err := dec.Decode(&r); err != nil && !errors.Is(err, io.EOF) {
		return syntaxError(src, err)
	}
	return nil
}

var yamlLine = regexp.MustCompile(`^line (\d+): `)

// syntaxError turns a yaml.v3 error, which may span lines, into one line.
func syntaxError(src string, err error) *Error {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "yaml: ")
	msg = strings.TrimPrefix(msg, "unmarshal errors:")
	msg = strings.TrimSpace(msg)
	line := 0
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = msg[len(m[0]):]
	}
	return &Error{File: src, Line: line, Msg: "invalid YAML: " + oneLine(msg)}
}

// oneLine folds whitespace runs (including newlines) into single spaces.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

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
	entries, err := p.mapping(root, "", "name", "heartbeat_interval", "resources", "runtime", "discovery", "registries")
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
		case "registries":
			if f.Registries, err = p.registries(e.value, e.path); err != nil {
				return f, err
			}
		}
	}
	return f, nil
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

func (p *parser) duration(e entry) (time.Duration, error) {
	n := e.value
	if n.Kind != yaml.ScalarNode {
		return 0, p.errf(n, e.path, "is %s; expected a duration like 30s", kindName(n))
	}
	if n.ShortTag() != "!!str" {
		return 0, p.errf(n, e.path, "%s is not a duration; write it with a unit, like 30s", show(n))
	}
	d, err := time.ParseDuration(strings.TrimSpace(n.Value))
	if err != nil {
		return 0, p.errf(n, e.path, "%s is not a duration; write it like 30s, 1m or 1m30s", show(n))
	}
	if d == 0 {
		// 0 is how File says "not set"; a written 0 is out of range.
		return 0, p.errf(n, e.path, "0s is outside %s..%s", fmtDur(MinHeartbeatInterval), fmtDur(MaxHeartbeatInterval))
	}
	return d, nil
}

func (p *parser) resources(n *yaml.Node, path string) (Resources, error) {
	var r Resources
	entries, err := p.mapping(n, path, "cpu_limit", "memory_limit", "disk_limit", "max_concurrent_jobs", "gpus")
	if err != nil {
		return r, err
	}
	for _, e := range entries {
		switch e.name {
		case "cpu_limit":
			v, err := p.percent(e)
			if err != nil {
				return r, err
			}
			r.CPULimit = &v
		case "memory_limit":
			v, err := p.sizeMB(e)
			if err != nil {
				return r, err
			}
			r.MemoryLimit = &v
		case "disk_limit":
			v, err := p.sizeMB(e)
			if err != nil {
				return r, err
			}
			r.DiskLimit = &v
		case "max_concurrent_jobs":
			v, err := p.integer(e.value, e.path)
			if err != nil {
				return r, err
			}
			c := clampInt(v)
			r.MaxConcurrentJobs = &c
		case "gpus":
			if r.GPUs, err = p.gpus(e.value, e.path); err != nil {
				return r, err
			}
		}
	}
	return r, nil
}

func (p *parser) gpus(n *yaml.Node, path string) ([]GPU, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, p.errf(n, path, "is %s; expected a list of {device, memory}", kindName(n))
	}
	out := make([]GPU, 0, len(n.Content))
	for i, item := range n.Content {
		ipath := fmt.Sprintf("%s[%d]", path, i)
		item = deref(item)
		if isNull(item) || item.Kind != yaml.MappingNode {
			what := "empty"
			if !isNull(item) {
				what = kindName(item)
			}
			return nil, p.errf(item, ipath, "is %s; expected a mapping with device and optional memory", what)
		}
		p.lines[ipath] = item.Line
		entries, err := p.mapping(item, ipath, "device", "memory")
		if err != nil {
			return nil, err
		}
		var g GPU
		hasDevice := false
		for _, e := range entries {
			switch e.name {
			case "device":
				v, err := p.integer(e.value, e.path)
				if err != nil {
					return nil, err
				}
				g.Device, hasDevice = clampInt(v), true
			case "memory":
				v, err := p.sizeMB(e)
				if err != nil {
					return nil, err
				}
				g.MemoryMB = &v
			}
		}
		if !hasDevice {
			return nil, p.errf(item, ipath+".device", "is missing; give the GPU's index (0, 1, ...)")
		}
		out = append(out, g)
	}
	return out, nil
}

func (p *parser) runtime(n *yaml.Node, path string) (Runtime, error) {
	var r Runtime
	entries, err := p.mapping(n, path, "exec", "docker")
	if err != nil {
		return r, err
	}
	for _, e := range entries {
		if e.value.Kind != yaml.ScalarNode || e.value.ShortTag() != "!!bool" {
			return r, p.errf(e.value, e.path, "%s is not true or false", kindName(e.value))
		}
		var b bool
		if err := e.value.Decode(&b); err != nil {
			return r, p.errf(e.value, e.path, "%s is not true or false", show(e.value))
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

func (p *parser) discovery(n *yaml.Node, path string) (Discovery, error) {
	var d Discovery
	entries, err := p.mapping(n, path, "mdns")
	if err != nil {
		return d, err
	}
	for _, e := range entries {
		if e.value.Kind != yaml.ScalarNode || e.value.ShortTag() != "!!bool" {
			return d, p.errf(e.value, e.path, "%s is not true or false", kindName(e.value))
		}
		var b bool
		if err := e.value.Decode(&b); err != nil {
			return d, p.errf(e.value, e.path, "%s is not true or false", show(e.value))
		}
		d.MDNS = &b
	}
	return d, nil
}

var wholeRE = regexp.MustCompile(`^[-+]?[0-9][0-9_]*$`)

// integer decodes a whole number.
func (p *parser) integer(n *yaml.Node, path string) (int64, error) {
	if n.Kind != yaml.ScalarNode {
		return 0, p.errf(n, path, "is %s; expected a number", kindName(n))
	}
	looksWhole := wholeRE.MatchString(n.Value)
	switch n.ShortTag() {
	case "!!int":
		var v int64
		if err := n.Decode(&v); err == nil {
			return v, nil
		}
	case "!!float":
		if !looksWhole {
			return 0, p.errf(n, path, "%s is not a whole number", show(n))
		}
	}
	if looksWhole {
		return 0, p.errf(n, path, "%s is too large", show(n))
	}
	return 0, p.errf(n, path, "%s is not a number", show(n))
}

// percent decodes cpu_limit: 80 or "80%".
func (p *parser) percent(e entry) (int, error) {
	n := e.value
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
		s, _ := strings.CutSuffix(strings.TrimSpace(n.Value), "%")
		v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return 0, p.errf(n, e.path, "%s is not a number; write a percentage like 80", show(n))
		}
		return clampInt(v), nil
	}
	v, err := p.integer(n, e.path)
	return clampInt(v), err
}

// sizeMB decodes a size in MB: a whole number of MB, or a string with a
// binary unit read as jobspec.ParseSizeMB reads it ("16GB" = 16384; a
// fractional MB is rounded up; at most 16TiB).
func (p *parser) sizeMB(e entry) (int64, error) {
	const hint = `give MB as a number (16384) or a size like "16GB"`
	n := e.value
	if n.Kind != yaml.ScalarNode {
		return 0, p.errf(n, e.path, "is %s; %s", kindName(n), hint)
	}
	switch n.ShortTag() {
	case "!!int":
		return p.integer(n, e.path)
	case "!!float":
		return 0, p.errf(n, e.path, "%s is not a whole number of MB", show(n))
	case "!!str":
	default:
		return 0, p.errf(n, e.path, "%s is not a size; %s", show(n), hint)
	}
	s := strings.TrimSpace(n.Value)
	if v, err := strconv.ParseInt(s, 10, 64); err == nil {
		return v, nil // a quoted plain number is MB too
	}
	// A size with a unit, read by the job spec's one rule (jobspec); a sign
	// is kept so that a negative size is refused as negative below.
	if strings.IndexFunc(s, unicode.IsLetter) < 0 {
		return 0, p.errf(n, e.path, "%s is not a size; %s", show(n), hint) // "16.5": no unit
	}
	neg := strings.HasPrefix(s, "-")
	mb, err := jobspec.ParseSizeMB(e.path, strings.TrimPrefix(s, "-"))
	var je *jobspec.Error
	switch {
	case err == nil:
	case errors.As(err, &je) && je.Problem == jobspec.TooLarge:
		return 0, p.errf(n, e.path, "%s is too large; allowed: at most 16TiB", show(n))
	default:
		return 0, p.errf(n, e.path, "%s is not a size; %s", show(n), hint)
	}
	if neg {
		mb = -mb
	}
	return mb, nil
}

// clampInt narrows v to int without wrapping, so range checks still fire.
func clampInt(v int64) int {
	if v > math.MaxInt32 {
		return math.MaxInt32
	}
	if v < math.MinInt32 {
		return math.MinInt32
	}
	return int(v)
}

func fmtDur(d time.Duration) string {
	s := d.String()
	s = strings.Replace(s, "m0s", "m", 1)
	s = strings.Replace(s, "h0m", "h", 1)
	return s
}

// errAt builds an Error for key, located where the key was written.
func (f File) errAt(key, format string, args ...any) *Error {
	line := f.lines[key]
	for k := key; line == 0 && k != ""; {
		// Fall back to the nearest written parent (resources.gpus[0] for
		// resources.gpus[0].memory when memory was not written).
		i := strings.LastIndexAny(k, ".[")
		if i < 0 {
			break
		}
		k = k[:i]
		line = f.lines[k]
	}
	return &Error{File: f.src, Line: line, Key: key, Msg: key + ": " + fmt.Sprintf(format, args...)}
}

// check validates what does not depend on the hardware.
func (f File) check() error {
	if f.Name != "" {
		switch {
		case len(f.Name) > MaxNameLength:
			return f.errAt("name", "%d bytes is too long; allowed: 1..%d", len(f.Name), MaxNameLength)
		case !utf8.ValidString(f.Name) || strings.ContainsFunc(f.Name, func(r rune) bool { return !unicode.IsPrint(r) || r == utf8.RuneError }):
			return f.errAt("name", "%q contains a control or invalid character; allowed: printable characters", f.Name)
		case strings.TrimSpace(f.Name) != f.Name:
			return f.errAt("name", "%q starts or ends with a space", f.Name)
		}
	}
	if d := f.HeartbeatInterval; d != 0 && (d < MinHeartbeatInterval || d > MaxHeartbeatInterval) {
		return f.errAt("heartbeat_interval", "%s is outside %s..%s", fmtDur(d), fmtDur(MinHeartbeatInterval), fmtDur(MaxHeartbeatInterval))
	}
	r := f.Resources
	if r.CPULimit != nil && (*r.CPULimit < 1 || *r.CPULimit > 100) {
		return f.errAt("resources.cpu_limit", "%d is outside 1..100", *r.CPULimit)
	}
	if r.MaxConcurrentJobs != nil && (*r.MaxConcurrentJobs < 0 || *r.MaxConcurrentJobs > MaxConcurrentJobsLimit) {
		return f.errAt("resources.max_concurrent_jobs", "%d is outside 0..%d (0 means this machine takes no jobs)", *r.MaxConcurrentJobs, MaxConcurrentJobsLimit)
	}
	first := map[int]int{}
	for i, g := range r.GPUs {
		if j, dup := first[g.Device]; dup {
			return f.errAt(fmt.Sprintf("resources.gpus[%d].device", i), "GPU %d is listed twice (also resources.gpus[%d]); list each device once", g.Device, j)
		}
		first[g.Device] = i
	}
	return nil
}

// Limits are the effective resource limits of this node: the config with
// defaults applied, validated against the hardware. GPUs are sorted by
// device.
type Limits struct {
	CPULimit          int        `json:"cpu_limit"`    // percent
	MemoryLimit       int64      `json:"memory_limit"` // MB
	DiskLimit         int64      `json:"disk_limit"`   // MB
	MaxConcurrentJobs int        `json:"max_concurrent_jobs"`
	GPUs              []GPULimit `json:"gpus,omitempty"`
}

// GPULimit is one GPU this node offers and how much of its memory.
type GPULimit struct {
	Device   int   `json:"device"`
	MemoryMB int64 `json:"memory"`
}

// Cores is the usable CPU in millicores: CPUs*1000*cpu_limit/100.
func (l Limits) Cores(h hw.Hardware) int64 {
	return int64(h.CPUs) * 1000 * int64(l.CPULimit) / 100
}

// Limits applies the defaults to f and checks it against the hardware h. The
// error names the key and what this machine allows.
func (f File) Limits(h hw.Hardware) (Limits, error) {
	if err := f.check(); err != nil {
		return Limits{}, err
	}
	r := f.Resources
	l := Limits{CPULimit: 100, MemoryLimit: h.MemoryMB, DiskLimit: h.DiskMB, MaxConcurrentJobs: min(max(h.CPUs, 0), MaxConcurrentJobsLimit)}
	if r.CPULimit != nil {
		l.CPULimit = *r.CPULimit
	}
	if r.MaxConcurrentJobs != nil {
		l.MaxConcurrentJobs = *r.MaxConcurrentJobs
	}
	var err error
	if r.MemoryLimit != nil {
		if l.MemoryLimit, err = f.checkMB("resources.memory_limit", *r.MemoryLimit, h.MemoryMB, "this machine"); err != nil {
			return Limits{}, err
		}
	}
	if r.DiskLimit != nil {
		if l.DiskLimit, err = f.checkMB("resources.disk_limit", *r.DiskLimit, h.DiskMB, "the data dir's disk"); err != nil {
			return Limits{}, err
		}
	}
	if r.GPUs == nil {
		for _, g := range h.GPUs {
			l.GPUs = append(l.GPUs, GPULimit{Device: g.Index, MemoryMB: g.MemoryMB})
		}
	}
	for i, want := range r.GPUs {
		key := fmt.Sprintf("resources.gpus[%d]", i)
		g, ok := findGPU(h, want.Device)
		if !ok {
			return Limits{}, f.errAt(key+".device", "%d is not present; this machine has %s", want.Device, describeGPUs(h))
		}
		mem := g.MemoryMB
		if want.MemoryMB != nil {
			if mem, err = f.checkMB(key+".memory", *want.MemoryMB, g.MemoryMB, fmt.Sprintf("GPU %d", g.Index)); err != nil {
				return Limits{}, err
			}
		}
		l.GPUs = append(l.GPUs, GPULimit{Device: g.Index, MemoryMB: mem})
	}
	sort.Slice(l.GPUs, func(a, b int) bool { return l.GPUs[a].Device < l.GPUs[b].Device })
	return l, nil
}

// checkMB checks 0 < v <= total.
func (f File) checkMB(key string, v, total int64, owner string) (int64, error) {
	switch {
	case v < 0:
		return 0, f.errAt(key, "%d is negative; allowed: 0 < value <= %d", v, total)
	case v == 0:
		return 0, f.errAt(key, "0 is not allowed; allowed: 0 < value <= %d", total)
	case v > total:
		return 0, f.errAt(key, "%d MB is more than %s has (%d MB)", v, owner, total)
	}
	return v, nil
}

func findGPU(h hw.Hardware, index int) (hw.GPU, bool) {
	for _, g := range h.GPUs {
		if g.Index == index {
			return g, true
		}
	}
	return hw.GPU{}, false
}

// describeGPUs says which GPU indices h has: "no GPUs", "GPU 0",
// "GPUs 0..1", "GPUs 0..2, 4..7".
func describeGPUs(h hw.Hardware) string {
	if len(h.GPUs) == 0 {
		return "no GPUs"
	}
	idx := make([]int, 0, len(h.GPUs))
	for _, g := range h.GPUs {
		idx = append(idx, g.Index)
	}
	sort.Ints(idx)
	if len(idx) == 1 {
		return fmt.Sprintf("GPU %d", idx[0])
	}
	var parts []string
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && idx[j+1] == idx[j]+1 {
			j++
		}
		if i == j {
			parts = append(parts, strconv.Itoa(idx[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d..%d", idx[i], idx[j]))
		}
		i = j + 1
	}
	return "GPUs " + strings.Join(parts, ", ")
}
