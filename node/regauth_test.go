package node

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cshare/cshare/internal/regauth"
	"github.com/cshare/cshare/market"
	"github.com/cshare/cshare/node/api"
)

// lockedBuffer is a bytes.Buffer several loggers write to at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestPrivateImageCredentials (issue 31 item 6): a renter's registry
// credentials, sealed to the host's age recipient from its offer, reach
// the host's driver in clear for that contract; a job's, sealed to every
// approved machine's recipient from their heartbeats, reach the driver of
// the machines that run its items. Another person who copies the sealed
// blob into a contract of their own is refused by the host. And the
// secret is nowhere else: not in any node's ledger entries, contract or
// job JSON, data dir, or log.
func TestPrivateImageCredentials(t *testing.T) {
	const secret = "pr1vate-T0ken-of-alice"
	const image = "127.0.0.1:5000/team/app:1"
	var logs lockedBuffer
	m := newMesh(t, meshConfig{n: 3, interval: 200 * time.Millisecond, slots: 2, runFor: time.Hour, logs: &logs})
	m.formOrg()
	host, renter, mallory := m.nodes[0], m.nodes[1], m.nodes[2]
	creds := regauth.Creds{Server: "127.0.0.1:5000", Username: "alice", Password: secret}

	offer, err := host.market.CreateOffer(ctxT(t), api.OfferCreate{Price: "1", ForMS: market.Day})
	if err != nil {
		t.Fatal(err)
	}
	if offer.AgeRecipient != host.age || regauth.CheckRecipient("age_recipient", host.age) != nil {
		t.Fatalf("offer's recipient %q, the host's %q", offer.AgeRecipient, host.age)
	}
	blob, err := regauth.Seal("test", renter.orgs.Person(), creds, []string{offer.AgeRecipient})
	if err != nil {
		t.Fatal(err)
	}
	var c api.ContractInfo
	eventually(t, 20*time.Second, "the renter hears of the offer and rents a CPU", func() string {
		c, err = renter.market.CreateContract(ctxT(t), api.ContractCreate{Offer: offer.ID, Image: image, CPUs: 1, RegistryAuth: blob})
		if err != nil {
			return err.Error()
		}
		return ""
	})
	if _, err := renter.market.CreateContract(ctxT(t), api.ContractCreate{Offer: offer.ID, Image: image, CPUs: 1, RegistryAuth: []byte("user:" + secret)}); statusCode(err) != 400 ||
		!strings.HasPrefix(err.Error(), "registry_auth: not an age-encrypted blob") || strings.Contains(err.Error(), secret) {
		t.Fatalf("a blob in clear: %v", err)
	}
	eventually(t, 20*time.Second, "the host's driver gets the credentials in clear", func() string {
		s, running, ok := host.drv.ContractSpecOf(c.ID)
		if !ok || !running || s.Auth == nil {
			return fmt.Sprintf("instance %v running %v, state %s", ok, running, contractState(t, renter.Node, c.ID).State)
		}
		if s.Auth.Username != "alice" || s.Auth.Password != secret || s.Auth.Server != "127.0.0.1:5000" {
			return fmt.Sprintf("auth %v", *s.Auth)
		}
		return ""
	})
	stolen, err := mallory.market.CreateContract(ctxT(t), api.ContractCreate{Offer: offer.ID, Image: image, CPUs: 1, RegistryAuth: blob})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the host refuses another person's copy of the blob", func() string {
		s := contractState(t, mallory.Node, stolen.ID)
		if s.State != market.StateRejected || !strings.Contains(s.Reason, "sealed for another person") {
			return s.State + ": " + s.Reason
		}
		return ""
	})

	// A job: sealed to every approved machine's recipient, as the CLI does.
	var rs []string
	eventually(t, 20*time.Second, "every machine's recipient is known from its heartbeat", func() string {
		ms, err := renter.orgs.Machines(ctxT(t))
		if err != nil {
			return err.Error()
		}
		rs = rs[:0]
		for _, mi := range ms {
			if mi.AgeRecipient != "" {
				rs = append(rs, mi.AgeRecipient)
			}
		}
		if len(rs) != 3 {
			return fmt.Sprintf("%d of 3 recipients", len(rs))
		}
		return ""
	})
	jblob, err := regauth.Seal("test", renter.orgs.Person(), creds, rs)
	if err != nil {
		t.Fatal(err)
	}
	j, err := renter.jobs.SubmitJob(ctxT(t), api.JobSubmit{Image: image, Cmd: []string{"true"}, CPUs: 3, RegistryAuth: jblob})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the job's run gets the credentials in clear", func() string {
		for _, mn := range m.nodes {
			for _, id := range mn.drv.Running() {
				if s, ok := mn.drv.Spec(id); ok && s.Job == j.ID && s.Auth != nil && s.Auth.Password == secret && s.Auth.Username == "alice" {
					return ""
				}
			}
		}
		return "no run of the job with the credentials yet"
	})

	// Nowhere else in clear.
	for _, mn := range m.nodes {
		views := map[string]any{}
		if mn != mallory { // a contract shows to its renter and host
			views["contract"] = contractState(t, mn.Node, c.ID)
		}
		if mn == renter {
			if views["job"], err = mn.jobs.Job(ctxT(t), j.ID); err != nil {
				t.Fatal(err)
			}
		}
		for what, v := range views {
			b, _ := json.Marshal(v)
			if !bytes.Contains(b, []byte(`"registry_auth":true`)) || bytes.Contains(b, []byte(secret)) || bytes.Contains(b, []byte("YWdlLWVuY3J5cHRpb24")) {
				t.Errorf("%s: %s JSON %s", mn.name, what, b)
			}
		}
		lg, unlock := mn.rep.ReadLog()
		sealed := 0
		for _, e := range lg.Entries() {
			if bytes.Contains(e.Bytes(), []byte(secret)) {
				t.Errorf("%s: ledger entry %s holds the secret", mn.name, e.Kind)
			}
			if bytes.Contains(e.Bytes(), []byte("age-encryption.org/v1")) {
				sealed++
			}
		}
		unlock()
		if sealed < 3 { // the two contracts and the job
			t.Errorf("%s: %d entries carry a sealed blob, want 3", mn.name, sealed)
		}
		_ = filepath.WalkDir(mn.opts.DataDir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(secret)) {
				t.Errorf("%s: %s holds the secret", mn.name, p)
			}
			return nil
		})
	}
	if l := logs.String(); l == "" || strings.Contains(l, secret) {
		t.Errorf("the logs (%d bytes) hold the secret, or nothing was logged", len(l))
	}
}
