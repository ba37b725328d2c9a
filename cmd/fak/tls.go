package main

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/fak-dev/fak/cluster"
	"github.com/fak-dev/fak/cluster/devca"
)

const tlsUsage = `Usage: fak tls init [--dir DIR] [--nodes n1,n2,n3] [--ip IP,...] [--dns NAME,...] [--force]

Creates a development CA and certificates for a fleet with mutual TLS:
  ca.pem, ca-key.pem          the CA (valid 5 years; keep ca-key.pem offline)
  NODE.pem, NODE-key.pem      per node: server and client auth, valid 1 year,
                              names localhost, 127.0.0.1, ` + cluster.TLSServerName + `, NODE
                              and every --ip and --dns
  client.pem, client-key.pem  a client certificate for fakctl and fak health
Keys are ECDSA P-256, written 0600. Existing files are left alone (exit 1)
unless --force. Run a node with
  fak agent --tls-ca ca.pem --tls-cert n1.pem --tls-key n1-key.pem ...
and a client with FAK_CACERT, FAK_CLIENT_CERT, FAK_CLIENT_KEY (or --tls-*).

`

// runTLS is `fak tls <verb>`.
func runTLS(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "init" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprint(stdout, tlsUsage)
			return 0
		}
		fmt.Fprint(stderr, tlsUsage)
		return 2
	}
	fs := flag.NewFlagSet("fak tls init", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, tlsUsage); fs.PrintDefaults() }
	dir := fs.String("dir", ".", "directory to write the files to (created if missing)")
	nodes := fs.String("nodes", "n1,n2,n3", "comma-separated node `NAMES` to issue certificates for")
	var ips, dns stringList
	fs.Var(&ips, "ip", "extra IP addresses every node certificate names (comma-separated, repeatable)")
	fs.Var(&dns, "dns", "extra DNS names every node certificate names (comma-separated, repeatable)")
	force := fs.Bool("force", false, "overwrite existing files")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "fak tls init: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	var addrs []net.IP
	for _, s := range splitList(ips) {
		ip := net.ParseIP(s)
		if ip == nil {
			fmt.Fprintf(stderr, "fak tls init: --ip %q is not an IP address\n", s)
			return 2
		}
		addrs = append(addrs, ip)
	}
	written, err := tlsInit(*dir, splitList([]string{*nodes}), addrs, splitList(dns), *force)
	if err != nil {
		fmt.Fprintln(stderr, "fak tls init:", err)
		return 1
	}
	for _, f := range written {
		fmt.Fprintln(stdout, f)
	}
	return 0
}

// splitList splits comma-separated flag values into their non-empty items.
func splitList(values []string) []string {
	var out []string
	for _, v := range values {
		for item := range strings.SplitSeq(v, ",") {
			if item = strings.TrimSpace(item); item != "" {
				out = append(out, item)
			}
		}
	}
	return out
}

// tlsInit writes the CA, the node certificates and the client certificate
// under dir and returns the paths written. Unless force, it writes nothing
// when any of the files exists.
func tlsInit(dir string, nodes []string, ips []net.IP, dns []string, force bool) ([]string, error) {
	for _, n := range nodes {
		if n == "ca" || n == "client" || strings.ContainsAny(n, `/\`) {
			return nil, fmt.Errorf("node name %q: not usable as a file name next to ca.pem and client.pem", n)
		}
	}
	files := []string{"ca.pem", "ca-key.pem", "client.pem", "client-key.pem"}
	for _, n := range nodes {
		files = append(files, n+".pem", n+"-key.pem")
	}
	if !force {
		for _, f := range files {
			if _, err := os.Stat(filepath.Join(dir, f)); !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("%s exists; not overwriting (use --force to replace every file)", filepath.Join(dir, f))
			}
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ca, caPair, err := devca.New("fak CA")
	if err != nil {
		return nil, err
	}
	var written []string
	write := func(name string, p devca.Pair) error {
		cert, key := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
		if err := p.Write(cert, key, force); err != nil {
			return err
		}
		written = append(written, cert, key)
		return nil
	}
	if err := write("ca", caPair); err != nil {
		return written, err
	}
	for _, n := range nodes {
		p, err := ca.Node(n, ips, dns)
		if err != nil {
			return written, err
		}
		if err := write(n, p); err != nil {
			return written, err
		}
	}
	p, err := ca.Client("client")
	if err != nil {
		return written, err
	}
	return written, write("client", p)
}

// runKeygen is `fak keygen`: a fresh 32-byte gossip key in base64, for
// `fak agent --gossip-key`.
func runKeygen(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		if args[0] == "-h" || args[0] == "--help" {
			fmt.Fprintln(stdout, "Usage: fak keygen\n\nPrints a new random 32-byte gossip encryption key (base64) for fak agent --gossip-key.")
			return 0
		}
		fmt.Fprintf(stderr, "fak keygen: unexpected argument %q\n", args[0])
		return 2
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		fmt.Fprintln(stderr, "fak keygen:", err)
		return 1
	}
	fmt.Fprintln(stdout, base64.StdEncoding.EncodeToString(key))
	return 0
}
