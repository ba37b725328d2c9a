package main

import (
	"crypto/tls"
	"flag"

	"github.com/fak-dev/fak/api/apiclient"
)

// registerClientTLSFlags adds the client TLS flags that fak's API clients
// (session open, guard, health) share with fakctl.
func registerClientTLSFlags(fs *flag.FlagSet, f *apiclient.TLSFiles) {
	fs.StringVar(&f.CA, "tls-ca", "", "CA certificate `FILE` (PEM) of the fleet (env "+apiclient.EnvCACert+")")
	fs.StringVar(&f.Cert, "tls-cert", "", "client certificate `FILE` (PEM) for a fleet with mutual TLS (env "+apiclient.EnvClientCert+")")
	fs.StringVar(&f.Key, "tls-key", "", "client key `FILE` (PEM) of --tls-cert (env "+apiclient.EnvClientKey+")")
	fs.StringVar(&f.ServerName, "tls-server-name", "", "`NAME` to verify in the node's certificate instead of the address's host (env "+apiclient.EnvTLSServerName+")")
}

// resolveClient resolves the node address and the TLS configuration from
// flags and environment: with TLS files, an address without a scheme is
// https. cfg is nil when no TLS file is named.
func resolveClient(addrFlag string, files apiclient.TLSFiles, getenv func(string) string) (base string, cfg *tls.Config, err error) {
	files = apiclient.ResolveTLS(files, getenv)
	if cfg, err = files.Config(); err != nil {
		return "", nil, err
	}
	base, err = apiclient.ResolveAddrTLS(addrFlag, getenv, files.Enabled())
	return base, cfg, err
}
