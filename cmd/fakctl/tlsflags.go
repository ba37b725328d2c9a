package main

import (
	"crypto/tls"
	"slices"

	"github.com/fak-dev/fak/api/apiclient"
)

// tlsFlagNames are the global TLS flags, for a fleet serving mutual TLS.
var tlsFlagNames = []string{"tls-ca", "tls-cert", "tls-key", "tls-server-name"}

// registerTLS binds the global TLS flags to o.tls (the current values are
// the defaults, as in register).
func (o *globalOptions) registerTLS(fs interface {
	StringVar(p *string, name, value, usage string)
}) {
	fs.StringVar(&o.tls.CA, "tls-ca", o.tls.CA, "CA certificate `FILE` (PEM) that signed the nodes' certificates (env "+apiclient.EnvCACert+")")
	fs.StringVar(&o.tls.Cert, "tls-cert", o.tls.Cert, "client certificate `FILE` (PEM) for a fleet with mutual TLS (env "+apiclient.EnvClientCert+")")
	fs.StringVar(&o.tls.Key, "tls-key", o.tls.Key, "client key `FILE` (PEM) of --tls-cert (env "+apiclient.EnvClientKey+")")
	fs.StringVar(&o.tls.ServerName, "tls-server-name", o.tls.ServerName,
		"`NAME` to verify in the node's certificate instead of the address's host, e.g. server.fak (env "+apiclient.EnvTLSServerName+")")
}

func isTLSFlag(name string) bool { return slices.Contains(tlsFlagNames, name) }

// tlsClient resolves the TLS options (flags, then environment) and returns
// the client TLS configuration (nil: none given) and whether addresses
// without a scheme mean https.
func (c *cli) tlsClient() (cfg *tls.Config, on bool, err error) {
	files := apiclient.ResolveTLS(c.opts.tls, c.getenv)
	cfg, err = files.Config()
	if err != nil {
		return nil, false, usageErrorf("%v", err)
	}
	return cfg, files.Enabled(), nil
}
