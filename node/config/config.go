package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/cshare/cshare/internal/text"
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
	Metrics           Metrics
	// Registries are credentials for private image registries, used when
	// this machine pulls a job's image. They stay on this machine: they are
	// never written to the ledger.
	Registries []Registry
	// Disk is the disk: section (disk.go).
	Disk Disk
	// SSH is the ssh: section (ssh.go).
	SSH SSH
	// Jupyter is the jupyter: section (ssh.go).
	Jupyter Jupyter
	// Relay and NAT are the relay: and nat: sections (sections.go).
	Relay Relay
	NAT   NAT
	// Notify is the notify: section (notify.go): webhooks to post events
	// to.
	Notify []Notify

	src   string         // path given to Load, for error locations
	lines map[string]int // key path -> line, for error locations
}

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
			Record yaml.Node `yaml:"record_gpus"`
		} `yaml:"runtime"`
		Discovery *struct {
			MDNS yaml.Node `yaml:"mdns"`
		} `yaml:"discovery"`
		Metrics *struct {
			Public yaml.Node `yaml:"public"`
		} `yaml:"metrics"`
		Registries []struct {
			Server   yaml.Node `yaml:"server"`
			Username yaml.Node `yaml:"username"`
			Password yaml.Node `yaml:"password"`
			Token    yaml.Node `yaml:"token"`
		} `yaml:"registries"`
		Disk *struct {
			Reserve yaml.Node `yaml:"reserve"`
		} `yaml:"disk"`
		SSH *struct {
			Listen yaml.Node `yaml:"listen"`
		} `yaml:"ssh"`
		Jupyter *struct {
			Listen yaml.Node `yaml:"listen"`
		} `yaml:"jupyter"`
		Relay *struct {
			Serve yaml.Node `yaml:"serve"`
		} `yaml:"relay"`
		NAT *struct {
			PortMap yaml.Node `yaml:"portmap"`
		} `yaml:"nat"`
		Notify []struct {
			Webhook yaml.Node `yaml:"webhook"`
			Events  yaml.Node `yaml:"events"`
		} `yaml:"notify"`
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
		// The ledger's rule for names (package text), checked here so a bad
		// name stops the node instead of being ignored by every fold.
		if err := text.CheckName("name", f.Name); err != nil {
			var te *text.Error
			errors.As(err, &te)
			return f.errAt("name", "%s; %s", te.Problem, te.Allowed)
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
	return f.checkDisk()
}
