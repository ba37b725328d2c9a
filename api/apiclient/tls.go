package apiclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
)

// Environment variables naming a client's TLS files (Consul's names,
// adapted), read when the matching flag is empty.
const (
	EnvCACert        = "FAK_CACERT"
	EnvClientCert    = "FAK_CLIENT_CERT"
	EnvClientKey     = "FAK_CLIENT_KEY"
	EnvTLSServerName = "FAK_TLS_SERVER_NAME"
)

// TLSFiles names a client's TLS material: the CA that signed the fleet's
// certificates and the client's own certificate and key (fleets with
// mutual TLS refuse clients without one). ServerName, when set, is the
// name verified in the node's certificate instead of the address's host,
// e.g. "server.fak" to reach a node by an address its certificate lacks.
type TLSFiles struct {
	CA, Cert, Key string
	ServerName    string
}

// Enabled reports whether any TLS file is named.
func (f TLSFiles) Enabled() bool { return f.CA != "" || f.Cert != "" || f.Key != "" }

// ResolveTLS fills each empty field from its environment variable.
func ResolveTLS(flags TLSFiles, getenv func(string) string) TLSFiles {
	pick := func(v, env string) string {
		if v != "" {
			return v
		}
		return getenv(env)
	}
	return TLSFiles{
		CA:         pick(flags.CA, EnvCACert),
		Cert:       pick(flags.Cert, EnvClientCert),
		Key:        pick(flags.Key, EnvClientKey),
		ServerName: pick(flags.ServerName, EnvTLSServerName),
	}
}

// Config loads the files into a client *tls.Config; nil when none is
// named (then https uses the system's roots). A certificate needs its key
// and the other way round.
func (f TLSFiles) Config() (*tls.Config, error) {
	if !f.Enabled() {
		return nil, nil
	}
	if (f.Cert == "") != (f.Key == "") {
		return nil, errors.New("tls: a client certificate needs its key and a key its certificate (--tls-cert and --tls-key)")
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.ServerName}
	if f.CA != "" {
		pem, err := os.ReadFile(f.CA)
		if err != nil {
			return nil, fmt.Errorf("tls ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls ca %s: no PEM certificate found", f.CA)
		}
		cfg.RootCAs = pool
	}
	if f.Cert != "" {
		cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, fmt.Errorf("tls client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// NewTLSHTTPClient is NewHTTPClientDialer that also speaks TLS with cfg
// for https addresses (HTTP/1.1 or HTTP/2 by ALPN, as for http); http
// addresses keep plaintext. A nil cfg uses Go's defaults (system roots, no
// client certificate).
func NewTLSHTTPClient(cfg *tls.Config, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Client {
	hc := NewHTTPClientDialer(dial)
	hc.Transport.(*splitTransport).setTLS(cfg)
	return hc
}

// Scheme is the URL scheme for a fleet: https when it serves TLS.
func Scheme(tlsOn bool) string {
	if tlsOn {
		return "https"
	}
	return "http"
}
