package node

import (
	"crypto/tls"
	"errors"

	"github.com/fak-dev/fak/cluster"
)

// validateSecurity checks the gossip keys and that TLS is all or nothing.
func (c *Config) validateSecurity() error {
	for _, k := range c.GossipKeys {
		if _, err := cluster.DecodeGossipKey(k); err != nil {
			return err
		}
	}
	set := 0
	for _, f := range []string{c.TLSCert, c.TLSKey, c.TLSCA} {
		if f != "" {
			set++
		}
	}
	if set != 0 && set != 3 {
		return errors.New("--tls-cert, --tls-key and --tls-ca go together: give all three for mutual TLS, or none")
	}
	return nil
}

// security is the node's loaded transport security.
type security struct {
	gossipKeys [][]byte
	tls        *cluster.NodeTLS // nil: plaintext
}

func (c *Config) loadSecurity() (security, error) {
	var s security
	for _, k := range c.GossipKeys {
		key, err := cluster.DecodeGossipKey(k)
		if err != nil {
			return s, err
		}
		s.gossipKeys = append(s.gossipKeys, key)
	}
	if c.TLSCert != "" {
		t, err := cluster.LoadNodeTLS(c.TLSCert, c.TLSKey, c.TLSCA)
		if err != nil {
			return s, err
		}
		s.tls = t
	}
	return s, nil
}

func (s security) apiServerTLS() *tls.Config {
	if s.tls == nil {
		return nil
	}
	return s.tls.APIServerConfig()
}

func (s security) peerClientTLS() *tls.Config {
	if s.tls == nil {
		return nil
	}
	return s.tls.PeerClientConfig()
}

// TLSEnabled reports whether the node serves its API over TLS (https).
func (n *Node) TLSEnabled() bool { return n.cfg.TLSCert != "" }
