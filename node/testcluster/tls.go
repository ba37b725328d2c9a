package testcluster

import (
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"

	"github.com/fak-dev/fak/api/apiclient"
	"github.com/fak-dev/fak/cluster/devca"
	"github.com/fak-dev/fak/node"
)

// fleetTLS is a test fleet's CA and the directory of its files.
type fleetTLS struct {
	ca     *devca.CA
	dir    string
	caFile string
	client *tls.Config
}

// newHTTPClient makes the fleet's CA when Options.TLS (so the clients can
// present its client certificate) and returns the fleet's HTTP client.
func (c *Cluster) newHTTPClient(dir string) *http.Client {
	if !c.opts.TLS {
		return apiclient.NewHTTPClient()
	}
	c.t.Helper()
	ft := &fleetTLS{dir: filepath.Join(dir, "tls")}
	if err := os.MkdirAll(ft.dir, 0o700); err != nil {
		c.t.Fatalf("tls dir: %v", err)
	}
	ca, pair, err := devca.New("fak test CA")
	if err != nil {
		c.t.Fatalf("test CA: %v", err)
	}
	ft.ca = ca
	ft.caFile = filepath.Join(ft.dir, "ca.pem")
	if err := os.WriteFile(ft.caFile, pair.CertPEM, 0o644); err != nil {
		c.t.Fatalf("test CA: %v", err)
	}
	c.tls = ft
	files := c.IssueClient("client")
	cfg, err := files.Config()
	if err != nil {
		c.t.Fatalf("client tls: %v", err)
	}
	ft.client = cfg
	return apiclient.NewTLSHTTPClient(cfg, nil)
}

// secure applies the fleet's gossip keys and, with Options.TLS, the node's
// certificate (issued on its first start) to cfg.
func (c *Cluster) secure(n *Node, cfg *node.Config) {
	cfg.GossipKeys = c.opts.GossipKeys
	if c.tls == nil {
		return
	}
	cert := filepath.Join(c.tls.dir, n.Name+".pem")
	key := filepath.Join(c.tls.dir, n.Name+"-key.pem")
	if _, err := os.Stat(cert); err != nil {
		pair, err := c.tls.ca.Node(n.Name, nil, nil)
		if err != nil {
			c.t.Fatalf("issue %s certificate: %v", n.Name, err)
		}
		if err := pair.Write(cert, key, false); err != nil {
			c.t.Fatalf("write %s certificate: %v", n.Name, err)
		}
	}
	cfg.TLSCert, cfg.TLSKey, cfg.TLSCA = cert, key, c.tls.caFile
}

// CA is the fleet's certificate authority (nil without Options.TLS).
func (c *Cluster) CA() *devca.CA {
	if c.tls == nil {
		return nil
	}
	return c.tls.ca
}

// IssueClient writes a client certificate of the fleet's CA named name and
// returns the files a client configures (needs Options.TLS).
func (c *Cluster) IssueClient(name string) apiclient.TLSFiles {
	c.t.Helper()
	if c.tls == nil {
		c.t.Fatal("IssueClient needs Options.TLS")
	}
	pair, err := c.tls.ca.Client(name)
	if err != nil {
		c.t.Fatalf("issue client certificate: %v", err)
	}
	files := apiclient.TLSFiles{
		CA:   c.tls.caFile,
		Cert: filepath.Join(c.tls.dir, name+".pem"),
		Key:  filepath.Join(c.tls.dir, name+"-key.pem"),
	}
	if err := pair.Write(files.Cert, files.Key, true); err != nil {
		c.t.Fatalf("write client certificate: %v", err)
	}
	return files
}

// ClientTLS is the client configuration of the fleet's own clients (nil
// without Options.TLS).
func (c *Cluster) ClientTLS() *tls.Config {
	if c.tls == nil {
		return nil
	}
	return c.tls.client.Clone()
}

// BaseURL is a node's API URL: https with Options.TLS, else http.
func (c *Cluster) BaseURL(n *Node) string {
	return apiclient.Scheme(c.tls != nil) + "://" + n.APIAddr
}
