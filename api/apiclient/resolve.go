package apiclient

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

const (
	// DefaultAddr is the node address used when neither a flag nor
	// FAK_ADDR names one: a local dev fleet.
	DefaultAddr = "http://127.0.0.1:7401"
	// DevTokenFile is where `fak dev` writes its token, relative to the
	// directory it runs in.
	DevTokenFile = ".fak-dev/token"
)

// ResolveAddr picks the node address: the flag, then FAK_ADDR, then
// DefaultAddr, normalized by NormalizeAddr.
func ResolveAddr(flag string, getenv func(string) string) (string, error) {
	return ResolveAddrTLS(flag, getenv, false)
}

// ResolveAddrTLS is ResolveAddr for a client that may use TLS: with tlsOn
// (TLS files are configured), an address without a scheme, and the
// default address, mean https. FAK_ADDR may always say https:// itself.
func ResolveAddrTLS(flag string, getenv func(string) string, tlsOn bool) (string, error) {
	addr := flag
	if addr == "" {
		addr = getenv("FAK_ADDR")
	}
	if addr == "" {
		addr = DefaultAddr
		if tlsOn {
			addr = strings.TrimPrefix(addr, "http://")
		}
	}
	if tlsOn && !strings.Contains(addr, "://") {
		addr = "https://" + strings.TrimSpace(addr)
	}
	return NormalizeAddr(addr)
}

// NormalizeAddr turns "host:port" or a URL into a base URL without a
// trailing slash. An address without a scheme is http; a bare ":port"
// means this host. Only http and https are accepted.
func NormalizeAddr(addr string) (string, error) {
	addr = strings.TrimSpace(addr)
	if addr == "" {
		return "", errors.New("empty address")
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil {
		return "", fmt.Errorf("invalid address %q: %v", addr, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("invalid address %q: scheme must be http or https", addr)
	}
	if u.Host == "" {
		return "", fmt.Errorf("invalid address %q: no host", addr)
	}
	if strings.HasPrefix(u.Host, ":") {
		u.Host = "127.0.0.1" + u.Host
	}
	u.Path = strings.TrimRight(u.Path, "/")
	return u.String(), nil
}

// ResolveToken picks the API token, first found wins: the flag, FAK_TOKEN,
// the file named by FAK_TOKEN_FILE, then DevTokenFile under workDir. A token
// file named by FAK_TOKEN_FILE must exist; the dev token file is optional,
// since a fleet may run without authentication.
func ResolveToken(flag string, getenv func(string) string, workDir string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if token := getenv("FAK_TOKEN"); token != "" {
		return token, nil
	}
	if path := getenv("FAK_TOKEN_FILE"); path != "" {
		return readTokenFile(path)
	}
	token, err := readTokenFile(filepath.Join(workDir, DevTokenFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	return token, err
}

// readTokenFile reads the token from a file: its first line that is not
// blank or a # comment. A line "<role> <token>" in the format of a node's
// tokens file (role operator, agent or read) gives the token, so
// FAK_TOKEN_FILE may name such a file: its first token is used.
func readTokenFile(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read token file: %w", err)
	}
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if role, token, ok := strings.Cut(line, " "); ok && (role == "operator" || role == "agent" || role == "read") {
			return strings.TrimSpace(token), nil
		}
		return line, nil
	}
	return "", fmt.Errorf("token file %s holds no token", path)
}
