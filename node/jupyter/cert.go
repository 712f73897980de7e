package jupyter

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/cshare/cshare/internal/atomicfile"
)

// CertFile and KeyFile are the proxy's self-signed certificate and its key
// in the data dir (PEM; the key mode 0600).
const (
	CertFile = "jupyter_cert.pem"
	KeyFile  = "jupyter_key.pem"
)

// loadOrCreateCert reads the proxy's certificate from dir, or makes a
// self-signed one (ECDSA P-256, ten years, for localhost, this host's
// name and its interfaces' addresses) and writes it there. Files that do
// not hold a certificate and its key are an error: they are not replaced,
// so renters' pinned fingerprints stay true.
func loadOrCreateCert(dir string, now time.Time) (tls.Certificate, error) {
	certPath, keyPath := filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile)
	c, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err == nil {
		return c, nil
	}
	if _, serr := os.Stat(certPath); !errors.Is(serr, fs.ErrNotExist) {
		return tls.Certificate{}, fmt.Errorf("%s: %w (remove it and %s to make a new certificate)", certPath, err, KeyFile)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		return tls.Certificate{}, err
	}
	host, _ := os.Hostname()
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: "cshare jupyter proxy " + host},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(10, 0, 0),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost"}}
	if host != "" && host != "localhost" {
		tmpl.DNSNames = append(tmpl.DNSNames, host)
	}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				tmpl.IPAddresses = append(tmpl.IPAddresses, n.IP)
			}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return tls.Certificate{}, err
	}
	if err := atomicfile.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		return tls.Certificate{}, err
	}
	if err := atomicfile.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return tls.Certificate{}, err
	}
	return tls.LoadX509KeyPair(certPath, keyPath)
}

// Fingerprint is a certificate's fingerprint as curl's --pinnedpubkey
// takes it: "sha256//" and the base64 SHA-256 of its public key
// (SubjectPublicKeyInfo, DER).
func Fingerprint(der []byte) (string, error) {
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c.RawSubjectPublicKeyInfo)
	return "sha256//" + base64.StdEncoding.EncodeToString(sum[:]), nil
}

// PinnedTLS is a client's TLS config that trusts the proxy's
// self-signed certificate by its fingerprint alone (as node status and
// the heartbeat give it), not by a certificate authority.
func PinnedTLS(fingerprint string) *tls.Config {
	return &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 {
				return errors.New("jupyter: no certificate")
			}
			fp, err := Fingerprint(raw[0])
			if err != nil {
				return err
			}
			if fp != fingerprint {
				return fmt.Errorf("jupyter: certificate %s, want %s", fp, fingerprint)
			}
			return nil
		}}
}
