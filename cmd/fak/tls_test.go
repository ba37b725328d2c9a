package main

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fak-dev/fak/api/apiclient"
	"github.com/fak-dev/fak/cluster"
)

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("%s: no PEM", path)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// fak tls init writes a CA, node certificates that verify against it for
// every name and address they must carry, and a client certificate;
// keys are 0600; a second run refuses unless --force.
func TestTLSInit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	var out, errb bytes.Buffer
	args := []string{"tls", "init", "--dir", dir, "--nodes", "a,b", "--ip", "10.1.2.3,10.1.2.4", "--dns", "fak.example.com"}
	if code := run(args, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	roots := x509.NewCertPool()
	ca := readCert(t, filepath.Join(dir, "ca.pem"))
	if !ca.IsCA {
		t.Fatal("ca.pem is not a CA")
	}
	roots.AddCert(ca)
	for _, f := range []string{"ca-key.pem", "a-key.pem", "b-key.pem", "client-key.pem"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", f, st.Mode().Perm())
		}
		if !strings.Contains(out.String(), filepath.Join(dir, f)) {
			t.Errorf("output does not list %s:\n%s", f, out.String())
		}
	}
	for _, node := range []string{"a", "b"} {
		cert := readCert(t, filepath.Join(dir, node+".pem"))
		for _, name := range []string{cluster.TLSServerName, "localhost", "127.0.0.1", "10.1.2.3", "10.1.2.4", "fak.example.com", node} {
			for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
				if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: name, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
					t.Errorf("%s.pem for %s (usage %v): %v", node, name, usage, err)
				}
			}
		}
		if _, err := cluster.LoadNodeTLS(filepath.Join(dir, node+".pem"), filepath.Join(dir, node+"-key.pem"), filepath.Join(dir, "ca.pem")); err != nil {
			t.Errorf("node %s files do not load as a node identity: %v", node, err)
		}
	}
	client := readCert(t, filepath.Join(dir, "client.pem"))
	if _, err := client.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client.pem: %v", err)
	}
	if err := client.VerifyHostname(cluster.TLSServerName); err == nil {
		t.Error("client.pem names " + cluster.TLSServerName + ": a client could pass as a node")
	}
	if _, err := client.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Error("client.pem is valid for server auth")
	}
	files := apiclient.TLSFiles{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, "client.pem"), Key: filepath.Join(dir, "client-key.pem")}
	if _, err := files.Config(); err != nil {
		t.Errorf("client files: %v", err)
	}

	// Again: refused, nothing replaced.
	before, _ := os.ReadFile(filepath.Join(dir, "ca.pem"))
	out.Reset()
	errb.Reset()
	if code := run(args, &out, &errb); code != 1 || !strings.Contains(errb.String(), "--force") {
		t.Fatalf("second run: exit %d, stderr %q; want 1 and a hint at --force", code, errb.String())
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "ca.pem")); !bytes.Equal(before, after) {
		t.Fatal("second run replaced ca.pem")
	}
	if code := run(append(args, "--force"), &out, &errb); code != 0 {
		t.Fatalf("--force: exit %d: %s", code, errb.String())
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "ca.pem")); bytes.Equal(before, after) {
		t.Fatal("--force kept the old CA")
	}
}

func TestKeygen(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"keygen"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	key, err := cluster.DecodeGossipKey(strings.TrimSpace(out.String()))
	if err != nil || len(key) != 32 {
		t.Fatalf("key %q: %v (%d bytes)", out.String(), err, len(key))
	}
	var again bytes.Buffer
	run([]string{"keygen"}, &again, &errb)
	if again.String() == out.String() {
		t.Fatal("two keygen runs printed the same key")
	}
}
