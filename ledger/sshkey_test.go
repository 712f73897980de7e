package ledger

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/crypto/ssh"

	"github.com/cshare/cshare/internal/text"
)

func authorizedLine(t *testing.T, pub any, comment string) string {
	t.Helper()
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	line := strings.TrimSuffix(string(ssh.MarshalAuthorizedKey(k)), "\n")
	if comment != "" {
		line += " " + comment
	}
	return line
}

// TestCheckSSHKey: the key types and forms a person may add, and the one
// line each refusal says.
func TestCheckSSHKey(t *testing.T) {
	ed := scenarioSSHKey("alice")
	rsa1024, _ := rsa.GenerateKey(rand.Reader, 1024)
	rsa2048, _ := rsa.GenerateKey(rand.Reader, 2048)
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	signer, _ := ssh.NewSignerFromKey(rsa2048)
	edPub, _, _, _, _ := ssh.ParseAuthorizedKey([]byte(ed))
	cert := &ssh.Certificate{Key: edPub, CertType: ssh.UserCert, ValidPrincipals: []string{"a"}, ValidBefore: ssh.CertTimeInfinity}
	if err := cert.SignCert(rand.Reader, signer); err != nil {
		t.Fatal(err)
	}
	certLine := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(cert)))
	for _, tc := range []struct {
		name, in, want string // want: "" for accepted, else a part of the error
		canon          string
	}{
		{"ed25519", ed, "", ed},
		{"trailing newline", ed + "\n", "", ed},
		{"no comment", strings.TrimSuffix(ed, " alice"), "", strings.TrimSuffix(ed, " alice")},
		{"comment spaces", ed + "  at  home  ", "", ed + "  at  home"},
		{"rsa 2048", authorizedLine(t, &rsa2048.PublicKey, "r"), "", ""},
		{"ecdsa", authorizedLine(t, &ec.PublicKey, ""), "", ""},
		{"rsa 1024", authorizedLine(t, &rsa1024.PublicKey, ""), "an RSA key of 1024 bits", ""},
		{"certificate", certLine, "a certificate", ""},
		{"options", `command="x" ` + ed, "options", ""},
		{"escape in comment", ed + "\x1b[31m", "holds U+001B", ""},
		{"two keys", ed + "\n" + ed, "more than one line", ""},
		{"empty", "  \n", "empty", ""},
		{"private", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n", "private key", ""},
		{"garbage", "ssh-ed25519 !!!", "not an SSH public key", ""},
		{"huge", "ssh-ed25519 " + strings.Repeat("A", MaxSSHKeySize), "bytes; allowed", ""},
		{"bad utf-8", ed + " \xff", "not UTF-8", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := CheckSSHKey("key", tc.in)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if tc.canon != "" && k.Line != tc.canon {
					t.Fatalf("canonical line %q, want %q", k.Line, tc.canon)
				}
				again, err := CheckSSHKey("key", k.Line)
				if err != nil || again.Line != k.Line || again.Fingerprint != k.Fingerprint {
					t.Fatalf("canonical line is not canonical: %v %q", err, again.Line)
				}
				if err := CheckSSHFingerprint("fp", k.Fingerprint); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "key: ") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q is not one line naming the field", err)
			}
		})
	}
}

// FuzzCheckSSHKey: CheckSSHKey never panics; an accepted key's line is
// canonical (checking it again gives itself), one printable line, and its
// fingerprint has the shape CheckSSHFingerprint wants; a refusal is one
// line naming the field and never echoes the whole input.
func FuzzCheckSSHKey(f *testing.F) {
	f.Add(scenarioSSHKey("alice"))
	f.Add("ssh-ed25519 AAAA")
	f.Add("no-pty " + scenarioSSHKey("bob"))
	f.Add("ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAAgQC7 x")
	f.Fuzz(func(t *testing.T, in string) {
		k, err := CheckSSHKey("key", in)
		if err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, "key: ") || strings.ContainsAny(msg, "\n\r") {
				t.Fatalf("refusal %q is not one line naming the field", msg)
			}
			if len(in) > 2*text.MaxEcho+16 && strings.Contains(msg, in) {
				t.Fatalf("refusal echoes the whole input")
			}
			return
		}
		if !utf8.ValidString(k.Line) || strings.ContainsAny(k.Line, "\n\r") {
			t.Fatalf("accepted line %q is not one line of UTF-8", k.Line)
		}
		again, err := CheckSSHKey("key", k.Line)
		if err != nil || again.Line != k.Line || again.Fingerprint != k.Fingerprint {
			t.Fatalf("%q: not canonical: %v %q", in, err, again.Line)
		}
		if err := CheckSSHFingerprint("fingerprint", k.Fingerprint); err != nil {
			t.Fatal(err)
		}
	})
}

// TestContractSpecModes: launch modes and entrypoints a contract request
// may carry.
func TestContractSpecModes(t *testing.T) {
	for _, tc := range []struct {
		s    ContractSpec
		want string // "" accepted, else part of the error
	}{
		{ContractSpec{Image: "x"}, ""},
		{ContractSpec{Image: "x", Mode: ModeEntrypoint, Entrypoint: "/app", Cmd: []string{"a"}}, ""},
		{ContractSpec{Image: "x", Mode: ModeSSH, OnStart: "setup"}, ""},
		{ContractSpec{Image: "x", Mode: ModeSSH, Cmd: []string{"a"}}, "mode: ssh runs no command"},
		{ContractSpec{Image: "x", Mode: ModeSSH, Entrypoint: "/app"}, "mode: ssh runs no command"},
		{ContractSpec{Image: "x", Mode: "vnc"}, `mode: "vnc"; allowed: entrypoint, ssh, jupyter`},
		{ContractSpec{Image: "x", Mode: ModeJupyter}, ""},
		{ContractSpec{Image: "x", Mode: ModeJupyter, Direct: true, OnStart: "pip install x", Entrypoint: "httpd", Cmd: []string{"-f"}}, ""},
		{ContractSpec{Image: "x", Mode: ModeSSH, Direct: true}, "direct: only in mode jupyter"},
		{ContractSpec{Image: "x", Direct: true}, "direct: only in mode jupyter"},
		{ContractSpec{Image: "x", Entrypoint: " "}, "entrypoint"},
		{ContractSpec{Image: "x", SSHKey: scenarioSSHKey("k")}, ""},
		{ContractSpec{Image: "x", SSHKey: "ssh-ed25519 AAAA"}, "ssh_key"},
	} {
		err := ValidateContractSpec(tc.s)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v; want %q", tc.s, err, tc.want)
		}
	}
	if err := ValidateJobSpec(JobSpec{Driver: "docker", Image: "x", Entrypoint: "/app", RangeStart: 1, RangeEnd: 1, Priority: 1, CPUs: 1}); err != nil {
		t.Errorf("a job with an entrypoint and no arguments: %v", err)
	}
	if err := ValidateJobSpec(JobSpec{Driver: "docker", Image: "x", RangeStart: 1, RangeEnd: 1, Priority: 1, CPUs: 1}); err == nil {
		t.Error("a job with no command and no entrypoint was accepted")
	}
}
