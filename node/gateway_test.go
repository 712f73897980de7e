package node

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
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
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("skipping: no OpenSSH client (apt-get install -y openssh-client)")
	}
	host, renter, c := rentContainer(t, api.ContractCreate{Cmd: []string{"sleep", "3600"}})
	ctx := ctxT(t)
	st, err := host.Status(ctx)
	if err != nil || st.SSHAddr == "" || !strings.HasPrefix(st.SSHHostKey, "SHA256:") {
		t.Fatalf("node status: ssh_addr %q ssh_host_key %q, %v", st.SSHAddr, st.SSHHostKey, err)
	}
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

// rentContainer starts two nodes with SSH gateways, the real runtime
// drivers (Docker) and their own persons; the second rents a CPU of the
// first (req says how it runs: its command, its mode), and once the
// contract's container runs it returns the host's node, the renter's, and
// the contract.
func rentContainer(t *testing.T, req api.ContractCreate) (host, renter *meshNode, c api.ContractInfo) {
	t.Helper()
	d := runtimetest.Docker(t)
	m := newMesh(t, meshConfig{n: 2, interval: 300 * time.Millisecond, ssh: true})
	m.formOrg()
	host, renter = m.nodes[0], m.nodes[1]
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		runs, _ := d.ListContracts(ctx, "", host.ID().String())
		for _, r := range runs {
			_ = d.RemoveContract(ctx, r.ID)
		}
	})
	ctx := ctxT(t)
	one, mem, disk := int64(1), int64(64), int64(200)
	offer, err := host.market.CreateOffer(ctx, api.OfferCreate{Price: "1", CPUs: &one, MemoryMB: &mem, DiskMB: &disk, ForMS: market.Day})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the renter rents the offer", func() string {
		req.Offer, req.Image, req.CPUs, req.ForMS = offer.ID, runtime.TestImage, 1, market.Hour
		c, err = renter.market.CreateContract(ctx, req)
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
	return host, renter, c
}

// TestContractCopy: in a contract of mode ssh (no command: the instance
// stays up by itself), `contract cp` through the renter's node API (HTTP,
// the client the CLI calls), carried over ArchiveProtocol to the host
// that runs the container and through Docker's archive API, round-trips a
// directory of 100 files and a 100 MiB file byte for byte; the host's own
// person, who is not the renter, may not copy.
func TestContractCopy(t *testing.T) {
	host, renter, c := rentContainer(t, api.ContractCreate{Mode: "ssh", OnStart: "mkdir -p /root/onstart"})
	ctx := ctxT(t)
	if c.Mode != "ssh" {
		t.Fatalf("contract mode %q", c.Mode)
	}
	cl := api.NewClient(renter.APIAddr(), renter.Token())
	src := filepath.Join(t.TempDir(), "src")
	for i := 0; i < 100; i++ {
		p := filepath.Join(src, fmt.Sprintf("d%d", i%7), fmt.Sprintf("f%03d", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, i*97)
		_, _ = rand.Read(b)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cl.CopyIn(ctx, api.ArchiveTarget{Ref: c.ID, Path: "/root"}, src); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if _, err := cl.CopyOut(ctx, api.ArchiveTarget{Ref: c.ID, Path: "/root/src"}, filepath.Join(out, "back")); err != nil {
		t.Fatal(err)
	}
	if want, got := treeOf(t, src), treeOf(t, filepath.Join(out, "back")); want != got {
		t.Fatalf("the directory came back different:\nwant %s\ngot  %s", want, got)
	}

	big := filepath.Join(t.TempDir(), "big.bin")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	if _, err := io.CopyN(io.MultiWriter(f, h), rand.Reader, 100<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	sum := hex.EncodeToString(h.Sum(nil))
	res, err := cl.CopyIn(ctx, api.ArchiveTarget{Ref: c.ID, Path: "/tmp/big.copy"}, big)
	if err != nil || res.Bytes < 100<<20 {
		t.Fatalf("copy in: %+v %v", res, err)
	}
	back := filepath.Join(out, "big.back")
	if _, err := cl.CopyOut(ctx, api.ArchiveTarget{Ref: c.ID, Path: "/tmp/big.copy"}, back); err != nil {
		t.Fatal(err)
	}
	g, err := os.Open(back)
	if err != nil {
		t.Fatal(err)
	}
	h2 := sha256.New()
	n, _ := io.Copy(h2, g)
	g.Close()
	if got := hex.EncodeToString(h2.Sum(nil)); got != sum || n != 100<<20 {
		t.Fatalf("100 MiB came back as %d bytes, sha256 %s; want %s", n, got, sum)
	}

	// Not the renter: the host's own person does not see the contract to copy.
	hcl := api.NewClient(host.APIAddr(), host.Token())
	if _, err := hcl.CopyOut(ctx, api.ArchiveTarget{Ref: c.ID, Path: "/root"}, t.TempDir()); statusCode(err) != 404 {
		t.Fatalf("the host person's copy: %v", err)
	}
	if _, err := cl.CopyOut(ctx, api.ArchiveTarget{Ref: c.ID, Path: "/no/such"}, t.TempDir()); statusCode(err) != 404 {
		t.Fatalf("a path that is not there: %v", err)
	}
}

// treeOf is every file under dir with its bytes' hash, sorted.
func treeOf(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		sum := sha256.Sum256(b)
		lines = append(lines, fmt.Sprintf("%s %d %x", rel, len(b), sum[:6]))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "; ")
}
