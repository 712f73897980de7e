//go:build linux

package hw

import (
	"os"
	"path/filepath"
	"testing"
)

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestMemTotal(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "meminfo")
	write(t, good, "MemFree:  100 kB\nMemTotal:       24684084 kB\nSwap: 0 kB\n")
	if mb, err := memTotalMB(good); err != nil || mb != 24105 {
		t.Fatalf("memTotalMB = %d, %v; want 24105", mb, err)
	}
	for name, data := range map[string]string{
		"none":  "MemFree: 1 kB\n",
		"bad":   "MemTotal: lots kB\n",
		"unit":  "MemTotal: 5 MB\n",
		"empty": "MemTotal:\n",
	} {
		p := filepath.Join(dir, name)
		write(t, p, data)
		if _, err := memTotalMB(p); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := memTotalMB(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing file: no error")
	}
}

func TestCgroupCPUs(t *testing.T) {
	cases := []struct {
		name   string
		cgroup string
		files  map[string]string
		want   int
		wantOK bool
	}{
		{"v2 no limit", "0::/\n", map[string]string{"cpu.max": "max 100000\n"}, 0, false},
		{"v2 namespace root", "0::/\n", map[string]string{"cpu.max": "150000 100000\n"}, 2, true},
		{"v2 nested takes smallest ancestor", "0::/a/b\n", map[string]string{
			"a/b/cpu.max": "max 100000\n",
			"a/cpu.max":   "300000 100000\n",
			"cpu.max":     "max 100000\n",
		}, 3, true},
		{"v1 cpu", "4:memory:/x\n3:cpu,cpuacct:/\n", map[string]string{
			"cpu,cpuacct/cpu.cfs_quota_us":  "400000\n",
			"cpu,cpuacct/cpu.cfs_period_us": "100000\n",
		}, 4, true},
		{"v1 unlimited", "1:cpu:/\n", map[string]string{
			"cpu/cpu.cfs_quota_us":  "-1\n",
			"cpu/cpu.cfs_period_us": "100000\n",
		}, 0, false},
		{"garbage", "nonsense\n0::/\n", map[string]string{"cpu.max": "x y\n"}, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			root := filepath.Join(dir, "sys")
			if err := os.MkdirAll(root, 0o755); err != nil {
				t.Fatal(err)
			}
			for p, data := range c.files {
				write(t, filepath.Join(root, p), data)
			}
			cg := filepath.Join(dir, "cgroup")
			write(t, cg, c.cgroup)
			got, ok := cgroupCPUs(cg, root)
			if got != c.want || ok != c.wantOK {
				t.Fatalf("cgroupCPUs = %d, %v; want %d, %v", got, ok, c.want, c.wantOK)
			}
		})
	}
	if _, ok := cgroupCPUs(filepath.Join(t.TempDir(), "missing"), "/nonexistent"); ok {
		t.Error("missing cgroup file reported a quota")
	}
}
