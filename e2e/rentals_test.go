//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A rental ends with its org and its renter (issue 27): after org delete,
// a renter's leave or removal, no container of the contract keeps running
// on its host, also after the host's node restarts; and a host's node
// removes, at start, every container labelled for an org it is not in.

// contractContainers are the IDs of the contract containers of machine on
// the shared engine, running or not.
func contractContainers(t *testing.T, machine string) []string {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-aq", "--filter", "label=cshare.contract", "--filter", "label=cshare.machine="+machine).Output()
	if err != nil {
		t.Fatalf("docker ps: %v", err)
	}
	return strings.Fields(string(out))
}

// stop stops p's node the way a user does (SIGTERM) and waits for it.
func (p *proc) stop() {
	p.t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _, _ = p.cmd.Process.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
	p.cmd.ProcessState = &os.ProcessState{}
}

// rent makes host offer a CPU and renter rent it, and waits until the
// contract's container runs; it returns the contract's ID.
func rent(t *testing.T, host, renter *proc) string {
	t.Helper()
	return rentWith(t, host, renter, "--", "sleep", "3600")
}

// rentWith is rent with the contract create arguments after the image
// (a launch mode, a command).
func rentWith(t *testing.T, host, renter *proc, args ...string) string {
	t.Helper()
	var offer string
	eventually(t, 20*time.Second, "the host can offer", func() bool {
		out, _, code := host.cli("offer", "create", "--price", "1", "--cpus", "1", "--memory", "64m", "--disk", "10m", "--for", "2h")
		offer = lastLine(out)
		return code == 0
	})
	var id string
	eventually(t, 20*time.Second, "the renter sees the offer and rents it", func() bool {
		out, _, code := renter.cli(append([]string{"contract", "create", offer[:8], "--image", "cshare-busybox:latest", "--cpus", "1", "--for", "1h"}, args...)...)
		id = lastLine(out)
		return code == 0
	})
	eventually(t, 30*time.Second, "contract "+id+"'s container runs on its host", func() bool {
		st, _ := containerState(t, id)
		return st == "running"
	})
	return id
}

// TestRentalsEndWithTheirOrg: two hosts each run a contract of one renter;
// the owner deletes the org; within 10 s neither host has a contract
// container, and after both restart (one finding a container labelled for
// another org) there is still none.
func TestRentalsEndWithTheirOrg(t *testing.T) {
	dockerAvailable(t)
	ps := mesh(t, 3)
	hosts, renter := ps[:2], ps[2]
	var ids []string
	for _, h := range hosts {
		var st status
		h.json(&st, "node", "status")
		ids = append(ids, st.ID)
		t.Cleanup(func() { removeContainersOf(st.ID) })
	}
	for _, h := range hosts {
		rent(t, h, renter)
	}
	ps[0].must("org", "delete", "--confirm", "e2e")
	eventually(t, 10*time.Second, "no contract container on either host", func() bool {
		return len(contractContainers(t, ids[0])) == 0 && len(contractContainers(t, ids[1])) == 0
	})
	// A container of another org with the first host's labels, as a node
	// stopped before it could remove it would leave.
	stray := "cshare-stray-org-" + ids[0][len(ids[0])-8:]
	if out, err := exec.Command("docker", "run", "-d", "--name", stray, "--label", "cshare.contract=cffffffffffff", "--label", "cshare.org=bafyotherorg",
		"--label", "cshare.machine="+ids[0], "cshare-busybox:latest", "sleep", "3600").CombinedOutput(); err != nil {
		t.Fatalf("docker run the stray: %v: %s", err, out)
	}
	for _, h := range hosts {
		h.stop()
		h.start()
	}
	eventually(t, 20*time.Second, "the container of another org is gone after its host's restart", func() bool {
		return len(contractContainers(t, ids[0])) == 0
	})
	if n := len(contractContainers(t, ids[1])); n != 0 {
		t.Fatalf("the second host has %d contract containers after its restart", n)
	}
}

// TestRentalsEndWithTheirRenter: a renter who leaves, and one who is
// removed, have their contracts ended on every node; the host's containers
// stop running; a fresh start of the host keeps them from running.
func TestRentalsEndWithTheirRenter(t *testing.T) {
	dockerAvailable(t)
	conf := filepath.Join(t.TempDir(), "node.yaml")
	if err := os.WriteFile(conf, []byte("resources:\n  max_concurrent_jobs: 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ps := mesh(t, 3, "--config", conf)
	host := ps[0]
	var hst status
	host.json(&hst, "node", "status")
	t.Cleanup(func() { removeContainersOf(hst.ID) })
	leaver, removed := ps[1], ps[2]
	a := rent(t, host, leaver)
	b := rent(t, host, removed)
	var rst status
	removed.json(&rst, "node", "status")

	leaver.must("member", "leave")
	host.must("member", "remove", rst.Person)
	for _, id := range []string{a, b} {
		eventually(t, 20*time.Second, "contract "+id+" ended on the host's node", func() bool {
			c := host.contract(id)
			return c.State != "running" && c.State != "accepted" && c.State != "requested"
		})
		eventually(t, 20*time.Second, "contract "+id+"'s container no longer runs", func() bool {
			st, _ := containerState(t, id)
			return st != "running"
		})
	}
	host.stop()
	host.start()
	for _, id := range []string{a, b} {
		if st, _ := containerState(t, id); st == "running" {
			t.Fatalf("contract %s's container runs again after the host's restart", id)
		}
	}
}
