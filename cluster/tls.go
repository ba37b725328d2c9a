package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync/atomic"
	"time"
)

// TLSServerName is the DNS name every node certificate carries (next to
// its own names and addresses) and the name nodes verify when they dial
// each other, like Consul's server.<dc>.<domain> with
// verify_server_hostname: a node's Raft and API addresses come from
// gossip and may change, so peers check the role the CA granted ("this is
// a fak server") rather than an address. A client certificate signed by
// the same CA lacks the name, so it can call the API but never pass as a
// node on the Raft port.
const TLSServerName = "server.fak"

// NodeTLS is a node's mutual-TLS identity: its certificate and the pool of
// the CA that signs every node and client certificate of the fleet. Reload
// replaces both from the same files without a restart (SIGHUP): the
// configurations below read the current material at every handshake, so
// new connections use it while established ones keep theirs.
type NodeTLS struct {
	certFile, keyFile, caFile string
	cur                       atomic.Pointer[tlsMaterial]
}

// tlsMaterial is one loaded generation of a node's certificate and CAs.
type tlsMaterial struct {
	cert tls.Certificate
	cas  *x509.CertPool
}

// LoadNodeTLS reads a node's certificate, key and CA bundle (PEM) and
// checks, before anything listens, that the certificate chains to the CA
// and carries TLSServerName, so a misissued certificate fails at start
// rather than as handshake errors on every peer.
func LoadNodeTLS(certFile, keyFile, caFile string) (*NodeTLS, error) {
	t := &NodeTLS{certFile: certFile, keyFile: keyFile, caFile: caFile}
	if err := t.Reload(); err != nil {
		return nil, err
	}
	return t, nil
}

// Reload reads the certificate, key and CA bundle again and, when they pass
// the same checks as at start, makes them the ones every new handshake
// uses. On an error the material in use stays.
func (t *NodeTLS) Reload() error {
	m, err := loadTLSMaterial(t.certFile, t.keyFile, t.caFile)
	if err != nil {
		return err
	}
	t.cur.Store(m)
	return nil
}

// Leaf is the node certificate in use.
func (t *NodeTLS) Leaf() *x509.Certificate { return t.cur.Load().cert.Leaf }

func loadTLSMaterial(certFile, keyFile, caFile string) (*tlsMaterial, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("tls certificate: %w", err)
	}
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("tls ca: %w", err)
	}
	cas := x509.NewCertPool()
	if !cas.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("tls ca %s: no PEM certificate found", caFile)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("tls certificate: %w", err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{
		DNSName: TLSServerName, Roots: cas, Intermediates: intermediates(cert),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}); err != nil {
		return nil, fmt.Errorf("tls certificate %s is not a node certificate of this CA (it must chain to %s and name %s for server and client auth): %w",
			certFile, caFile, TLSServerName, err)
	}
	cert.Leaf = leaf
	return &tlsMaterial{cert: cert, cas: cas}, nil
}

func intermediates(cert tls.Certificate) *x509.CertPool {
	pool := x509.NewCertPool()
	for _, der := range cert.Certificate[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			pool.AddCert(c)
		}
	}
	return pool
}

// APIServerConfig is for the node's API: any client certificate signed by
// the CA is accepted (fakctl, other nodes, health checks); tokens then
// decide what the caller may do.
func (t *NodeTLS) APIServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return t.cur.Load().apiServer(), nil
		},
	}
}

func (m *tlsMaterial) apiServer() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// The config a handshake uses is this one, not the one net/http
		// added its protocols to: offer HTTP/2 here.
		NextProtos:   []string{"h2", "http/1.1"},
		Certificates: []tls.Certificate{m.cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    m.cas,
	}
}

// PeerServerConfig is for the Raft port: only nodes may connect, so the
// client certificate must also name TLSServerName.
func (t *NodeTLS) PeerServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cfg := t.cur.Load().apiServer()
			cfg.VerifyConnection = func(cs tls.ConnectionState) error {
				if len(cs.PeerCertificates) == 0 {
					return errors.New("no client certificate")
				}
				if err := cs.PeerCertificates[0].VerifyHostname(TLSServerName); err != nil {
					return fmt.Errorf("client certificate is not a node certificate: %w", err)
				}
				return nil
			}
			return cfg, nil
		},
	}
}

// PeerClientConfig is for dialing other nodes (Raft, API forwarding, the
// runner's writes to its own API): present this node's certificate and
// verify the peer is a node of the same CA. The certificate and the CAs
// are the ones in use at each handshake, so the verification is done here
// against them (Go's own would use a pool fixed when the config was made):
// the same checks — chain to the CA, TLSServerName, server auth.
func (t *NodeTLS) PeerClientConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		ServerName: TLSServerName,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			m := t.cur.Load()
			return &m.cert, nil
		},
		// Verified by VerifyConnection below, against the current CAs.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the peer sent no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
				DNSName: TLSServerName, Roots: t.cur.Load().cas, Intermediates: inter,
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			})
			return err
		},
	}
}

// Gossip encryption keys are AES keys in base64, like Consul's encrypt.
var gossipKeySizes = []int{16, 24, 32}

// DecodeGossipKey decodes one base64 gossip key and checks its size.
func DecodeGossipKey(s string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("gossip key: not base64: %w", err)
	}
	if !slices.Contains(gossipKeySizes, len(key)) {
		return nil, fmt.Errorf("gossip key: %d bytes; want 16, 24 or 32 (AES-128, -192 or -256)", len(key))
	}
	return key, nil
}

// verifyRaftPeer is the leader's check before it adds a server to the Raft
// configuration: with TLS, a handshake with the server's Raft address must
// show a node certificate of this CA. Gossip admits whoever holds the
// gossip key; without this check a member with the key but a foreign
// certificate would become an unreachable voter and cost the fleet its
// fault tolerance.
func (c *Cluster) verifyRaftPeer(addr string) error {
	if c.cfg.TLS == nil {
		return nil
	}
	conn, err := newSourceDialer(c.cfg.RaftAddr).dialer(addr, peerProbeTimeout).Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	tc := tls.Client(conn, c.cfg.TLS.PeerClientConfig())
	ctx, cancel := context.WithTimeout(context.Background(), peerProbeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		return fmt.Errorf("raft tls handshake with %s: %w", addr, err)
	}
	return tc.Close()
}

const peerProbeTimeout = 5 * time.Second
