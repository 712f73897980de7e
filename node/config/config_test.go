package config

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cshare/cshare/runtime/hw"
)

// machine is the hardware the tests validate against: 8 CPUs, 24000 MB of
// RAM, 80000 MB of disk and two 40 GB GPUs.
var machine = hw.Hardware{
	CPUs:     8,
	MemoryMB: 24000,
	DiskMB:   80000,
	GPUs: []hw.GPU{
		{Index: 0, UUID: "GPU-0", Name: "A100", MemoryMB: 40960},
		{Index: 1, UUID: "GPU-1", Name: "A100", MemoryMB: 40960},
	},
}

// seedExample is the node.yaml example of docs/design.md §3.9 (resources
// and GPUs), with a second GPU, plus the node keys.
const seedExample = `name: office-gpu-1
heartbeat_interval: 10s
resources:
  cpu_limit: 80          # Max 80% CPU usage
  memory_limit: 16384    # Max 16GB RAM
  disk_limit: 102400     # Max 100GB disk
  max_concurrent_jobs: 4 # Max 4 jobs at once
  gpus:
    - device: 0
      memory: 8192  # MB
    - device: 1
      memory: 8192
runtime:
  exec: true
  docker: false
`

func TestParseSeedExample(t *testing.T) {
	f, err := Parse([]byte(seedExample))
	if err != nil {
		t.Fatal(err)
	}
	if f.Name != "office-gpu-1" || f.Heartbeat() != 10*time.Second {
		t.Errorf("name %q heartbeat %s", f.Name, f.Heartbeat())
	}
	if !f.Runtime.ExecEnabled() || f.Runtime.DockerEnabled() {
		t.Errorf("runtime %+v", f.Runtime)
	}
	// The example's disk_limit (100 GB) is more than the test machine has.
	big := machine
	big.DiskMB = 200000
	l, err := f.Limits(big)
	if err != nil {
		t.Fatal(err)
	}
	want := Limits{CPULimit: 80, MemoryLimit: 16384, DiskLimit: 102400, MaxConcurrentJobs: 4,
		GPUs: []GPULimit{{Device: 0, MemoryMB: 8192}, {Device: 1, MemoryMB: 8192}}}
	if !reflect.DeepEqual(l, want) {
		t.Errorf("Limits = %+v\nwant %+v", l, want)
	}
	if c := l.Cores(big); c != 6400 {
		t.Errorf("Cores = %d, want 6400", c)
	}
	b, _ := json.Marshal(l)
	const wantJSON = `{"cpu_limit":80,"memory_limit":16384,"disk_limit":102400,"max_concurrent_jobs":4,"gpus":[{"device":0,"memory":8192},{"device":1,"memory":8192}]}`
	if string(b) != wantJSON {
		t.Errorf("JSON %s\nwant %s", b, wantJSON)
	}
}

func TestDefaults(t *testing.T) {
	all := Limits{CPULimit: 100, MemoryLimit: 24000, DiskLimit: 80000, MaxConcurrentJobs: 8,
		GPUs: []GPULimit{{Device: 0, MemoryMB: 40960}, {Device: 1, MemoryMB: 40960}}}
	cases := []struct {
		name string
		yaml string
		want Limits
	}{
		{"empty", "", all},
		{"comments only", "# nothing here\n", all},
		{"empty document", "---\n", all},
		{"null top", "~\n", all},
		{"empty resources", "resources:\n", all},
		{"null values", "resources:\n  cpu_limit:\n  memory_limit: ~\n  gpus:\n", all},
		{"only name", "name: box\n", all},
		{"cpu percent string", "resources:\n  cpu_limit: 80%\n", with(all, func(l *Limits) { l.CPULimit = 80 })},
		{"cpu quoted", "resources:\n  cpu_limit: \"50\"\n", with(all, func(l *Limits) { l.CPULimit = 50 })},
		{"memory GB", "resources:\n  memory_limit: 16GB\n", with(all, func(l *Limits) { l.MemoryLimit = 16384 })},
		{"memory MiB", "resources:\n  memory_limit: 512MiB\n", with(all, func(l *Limits) { l.MemoryLimit = 512 })},
		{"memory quoted number", "resources:\n  memory_limit: \"1000\"\n", with(all, func(l *Limits) { l.MemoryLimit = 1000 })},
		{"disk fractional T", "resources:\n  disk_limit: 0.05 T\n", with(all, func(l *Limits) { l.DiskLimit = 52429 })}, // rounded up, as job sizes are
		{"memory all of it", "resources:\n  memory_limit: 24000\n", all},
		{"zero jobs", "resources:\n  max_concurrent_jobs: 0\n", with(all, func(l *Limits) { l.MaxConcurrentJobs = 0 })},
		{"no gpus", "resources:\n  gpus: []\n", with(all, func(l *Limits) { l.GPUs = nil })},
		{"one gpu default memory", "resources:\n  gpus:\n    - device: 1\n", with(all, func(l *Limits) { l.GPUs = []GPULimit{{Device: 1, MemoryMB: 40960}} })},
		{"gpus sorted", "resources:\n  gpus: [{device: 1, memory: 100}, {device: 0, memory: 8GB}]\n",
			with(all, func(l *Limits) { l.GPUs = []GPULimit{{Device: 0, MemoryMB: 8192}, {Device: 1, MemoryMB: 100}} })},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := Parse([]byte(c.yaml))
			if err != nil {
				t.Fatal(err)
			}
			l, err := f.Limits(machine)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(l, c.want) {
				t.Errorf("Limits = %+v\nwant %+v", l, c.want)
			}
		})
	}
}

func with(l Limits, edit func(*Limits)) Limits {
	l.GPUs = append([]GPULimit(nil), l.GPUs...)
	edit(&l)
	return l
}

func TestZeroFile(t *testing.T) {
	var f File
	if f.Heartbeat() != DefaultHeartbeatInterval || f.Runtime.ExecEnabled() || !f.Runtime.DockerEnabled() {
		t.Errorf("zero File: heartbeat %s exec %v docker %v", f.Heartbeat(), f.Runtime.ExecEnabled(), f.Runtime.DockerEnabled())
	}
	l, err := f.Limits(hw.Hardware{CPUs: 2, MemoryMB: 1000, DiskMB: 2000})
	if err != nil {
		t.Fatal(err)
	}
	want := Limits{CPULimit: 100, MemoryLimit: 1000, DiskLimit: 2000, MaxConcurrentJobs: 2}
	if !reflect.DeepEqual(l, want) {
		t.Errorf("Limits = %+v, want %+v", l, want)
	}
	if c := l.Cores(hw.Hardware{CPUs: 2}); c != 2000 {
		t.Errorf("Cores = %d, want 2000", c)
	}
	loaded, err := Load("")
	if err != nil || !reflect.DeepEqual(loaded, File{}) {
		t.Errorf("Load(\"\") = %+v, %v; want zero File", loaded, err)
	}
}

func TestCores(t *testing.T) {
	for _, c := range []struct {
		cpus, limit int
		want        int64
	}{{8, 100, 8000}, {8, 80, 6400}, {3, 33, 990}, {1, 1, 10}, {64, 50, 32000}} {
		if got := (Limits{CPULimit: c.limit}).Cores(hw.Hardware{CPUs: c.cpus}); got != c.want {
			t.Errorf("Cores(%d CPUs, %d%%) = %d, want %d", c.cpus, c.limit, got, c.want)
		}
	}
}

// TestParseErrors: everything Parse rejects, whatever the machine.
func TestParseErrors(t *testing.T) {
	cases := []struct {
		name, yaml, key, want string
	}{
		{"cpu too high", "resources:\n  cpu_limit: 150\n", "resources.cpu_limit", "resources.cpu_limit: 150 is outside 1..100 (line 2)"},
		{"cpu zero", "resources:\n  cpu_limit: 0\n", "resources.cpu_limit", "resources.cpu_limit: 0 is outside 1..100 (line 2)"},
		{"cpu percent too high", "resources:\n  cpu_limit: 101%\n", "resources.cpu_limit", "resources.cpu_limit: 101 is outside 1..100 (line 2)"},
		{"cpu not a number", "resources:\n  cpu_limit: \"abc\"\n", "resources.cpu_limit", `resources.cpu_limit: "abc" is not a number; write a percentage like 80 (line 2)`},
		{"cpu plain word", "resources:\n  cpu_limit: abc\n", "resources.cpu_limit", `resources.cpu_limit: "abc" is not a number`},
		{"cpu float", "resources:\n  cpu_limit: 80.5\n", "resources.cpu_limit", "resources.cpu_limit: 80.5 is not a whole number"},
		{"cpu bool", "resources:\n  cpu_limit: true\n", "resources.cpu_limit", "resources.cpu_limit: true is not a number"},
		{"cpu list", "resources:\n  cpu_limit: [80]\n", "resources.cpu_limit", "resources.cpu_limit: is a list; expected a number"},
		{"cpu huge", "resources:\n  cpu_limit: 99999999999999999999999\n", "resources.cpu_limit", "resources.cpu_limit: 99999999999999999999999 is outside 1..100 (line 2)"},
		{"cpu 26 digits", "resources:\n  cpu_limit: 12345678901234567890123456\n", "resources.cpu_limit", "resources.cpu_limit: 12345678901234567890123456 is outside 1..100 (line 2)"},
		{"cpu 26 digits percent", "resources:\n  cpu_limit: \"12345678901234567890123456%\"\n", "resources.cpu_limit", `resources.cpu_limit: "12345678901234567890123456%" is outside 1..100 (line 2)`},
		{"jobs 26 digits", "resources:\n  max_concurrent_jobs: 12345678901234567890123456\n", "resources.max_concurrent_jobs", "resources.max_concurrent_jobs: 12345678901234567890123456 is outside 0..256"},
		{"cpu explicit int tag", "resources:\n  cpu_limit: !!int \"abc\"\n", "resources.cpu_limit", "resources.cpu_limit: abc is not a number"},
		{"list as key", "resources: {[a]: 1}\n", "resources.(a list)", `unknown key "resources.(a list)"`},
		{"list as top key", "{[a]: 1}\n", "(a list)", `unknown key "(a list)"; allowed at the top level`},
		{"memory not a size", "resources:\n  memory_limit: 16XB\n", "resources.memory_limit", `resources.memory_limit: "16XB" is not a size; give MB as a number (16384) or a size like "16GB"`},
		{"memory float", "resources:\n  memory_limit: 1.5\n", "resources.memory_limit", "resources.memory_limit: 1.5 is not a whole number of MB"},
		{"memory mapping", "resources:\n  memory_limit: {a: 1}\n", "resources.memory_limit", "resources.memory_limit: is a mapping;"},
		{"memory absurd", "resources:\n  memory_limit: 99999999999999999999PB\n", "resources.memory_limit", "resources.memory_limit: \"99999999999999999999PB\" is too large"},
		{"disk bool", "resources:\n  disk_limit: false\n", "resources.disk_limit", "resources.disk_limit: false is not a size"},
		{"jobs negative", "resources:\n  max_concurrent_jobs: -1\n", "resources.max_concurrent_jobs", "resources.max_concurrent_jobs: -1 is outside 0..256 (0 means this machine takes no jobs) (line 2)"},
		{"jobs huge", "resources:\n  max_concurrent_jobs: 5000\n", "resources.max_concurrent_jobs", "resources.max_concurrent_jobs: 5000 is outside 0..256"},
		{"jobs string", "resources:\n  max_concurrent_jobs: four\n", "resources.max_concurrent_jobs", `resources.max_concurrent_jobs: "four" is not a number`},
		{"unknown resources key", "resources:\n  cpu_limit: 80\n  foo: 1\n", "resources.foo", `unknown key "resources.foo"; allowed under resources: cpu_limit, memory_limit, disk_limit, max_concurrent_jobs, gpus (line 3)`},
		{"unknown top key", "nmae: x\n", "nmae", `unknown key "nmae"; allowed at the top level: name, heartbeat_interval, resources, runtime, discovery, metrics, registries, disk, ssh, jupyter, relay, nat, notify (line 1)`},
		{"relay serve not a bool", "relay:\n  serve: yes please\n", "relay.serve", `relay.serve: "yes please" (a string) is not true or false`},
		{"unknown relay key", "relay: {limit: 1}\n", "relay.limit", `unknown key "relay.limit"; allowed under relay: serve (line 1)`},
		{"nat portmap a number", "nat: {portmap: 1}\n", "nat.portmap", `nat.portmap: 1 is not true or false`},
		{"unknown gpu key", "resources:\n  gpus:\n    - device: 0\n      mem: 1\n", "resources.gpus[0].mem", `unknown key "resources.gpus[0].mem"; allowed under resources.gpus[0]: device, memory (line 4)`},
		{"unknown runtime key", "runtime:\n  podman: true\n", "runtime.podman", `unknown key "runtime.podman"`},
		{"seed keys at top level", "cpu_limit: 80\n", "cpu_limit", `unknown key "cpu_limit"; allowed at the top level`},
		{"duplicate key", "resources:\n  cpu_limit: 80\n  cpu_limit: 90\n", "resources.cpu_limit", "resources.cpu_limit: is given twice (lines 2 and 3) (line 3)"},
		{"duplicate gpu", "resources:\n  gpus:\n    - device: 0\n    - device: 1\n    - device: 0\n", "resources.gpus[2].device", "resources.gpus[2].device: GPU 0 is listed twice (also resources.gpus[0]); list each device once (line 5)"},
		{"duplicate gpu via alias", "resources:\n  gpus: [&g {device: 1}, *g]\n", "resources.gpus[1].device", "resources.gpus[1].device: GPU 1 is listed twice"},
		{"gpus mapping", "resources:\n  gpus:\n    device: 0\n", "resources.gpus", "resources.gpus: is a mapping; expected a list of {device, memory}"},
		{"gpu item number", "resources:\n  gpus: [0, 1]\n", "resources.gpus[0]", "resources.gpus[0]: is 0; expected a mapping with device and optional memory"},
		{"gpu item empty", "resources:\n  gpus:\n    -\n", "resources.gpus[0]", "resources.gpus[0]: is empty; expected a mapping"},
		{"gpu missing device", "resources:\n  gpus:\n    - memory: 100\n", "resources.gpus[0].device", "resources.gpus[0].device: is missing; give the GPU's index (0, 1, ...) (line 3)"},
		{"gpu device string", "resources:\n  gpus:\n    - device: first\n", "resources.gpus[0].device", `resources.gpus[0].device: "first" is not a number`},
		{"gpu memory string", "resources:\n  gpus:\n    - device: 0\n      memory: lots\n", "resources.gpus[0].memory", `resources.gpus[0].memory: "lots" is not a size`},
		{"heartbeat number", "heartbeat_interval: 30\n", "heartbeat_interval", "heartbeat_interval: 30 is not a duration; write it with a unit, like 30s (line 1)"},
		{"heartbeat word", "heartbeat_interval: often\n", "heartbeat_interval", `heartbeat_interval: "often" is not a duration; write it like 30s, 1m or 1m30s`},
		{"heartbeat short", "heartbeat_interval: 500ms\n", "heartbeat_interval", "heartbeat_interval: 500ms is outside 1s..1h (line 1)"},
		{"heartbeat long", "heartbeat_interval: 2h\n", "heartbeat_interval", "heartbeat_interval: 2h is outside 1s..1h"},
		{"heartbeat zero", "heartbeat_interval: 0s\n", "heartbeat_interval", "heartbeat_interval: 0s is outside 1s..1h"},
		{"heartbeat negative", "heartbeat_interval: -5s\n", "heartbeat_interval", "heartbeat_interval: -5s is outside 1s..1h"},
		{"exec string", "runtime:\n  exec: \"yes\"\n", "runtime.exec", `runtime.exec: "yes" (a string) is not true or false (line 2)`},
		{"docker number", "runtime:\n  docker: 1\n", "runtime.docker", "runtime.docker: 1 is not true or false"},
		{"mdns string", "discovery:\n  mdns: \"no\"\n", "discovery.mdns", `discovery.mdns: "no" (a string) is not true or false (line 2)`},
		{"unknown discovery key", "discovery:\n  dht: true\n", "discovery.dht", `unknown key "discovery.dht"; allowed under discovery: mdns (line 2)`},
		{"discovery list", "discovery: [mdns]\n", "discovery", "discovery: is a list; expected a mapping with keys mdns"},
		{"runtime list", "runtime: [docker]\n", "runtime", "runtime: is a list; expected a mapping with keys exec, docker, record_gpus"},
		{"record_gpus too many", "runtime:\n  record_gpus: 65\n", "runtime.record_gpus", "runtime.record_gpus: 65 is outside 0..64 (line 2)"},
		{"record_gpus string", "runtime:\n  record_gpus: two\n", "runtime.record_gpus", "runtime.record_gpus"},
		{"resources scalar", "resources: lots\n", "resources", `resources: is "lots" (a string); expected a mapping`},
		{"name empty", "name: \"\"\n", "name", "name: is empty; give a name or remove the key (line 1)"},
		{"name too long", "name: " + strings.Repeat("x", 65) + "\n", "name", "name: 65 characters; allowed: at most 64, one line of printable text (line 1)"},
		{"name control", "name: \"a\\tb\"\n", "name", `name: "a\tb" holds a control character (U+0009); allowed: 1 to 64 characters, one line of printable text`},
		{"name spaces", "name: \" box\"\n", "name", `name: " box" starts or ends with a space`},
		{"name mapping", "name: {a: b}\n", "name", "name: is a mapping; expected a machine name"},
		{"top level list", "- resources\n", "", "the top level: is a list; expected a mapping with keys name, heartbeat_interval, resources, runtime, discovery, metrics, registries, disk, ssh, jupyter, relay, nat, notify (line 1)"},
		{"top level scalar", "hello\n", "", `the top level: is "hello" (a string); expected a mapping`},
		{"syntax", "resources:\n  cpu_limit: [80\n", "", "invalid YAML: "},
		{"tabs", "resources:\n\tcpu_limit: 80\n", "", "invalid YAML: "},
		{"two documents", "name: a\n---\nname: b\n", "", "only one YAML document is allowed (found a second after ---) (line 2)"},
		{"merge key", "base: &b {cpu_limit: 80}\nresources:\n  <<: *b\n", "base", `unknown key "base"`},
		{"recursive anchor", "resources: &r\n  gpus: *r\n", "resources.gpus", "resources.gpus: is a mapping; expected a list"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.yaml))
			checkErr(t, err, c.key, c.want)
		})
	}
}

// TestLimitsErrors: what parses but does not fit this machine.
func TestLimitsErrors(t *testing.T) {
	noGPUs := machine
	noGPUs.GPUs = nil
	gappy := machine
	gappy.GPUs = []hw.GPU{{Index: 0, MemoryMB: 100}, {Index: 1, MemoryMB: 100}, {Index: 2, MemoryMB: 100}, {Index: 4, MemoryMB: 100}, {Index: 7, MemoryMB: 100}}
	one := machine
	one.GPUs = machine.GPUs[:1]
	cases := []struct {
		name string
		hw   hw.Hardware
		yaml string
		key  string
		want string
	}{
		{"memory too much", machine, "resources:\n  memory_limit: 99999999\n", "resources.memory_limit", "resources.memory_limit: 99999999 MB is more than this machine has (24000 MB) (line 2)"},
		{"memory GB too much", machine, "resources:\n  memory_limit: 32GB\n", "resources.memory_limit", "resources.memory_limit: 32768 MB is more than this machine has (24000 MB)"},
		{"memory zero", machine, "resources:\n  memory_limit: 0\n", "resources.memory_limit", "resources.memory_limit: 0 is not allowed; allowed: 0 < value <= 24000 (line 2)"},
		{"memory negative", machine, "resources:\n  memory_limit: -1\n", "resources.memory_limit", "resources.memory_limit: -1 is negative; allowed: 0 < value <= 24000"},
		{"disk negative", machine, "resources:\n  disk_limit: -5\n", "resources.disk_limit", "resources.disk_limit: -5 is negative; allowed: 0 < value <= 80000 (line 2)"},
		{"disk too much", machine, "resources:\n  disk_limit: 102400\n", "resources.disk_limit", "resources.disk_limit: 102400 MB is more than the data dir's disk has (80000 MB)"},
		{"gpu absent", machine, "resources:\n  gpus:\n    - device: 3\n", "resources.gpus[0].device", "resources.gpus[0].device: 3 is not present; this machine has GPUs 0..1 (line 3)"},
		{"gpu negative", machine, "resources:\n  gpus:\n    - device: -1\n", "resources.gpus[0].device", "resources.gpus[0].device: -1 is not present; this machine has GPUs 0..1"},
		{"gpu on gpu-less machine", noGPUs, "resources:\n  gpus:\n    - device: 0\n", "resources.gpus[0].device", "resources.gpus[0].device: 0 is not present; this machine has no GPUs"},
		{"gpu one", one, "resources:\n  gpus:\n    - device: 1\n", "resources.gpus[0].device", "resources.gpus[0].device: 1 is not present; this machine has GPU 0"},
		{"gpu gaps", gappy, "resources:\n  gpus:\n    - device: 0\n    - device: 5\n", "resources.gpus[1].device", "resources.gpus[1].device: 5 is not present; this machine has GPUs 0..2, 4, 7 (line 4)"},
		{"gpu memory too much", machine, "resources:\n  gpus:\n    - device: 1\n      memory: 50000\n", "resources.gpus[0].memory", "resources.gpus[0].memory: 50000 MB is more than GPU 1 has (40960 MB) (line 4)"},
		{"gpu memory zero", machine, "resources:\n  gpus:\n    - device: 0\n      memory: 0\n", "resources.gpus[0].memory", "resources.gpus[0].memory: 0 is not allowed; allowed: 0 < value <= 40960"},
		{"gpu memory negative", machine, "resources:\n  gpus:\n    - device: 0\n      memory: -8GB\n", "resources.gpus[0].memory", "resources.gpus[0].memory: -8192 is negative; allowed: 0 < value <= 40960"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := Parse([]byte(c.yaml))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			_, err = f.Limits(c.hw)
			checkErr(t, err, c.key, c.want)
		})
	}
}

// TestLimitsChecksCodeBuiltFiles: a File made in Go, not parsed, is held to
// the same rules.
func TestLimitsChecksCodeBuiltFiles(t *testing.T) {
	n := 0
	cases := []struct {
		f    File
		want string
	}{
		{File{Resources: Resources{CPULimit: &n}}, "resources.cpu_limit: 0 is outside 1..100"},
		{File{HeartbeatInterval: time.Millisecond}, "heartbeat_interval: 1ms is outside 1s..1h"},
		{File{Resources: Resources{GPUs: []GPU{{Device: 1}, {Device: 1}}}}, "resources.gpus[1].device: GPU 1 is listed twice"},
		{File{Name: "a\nb"}, `name: "a\nb" holds a line break (U+000A)`},
	}
	for _, c := range cases {
		_, err := c.f.Limits(machine)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("Limits(%+v) = %v, want %q", c.f, err, c.want)
		}
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "node.yaml")
	if err := os.WriteFile(path, []byte(seedExample), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Limits(machine) // disk_limit 102400 > 80000
	checkErr(t, err, "resources.disk_limit", "resources.disk_limit: 102400 MB is more than the data dir's disk has (80000 MB) ("+path+":6)")

	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("resources:\n  cpu_limit: 150\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Load(bad)
	checkErr(t, err, "resources.cpu_limit", "resources.cpu_limit: 150 is outside 1..100 ("+bad+":2)")

	_, err = Load(filepath.Join(dir, "missing.yaml"))
	if err == nil || !errors.Is(err, os.ErrNotExist) || strings.Contains(err.Error(), "\n") {
		t.Errorf("Load(missing) = %v", err)
	}

	huge := filepath.Join(dir, "huge.yaml")
	if err := os.WriteFile(huge, []byte("#"+strings.Repeat("x", MaxFileSize)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(huge); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("Load(huge) = %v", err)
	}
}

// checkErr: err is a one-line *Error for key whose text starts with want.
func checkErr(t *testing.T, err error, key, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want %q", want)
	}
	if strings.ContainsAny(err.Error(), "\n\r") {
		t.Errorf("error is not one line: %q", err)
	}
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("error %T %v is not a *config.Error", err, err)
	}
	if ce.Key != key {
		t.Errorf("key %q, want %q (error %q)", ce.Key, key, err)
	}
	if !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error\n  %q\nwant prefix\n  %q", err, want)
	}
}

func TestRegistries(t *testing.T) {
	f, err := Parse([]byte("registries:\n  - server: ghcr.io\n    username: u\n    password: p\n  - server: registry.example.com:5000\n    token: tok\n"))
	if err != nil {
		t.Fatal(err)
	}
	if r := f.RegistryFor("ghcr.io/acme/render:1"); r == nil || r.Username != "u" {
		t.Fatalf("ghcr.io: %+v", r)
	}
	if r := f.RegistryFor("registry.example.com:5000/x"); r == nil || r.Token != "tok" {
		t.Fatalf("example: %+v", r)
	}
	if r := f.RegistryFor("busybox"); r != nil {
		t.Fatalf("docker.io: %+v", r)
	}
	for _, bad := range []string{
		"registries:\n  - server: ghcr.io\n",
		"registries:\n  - username: u\n    password: p\n",
		"registries:\n  - server: a\n    password: p\n    token: t\n    username: u\n",
		"registries:\n  - server: a\n    user: u\n",
		"registries: 5\n",
	} {
		if _, err := Parse([]byte(bad)); err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "registries") {
			t.Errorf("%q: err %v", bad, err)
		}
	}
}

func TestDiscovery(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want bool
	}{
		{"", true},
		{"discovery:\n", true},
		{"discovery:\n  mdns: true\n", true},
		{"discovery: {mdns: false}\n", false},
	} {
		f, err := Parse([]byte(tc.src))
		if err != nil {
			t.Fatalf("%q: %v", tc.src, err)
		}
		if got := f.Discovery.MDNSEnabled(); got != tc.want {
			t.Errorf("%q: MDNSEnabled = %v, want %v", tc.src, got, tc.want)
		}
	}
}

// TestRelayAndNAT: relay.serve is unset (serve when publicly reachable)
// unless given; nat.portmap is on unless turned off.
func TestRelayAndNAT(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		src     string
		serve   *bool
		portmap bool
	}{
		{"", nil, true},
		{"relay:\nnat:\n", nil, true},
		{"relay: {serve: true}\n", &yes, true},
		{"relay:\n  serve: false\nnat: {portmap: false}\n", &no, false},
		{"nat:\n  portmap: true\n", nil, true},
	} {
		f, err := Parse([]byte(tc.src))
		if err != nil {
			t.Fatalf("%q: %v", tc.src, err)
		}
		if (f.Relay.Serve == nil) != (tc.serve == nil) || f.Relay.Serve != nil && *f.Relay.Serve != *tc.serve {
			t.Errorf("%q: relay.serve = %v, want %v", tc.src, f.Relay.Serve, tc.serve)
		}
		if got := f.NAT.PortMapEnabled(); got != tc.portmap {
			t.Errorf("%q: PortMapEnabled = %v, want %v", tc.src, got, tc.portmap)
		}
	}
}

func TestRecordGPUs(t *testing.T) {
	f, err := Parse([]byte("runtime:\n  record_gpus: 2\n"))
	if err != nil || f.Runtime.RecordGPUs != 2 || !f.Runtime.DockerEnabled() {
		t.Fatalf("%+v, %v", f.Runtime, err)
	}
}

func TestMetrics(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want bool
	}{
		{"", false},
		{"metrics:\n", false},
		{"metrics: {public: true}\n", true},
		{"metrics:\n  public: false\n", false},
	} {
		f, err := Parse([]byte(tc.src))
		if err != nil {
			t.Fatalf("%q: %v", tc.src, err)
		}
		if f.Metrics.Public != tc.want {
			t.Errorf("%q: Public = %v, want %v", tc.src, f.Metrics.Public, tc.want)
		}
	}
	for _, src := range []string{"metrics: {public: yes}\n", "metrics: {public: 1}\n", "metrics: {open: true}\n", "metrics: true\n"} {
		if _, err := Parse([]byte(src)); err == nil || !strings.Contains(err.Error(), "metrics") {
			t.Errorf("%q: %v, want an error naming metrics", src, err)
		}
	}
}

func TestNotify(t *testing.T) {
	f, err := Parse([]byte("notify:\n  - webhook: https://hooks.slack.com/services/T/B/X\n    events: [job.done, machine.offline]\n"))
	if err != nil || len(f.Notify) != 1 || f.Notify[0].Webhook != "https://hooks.slack.com/services/T/B/X" || len(f.Notify[0].Events) != 2 {
		t.Fatalf("notify: %+v %v", f.Notify, err)
	}
	for _, c := range []struct{ src, want string }{
		{"notify:\n  - webhook: ftp://x/y\n    events: [job.done]\n", `notify[0].webhook: "ftp://x/y" is not an http or https URL`},
		{"notify:\n  - webhook: http://\n    events: [job.done]\n", `notify[0].webhook: "http://" is not an http or https URL`},
		{"notify:\n  - webhook: http://x\n    events: [job.finished]\n", `notify[0].events: "job.finished" is not an event type; allowed: `},
		{"notify:\n  - webhook: http://x\n    events: []\n", "notify[0].events: empty; list event types"},
		{"notify:\n  - webhook: http://x\n", "notify[0].events: is missing"},
		{"notify:\n  - events: [job.done]\n", "notify[0].webhook: is missing"},
		{"notify:\n  - webhook: http://x\n    events: [job.done]\n    secret: 1\n", "notify[0].secret"},
		{"notify: 5\n", "notify: is"},
	} {
		_, err := Parse([]byte(c.src))
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v, want one line with %q", c.src, err, c.want)
		}
	}
}
