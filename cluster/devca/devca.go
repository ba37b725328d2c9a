// Package devca is a small certificate authority for fak fleets: the CA
// and certificates `fak tls init` writes and the test harness uses. ECDSA
// P-256 keys; node certificates serve and dial (server and client auth)
// and name cluster.TLSServerName; client certificates only dial.
package devca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"slices"
	"time"

	"github.com/fak-dev/fak/cluster"
)

// Validity of what New and Issue make.
const (
	CAValidity   = 5 * 365 * 24 * time.Hour
	CertValidity = 365 * 24 * time.Hour
)

// CA is a certificate authority with its key in memory.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// Pair is a PEM certificate and its PEM private key.
type Pair struct {
	CertPEM, KeyPEM []byte
}

// New makes a self-signed CA named name.
func New(name string) (*CA, Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, Pair{}, err
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, Pair{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name, Organization: []string{"fak"}},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, Pair{}, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, Pair{}, err
	}
	pair, err := encode(der, key)
	if err != nil {
		return nil, Pair{}, err
	}
	return &CA{Cert: cert, key: key}, pair, nil
}

// Node issues a node certificate for name: SANs localhost, 127.0.0.1,
// cluster.TLSServerName, name itself, plus ips and dns.
func (ca *CA) Node(name string, ips []net.IP, dns []string) (Pair, error) {
	names := []string{"localhost", cluster.TLSServerName}
	if name != "" && net.ParseIP(name) == nil {
		names = append(names, name)
	}
	addrs := append([]net.IP{net.IPv4(127, 0, 0, 1)}, ips...)
	return ca.issue(name, dedupe(append(names, dns...)), addrs,
		[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth})
}

// Client issues a client certificate (client auth only) for name.
func (ca *CA) Client(name string) (Pair, error) {
	return ca.issue(name, nil, nil, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth})
}

func (ca *CA) issue(cn string, dns []string, ips []net.IP, usage []x509.ExtKeyUsage) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, err
	}
	serial, err := serialNumber()
	if err != nil {
		return Pair{}, err
	}
	now := time.Now()
	notAfter := now.Add(CertValidity)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"fak"}},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usage,
		DNSNames:     dns,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return Pair{}, fmt.Errorf("issue certificate for %s: %w", cn, err)
	}
	return encode(der, key)
}

func encode(der []byte, key *ecdsa.PrivateKey) (Pair, error) {
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Pair{}, err
	}
	return Pair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

func serialNumber() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
}

func dedupe(s []string) []string {
	var out []string
	for _, v := range s {
		if v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// Write stores the certificate (0644) and the key (0600). Existing files
// are replaced only with overwrite; otherwise they are an error.
func (p Pair) Write(certPath, keyPath string, overwrite bool) error {
	if err := writeFile(certPath, p.CertPEM, 0o644, overwrite); err != nil {
		return err
	}
	return writeFile(keyPath, p.KeyPEM, 0o600, overwrite)
}

func writeFile(path string, data []byte, perm os.FileMode, overwrite bool) error {
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if overwrite {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, perm)
	if err != nil {
		return err
	}
	// A replaced file keeps its old mode; keys must not stay readable.
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
