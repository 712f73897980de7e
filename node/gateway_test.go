package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cshare/cshare/market"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/runtime"
	"github.com/cshare/cshare/runtime/runtimetest"
)

// TestGatewayIntoContract: two nodes with SSH gateways; the renter on the
// second rents a CPU of the first, whose contract runs a real container.
// A key the renter adds after the contract started (the API that `user
// ssh-key add` calls) enters it at once through the host's gateway, found
// as the renter's node says (from the host's heartbeat: address and host
// key), with Debian's OpenSSH; the host person's own key is refused with a
// message; a removed key stops working once the host has the removal.
func TestGatewayIntoContract(t *testing.T) {
	d := runtimetest.Docker(t)
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("skipping: no OpenSSH client (apt-get install -y openssh-client)")
	}
	m := newMesh(t, meshConfig{n: 2, interval: 300 * time.Millisecond, ssh: true})
	m.formOrg()
	host, renter := m.nodes[0], m.nodes[1]
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		runs, _ := d.ListContracts(ctx, "", host.ID().String())
		for _, r := range runs {
			_ = d.RemoveContract(ctx, r.ID)
		}
	})
	ctx := ctxT(t)
	st, err := host.Status(ctx)
	if err != nil || st.SSHAddr == "" || !strings.HasPrefix(st.SSHHostKey, "SHA256:") {
		t.Fatalf("node status: ssh_addr %q ssh_host_key %q, %v", st.SSHAddr, st.SSHHostKey, err)
	}
	one, mem, disk := int64(1), int64(64), int64(10)
	offer, err := host.CreateOffer(ctx, api.OfferCreate{Price: "1", CPUs: &one, MemoryMB: &mem, DiskMB: &disk, ForMS: market.Day})
	if err != nil {
		t.Fatal(err)
	}
	var c api.ContractInfo
	eventually(t, 30*time.Second, "the renter rents the offer", func() string {
		c, err = renter.CreateContract(ctx, api.ContractCreate{Offer: offer.ID, Image: runtime.TestImage, CPUs: 1, ForMS: market.Hour,
			Cmd: []string{"sleep", "3600"}})
		if err != nil {
			return err.Error()
		}
		return ""
	})
	eventually(t, 60*time.Second, "the contract's container runs", func() string {
		runs, err := d.ListContracts(ctx, "", host.ID().String())
		if err != nil {
			return err.Error()
		}
		for _, r := range runs {
			if r.Contract == c.ID && r.Running {
				return ""
			}
		}
		return fmt.Sprintf("runs %+v", runs)
	})

	dir := t.TempDir()
	keygen := func(name string) (string, string) {
		f := filepath.Join(dir, name)
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", f).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v %s", err, out)
		}
		pub, _ := os.ReadFile(f + ".pub")
		return f, string(pub)
	}
	rkey, rpub := keygen("renter")
	hkey, hpub := keygen("host")
	added, err := renter.AddSSHKey(ctx, api.SSHKeyAdd{Key: rpub})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := host.AddSSHKey(ctx, api.SSHKeyAdd{Key: hpub}); err != nil {
		t.Fatal(err)
	}
	if _, err := renter.AddSSHKey(ctx, api.SSHKeyAdd{Key: rpub}); statusCode(err) != 409 {
		t.Fatalf("adding a key twice: %v", err)
	}
	if ks, err := renter.SSHKeys(ctx); err != nil || len(ks) != 1 || ks[0].Fingerprint != added.Fingerprint || ks[0].Comment != "renter" {
		t.Fatalf("ssh-key ls: %+v %v", ks, err)
	}

	var tg api.SSHTarget
	eventually(t, 30*time.Second, "the renter's node finds the host's gateway", func() string {
		tg, err = renter.ContractSSH(ctx, c.ID)
		if err != nil {
			return err.Error()
		}
		return ""
	})
	_, port, _ := strings.Cut(st.SSHAddr, "127.0.0.1:")
	if tg.User != c.ID || tg.Host != "127.0.0.1" || strconv.Itoa(tg.Port) != port || tg.HostKeyFingerprint != st.SSHHostKey ||
		tg.URL != "ssh://"+c.ID+"@127.0.0.1:"+port {
		t.Fatalf("target %+v; host's gateway %s %s", tg, st.SSHAddr, st.SSHHostKey)
	}
	known := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(known, []byte("gw "+tg.HostKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ssh := func(key string, cmd string) (string, string, int) {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		c := exec.CommandContext(cctx, "ssh", "-F", "/dev/null", "-p", strconv.Itoa(tg.Port), "-i", key, "-o", "IdentitiesOnly=yes",
			"-o", "BatchMode=yes", "-o", "HostKeyAlias=gw", "-o", "UserKnownHostsFile="+known, "-o", "StrictHostKeyChecking=yes",
			tg.User+"@"+tg.Host, cmd)
		var out, errb bytes.Buffer
		c.Stdout, c.Stderr = &out, &errb
		err := c.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return out.String(), errb.String(), ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return out.String(), errb.String(), 0
	}
	// The host has the renter's key once the entry reaches it: at once,
	// or after a gossip round.
	eventually(t, 30*time.Second, "the renter's key enters the contract", func() string {
		out, errOut, code := ssh(rkey, "echo $CSHARE_CONTRACT; exit 5")
		if code != 5 || out != c.ID+"\n" {
			return fmt.Sprintf("%d %q %q", code, out, errOut)
		}
		return ""
	})
	if out, errOut, code := ssh(hkey, "echo entered"); code != 255 || out != "" || !strings.Contains(errOut, "no such contract") {
		t.Fatalf("the host person's key: %d %q %q", code, out, errOut)
	}
	if _, err := renter.RemoveSSHKey(ctx, api.SSHKeyRemove{Fingerprint: added.Fingerprint}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the removed key is refused", func() string {
		if _, errOut, code := ssh(rkey, "true"); code != 255 || !strings.Contains(errOut, "not in the org's ledger") {
			return fmt.Sprintf("%d %q", code, errOut)
		}
		return ""
	})
}
