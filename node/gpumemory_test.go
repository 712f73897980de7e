package node

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"

	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/runtime"
)

// TestGPUMemory: on a DGX A100 (go-nvml's mock: 40 GB GPUs) whose
// node.yaml offers only 8 GiB of GPU 0 and all of GPU 1, a job asking for
// a GPU with at least 16 GiB runs on GPU 1; one asking for 64 GiB is
// accepted with a warning that no machine has such a GPU.
func TestGPUMemory(t *testing.T) {
	m := newMesh(t, meshConfig{n: 1, interval: 200 * time.Millisecond, slots: 2, runFor: runtime.FakeManual})
	conf := filepath.Join(t.TempDir(), "node.yaml")
	if err := os.WriteFile(conf, []byte("resources:\n  max_concurrent_jobs: 2\n  gpus:\n    - {device: 0, memory: 8g}\n    - {device: 1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	server := dgxa100.New()
	m.stop(0)
	m.nodes[0].opts.ConfigPath, m.nodes[0].opts.NVML = conf, server
	m.restart(0)
	m.formOrg()
	mn := m.nodes[0]
	one := ptr(int64(1))
	j := submit(t, mn.Node, api.JobSubmit{Name: "big-gpu", GPUs: 1, GPUMemoryMB: 16 << 10, MaxCPUs: one, RangeStart: one, RangeEnd: one})
	_, got := oneRun(t, mn, j.ID)
	if want := server.Devices[1].(*dgxa100.Device).UUID; got != want {
		t.Errorf("the run holds GPU %q, want GPU 1 (%s): GPU 0 offers 8 GiB", got, want)
	}
	res, err := mn.jobs.SubmitJob(ctxT(t), api.JobSubmit{Name: "huge-gpu", Cmd: []string{"true"}, GPUs: 1, GPUMemoryMB: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "with at least 64 GiB of memory each") {
		t.Errorf("warnings %q, want one naming the GPU memory", res.Warnings)
	}
}
