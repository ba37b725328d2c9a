package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/fak-dev/fak/api/apiclient"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
)

const (
	defaultAddr = apiclient.DefaultAddr
	// devTokenPath is where "fak dev" writes its token, relative to the
	// directory it runs in.
	devTokenPath = apiclient.DevTokenFile
	// unaryTimeout bounds each unary call; streams have no deadline.
	unaryTimeout = 10 * time.Second
)

// cli is one invocation: where output goes, the global options and, once
// connected, the HTTP client every RPC client shares.
type cli struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	opts           globalOptions

	// Set by connect.
	baseURL    string
	httpClient *http.Client
	// noClientCert: https without a client certificate, which a fleet with
	// mutual TLS refuses (see transportHint).
	noClientCert bool
	clientOpts   []connect.ClientOption
}

func newCLI(stdout, stderr io.Writer) *cli {
	return &cli{
		stdout: stdout,
		stderr: stderr,
		getenv: os.Getenv,
		opts:   globalOptions{output: outputTable},
	}
}

// connect resolves the address and token from flags, environment and token
// files, and builds the HTTP client. It does no I/O on the network.
func (c *cli) connect() error {
	tlsCfg, tlsOn, err := c.tlsClient()
	if err != nil {
		return err
	}
	baseURL, err := resolveAddrTLS(c.opts.addr, c.getenv, tlsOn)
	if err != nil {
		return err
	}
	workDir, err := os.Getwd()
	if err != nil {
		return err
	}
	token, err := apiclient.ResolveToken(c.opts.token, c.getenv, workDir)
	if err != nil {
		return err
	}
	c.baseURL = baseURL
	c.noClientCert = strings.HasPrefix(baseURL, "https://") &&
		(tlsCfg == nil || len(tlsCfg.Certificates) == 0 && tlsCfg.GetClientCertificate == nil)
	c.httpClient = apiclient.NewTLSHTTPClient(tlsCfg, nil)
	// Uncompressed answers: gzip of a page of events costs the node and
	// fakctl more CPU than the wire saves on the links fakctl runs over
	// (loopback, a LAN, an SSH tunnel's), and holds session log to half
	// its speed.
	c.clientOpts = append(c.clientOpts, connect.WithAcceptCompression("gzip", nil, nil))
	if token != "" {
		c.clientOpts = append(c.clientOpts, connect.WithInterceptors(apiclient.Bearer(token)))
	}
	return nil
}

// close releases idle connections, so servers (and tests) need not wait
// for them to time out.
func (c *cli) close() {
	if c.httpClient != nil {
		c.httpClient.CloseIdleConnections()
	}
}

func (c *cli) sessionClient() fakv1connect.SessionServiceClient {
	return c.sessionClientAt(c.baseURL)
}

func (c *cli) sessionClientAt(baseURL string) fakv1connect.SessionServiceClient {
	return fakv1connect.NewSessionServiceClient(c.httpClient, baseURL, c.clientOpts...)
}

func (c *cli) lifecycleClient() fakv1connect.LifecycleServiceClient {
	return fakv1connect.NewLifecycleServiceClient(c.httpClient, c.baseURL, c.clientOpts...)
}

func (c *cli) clusterClient() fakv1connect.ClusterServiceClient {
	return fakv1connect.NewClusterServiceClient(c.httpClient, c.baseURL, c.clientOpts...)
}

// unaryContext returns the context for one unary call.
func unaryContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, unaryTimeout)
}

// resolveAddr picks the node address from the flag, then FAK_ADDR, then the
// default, and normalizes it. A bad address is a usage error.
func resolveAddr(flagAddr string, getenv func(string) string) (string, error) {
	return resolveAddrTLS(flagAddr, getenv, false)
}

// resolveAddrTLS is resolveAddr where, with TLS options given, an address
// without a scheme means https.
func resolveAddrTLS(flagAddr string, getenv func(string) string, tlsOn bool) (string, error) {
	baseURL, err := apiclient.ResolveAddrTLS(flagAddr, getenv, tlsOn)
	if err != nil {
		return "", usageErrorf("%v", err)
	}
	return baseURL, nil
}

// normalizeAddr is apiclient.NormalizeAddr with its errors as usage errors.
func normalizeAddr(addr string) (string, error) {
	baseURL, err := apiclient.NormalizeAddr(addr)
	if err != nil {
		return "", usageErrorf("%v", err)
	}
	return baseURL, nil
}
