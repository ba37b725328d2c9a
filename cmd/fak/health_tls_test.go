package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// fak health talks to a node with mutual TLS given the client files, as
// a compose health check does; without a client certificate it fails.
func TestHealthTLS(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if code := run([]string{"tls", "init", "--dir", dir, "--nodes", "n1"}, &out, &errb); code != 0 {
		t.Fatalf("tls init: %s", errb.String())
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "n1.pem"), filepath.Join(dir, "n1-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(readCert(t, filepath.Join(dir, "ca.pem")))
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"status":"ready"}`))
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	srv.StartTLS()
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "https://")
	tlsArgs := []string{"--tls-ca", filepath.Join(dir, "ca.pem"), "--tls-cert", filepath.Join(dir, "client.pem"), "--tls-key", filepath.Join(dir, "client-key.pem")}
	for _, tt := range []struct {
		args []string
		code int
	}{
		{append([]string{"--ready", "--addr", srv.URL}, tlsArgs...), 0},
		{append([]string{"--ready", "--addr", addr}, tlsArgs...), 0}, // host:port means https with TLS files
		{[]string{"--ready", "--addr", srv.URL, "--tls-ca", filepath.Join(dir, "ca.pem")}, 1},
		{[]string{"--ready", "--addr", srv.URL, "--tls-cert", filepath.Join(dir, "client.pem")}, 2},
	} {
		out.Reset()
		errb.Reset()
		if code := run(append([]string{"health"}, tt.args...), &out, &errb); code != tt.code {
			t.Errorf("fak health %v: exit %d (stderr %q), want %d", tt.args, code, errb.String(), tt.code)
		}
	}
}
