package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/fak-dev/fak/api/apiclient"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
)

const (
	defaultAddr = "http://127.0.0.1:7401"
	// devTokenPath is where "fak dev" writes its token, relative to the
	// directory it runs in.
	devTokenPath = ".fak-dev/token"
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
	clientOpts []connect.ClientOption
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
	baseURL, err := resolveAddr(c.opts.addr, c.getenv)
	if err != nil {
		return err
	}
	workDir, err := os.Getwd()
	if err != nil {
		return err
	}
	token, err := resolveToken(c.opts.token, c.getenv, workDir)
	if err != nil {
		return err
	}
	c.baseURL = baseURL
	c.httpClient = apiclient.NewHTTPClient()
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
// default, and normalizes it.
func resolveAddr(flagAddr string, getenv func(string) string) (string, error) {
	addr := flagAddr
	if addr == "" {
		addr = getenv("FAK_ADDR")
	}
	if addr == "" {
		addr = defaultAddr
	}
	return normalizeAddr(addr)
}

// normalizeAddr turns "host:port" or a URL into a base URL without a
// trailing slash. A bare ":port" means this host.
func normalizeAddr(addr string) (string, error) {
	addr = strings.TrimSpace(addr)
	if addr == "" {
		return "", usageErrorf("empty address")
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil {
		return "", usageErrorf("invalid address %q: %v", addr, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", usageErrorf("invalid address %q: scheme must be http or https", addr)
	}
	if u.Host == "" {
		return "", usageErrorf("invalid address %q: no host", addr)
	}
	if strings.HasPrefix(u.Host, ":") {
		u.Host = "127.0.0.1" + u.Host
	}
	u.Path = strings.TrimRight(u.Path, "/")
	return u.String(), nil
}

// resolveToken picks the API token, first found wins: the --token flag,
// FAK_TOKEN, the file named by FAK_TOKEN_FILE, then devTokenPath under
// workDir. A token file named by FAK_TOKEN_FILE must exist; the dev token
// file is optional, since a fleet may run without authentication.
func resolveToken(flagToken string, getenv func(string) string, workDir string) (string, error) {
	if flagToken != "" {
		return flagToken, nil
	}
	if token := getenv("FAK_TOKEN"); token != "" {
		return token, nil
	}
	if path := getenv("FAK_TOKEN_FILE"); path != "" {
		return readTokenFile(path)
	}
	token, err := readTokenFile(filepath.Join(workDir, devTokenPath))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	return token, err
}

func readTokenFile(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read token file: %w", err)
	}
	token := strings.TrimSpace(string(data))
	if token == "" {
		return "", fmt.Errorf("token file %s is empty", path)
	}
	return token, nil
}
