package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/fak-dev/fak/api/apiclient"
)

const healthUsage = `Usage: fak health [--ready] [--addr URL] [--timeout D]

Asks the node at --addr (FAK_ADDR, default http://127.0.0.1:7401) whether it
is alive (GET /v1/health: it knows a leader) or, with --ready, ready
(GET /v1/health/ready: it knows a leader, has applied the leader's index
and its latest stores succeeded).
Prints the node's answer; exit 0 if healthy, 1 if not or unreachable. No
token is needed. Meant for container health checks (the image has no shell).
A fleet with mutual TLS needs --tls-ca, --tls-cert and --tls-key (or
FAK_CACERT, FAK_CLIENT_CERT, FAK_CLIENT_KEY); then host:port means https.

`

func runHealth(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("health", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, healthUsage); fs.PrintDefaults() }
	ready := fs.Bool("ready", false, "check readiness (/v1/health/ready) instead of liveness (/v1/health)")
	addrFlag := fs.String("addr", "", "node API address (FAK_ADDR, default "+apiclient.DefaultAddr+")")
	var tlsFiles apiclient.TLSFiles
	registerClientTLSFlags(fs, &tlsFiles)
	timeout := fs.Duration("timeout", 5*time.Second, "give up after this long")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "fak health: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	addr, tlsCfg, err := resolveClient(*addrFlag, tlsFiles, os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "fak health: %v\n", err)
		return 2
	}
	path := "/v1/health"
	if *ready {
		path = "/v1/health/ready"
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, addr+path, nil)
	if err != nil {
		fmt.Fprintf(stderr, "fak health: %v\n", err)
		return 2
	}
	// HTTP/1.1 (or HTTP/2 over TLS): a health check is one plain GET.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg, ForceAttemptHTTP2: true}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "fak health: %v\n", err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	line := strings.TrimSpace(string(body))
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "fak health: %s: HTTP %d %s\n", addr+path, resp.StatusCode, line)
		return 1
	}
	fmt.Fprintln(stdout, line)
	return 0
}
