package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/cshare/cshare/runtime/hw"
)

// FuzzParse: Parse and Limits never panic; every error is a one-line
// *Error; whatever passes Limits is within the machine.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"", seedExample, "---\n", "~\n",
		"resources:\n  cpu_limit: 150\n",
		"resources:\n  gpus: [&g {device: 1}, *g]\n",
		"resources: &r\n  gpus: *r\n",
		"a: &a\n  b: *a\n",
		"resources:\n  memory_limit: 1.5T\n  disk_limit: \"7\"\n",
		"heartbeat_interval: 1m30s\nruntime: {exec: true}\n",
		"name: a\n---\nname: b\n",
		"resources:\n  gpus:\n    - device: 0\n      memory: 8GB\n",
	} {
		f.Add([]byte(s))
	}
	hws := []hw.Hardware{machine, {CPUs: 1, MemoryMB: 512, DiskMB: 1024}}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data)
		if err != nil {
			checkOneLine(t, err)
			return
		}
		for _, h := range hws {
			l, err := file.Limits(h)
			if err != nil {
				checkOneLine(t, err)
				continue
			}
			if l.CPULimit < 1 || l.CPULimit > 100 ||
				l.MemoryLimit > h.MemoryMB || l.DiskLimit > h.DiskMB ||
				l.MaxConcurrentJobs < 0 || l.MaxConcurrentJobs > MaxConcurrentJobsLimit {
				t.Fatalf("limits out of range: %+v on %+v", l, h)
			}
			if file.Resources.MemoryLimit != nil && l.MemoryLimit <= 0 {
				t.Fatalf("non-positive memory limit %d accepted", l.MemoryLimit)
			}
			for i, g := range l.GPUs {
				if i > 0 && l.GPUs[i-1].Device >= g.Device {
					t.Fatalf("GPUs not sorted and distinct: %+v", l.GPUs)
				}
				p, ok := findGPU(h, g.Device)
				if !ok || g.MemoryMB <= 0 || g.MemoryMB > p.MemoryMB {
					t.Fatalf("GPU limit %+v does not fit %+v", g, h.GPUs)
				}
			}
			_ = l.Cores(h)
		}
	})
}

func checkOneLine(t *testing.T, err error) {
	t.Helper()
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("error %T %q is not a *Error", err, err)
	}
	if s := err.Error(); s == "" || strings.ContainsAny(s, "\n\r") {
		t.Fatalf("error is not one line: %q", s)
	}
}
