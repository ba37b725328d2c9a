package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/fak-dev/fak/api"
	"github.com/fak-dev/fak/cluster"
	"github.com/fak-dev/fak/node"
	"github.com/fak-dev/fak/node/runner/echo"
)

// Loopback ports of the dev fleet: node i (0-based) uses base+i.
const (
	devAPIPortBase    = 7401
	devRaftPortBase   = 7501
	devGossipPortBase = 7601
)

func runDev(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fak dev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	nodes := fs.Int("nodes", 3, "number of nodes")
	dir := fs.String("dir", ".fak-dev", "directory for the nodes' data and the token")
	logLevel := fs.String("log-level", "warn", "log level: trace, debug, info, warn, error")
	logJSON := fs.Bool("log-json", false, "log JSON lines")
	recoverAfter := fs.Duration("recover-after", node.DefaultRecoverAfter, "recover a node's sessions on the others after it has been dead in gossip this long")
	echoTurn := fs.Duration("echo-turn", echo.DefaultTurnDuration, "length of one turn of the built-in echo runtime adapter (negative: no pauses)")
	blocks, err := parseAgentConfig(fs, args) // runtime and account blocks too; echo stays the default
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *nodes < 1 || *nodes > 9 {
		fmt.Fprintln(stderr, "fak dev: --nodes must be between 1 and 9")
		return 2
	}
	logger, err := newLogger("fak", *logLevel, *logJSON, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "fak dev:", err)
		return 2
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		fmt.Fprintln(stderr, "fak dev:", err)
		return 1
	}
	tokenPath := filepath.Join(*dir, "token")
	token, err := devToken(tokenPath)
	if err != nil {
		fmt.Fprintln(stderr, "fak dev:", err)
		return 1
	}

	var join []string
	for i := 0; i < *nodes; i++ {
		join = append(join, fmt.Sprintf("127.0.0.1:%d", devGossipPortBase+i))
	}
	var started []*node.Node
	for i := 0; i < *nodes; i++ {
		name := fmt.Sprintf("n%d", i+1)
		n, err := node.Start(node.Config{
			Name:                name,
			DataDir:             filepath.Join(*dir, name),
			APIAddr:             fmt.Sprintf("127.0.0.1:%d", devAPIPortBase+i),
			RaftAddr:            fmt.Sprintf("127.0.0.1:%d", devRaftPortBase+i),
			GossipAddr:          join[i],
			BootstrapExpect:     *nodes,
			Join:                join,
			Voter:               true,
			Tokens:              []api.Token{api.OperatorToken(token)},
			MaxEventBytes:       api.DefaultMaxEventBytes,
			EchoTurn:            *echoTurn,
			TokenFile:           tokenPath,
			Runtimes:            blocks.Runtimes,
			Accounts:            blocks.Accounts,
			RecoverAfter:        *recoverAfter,
			SnapshotLogFraction: cluster.DefaultSnapshotLogFraction,
			SnapshotRate:        cluster.DefaultSnapshotRate,
			Logger:              logger,
		})
		if err != nil {
			fmt.Fprintf(stderr, "fak dev: start %s: %v\n", name, err)
			for _, s := range started {
				s.Shutdown()
			}
			return 1
		}
		started = append(started, n)
	}

	fmt.Fprintf(stdout, "fak dev: a %d-node fleet on loopback (data in %s)\n\n", *nodes, *dir)
	for _, n := range started {
		fmt.Fprintf(stdout, "  %-3s api http://%s  raft %s  gossip %s\n", n.Name(), n.APIAddr(), n.RaftAddr(), n.GossipAddr())
	}
	fmt.Fprintf(stdout, "\nToken (also in %s, where fakctl finds it):\n  %s\n\n", tokenPath, token)
	// The token rides in the URL fragment, which the browser never sends;
	// the page moves it to the tab's sessionStorage.
	fmt.Fprintf(stdout, "Browser (any node serves the pages):\n  http://%s/ui/#token=%s\n  http://%s/ui/fleet.html#token=%s  (the fleet overview)\n\n",
		started[0].APIAddr(), url.QueryEscape(token), started[0].APIAddr(), url.QueryEscape(token))
	fmt.Fprintf(stdout, "Try:\n  fakctl fleet --watch\n  fakctl session create --title demo\n  fakctl session log <ID> --follow --addr http://127.0.0.1:%d\n\n", devAPIPortBase+min(1, *nodes-1))
	fmt.Fprintln(stdout, "Press Ctrl-C to stop every node.")
	return waitForSignals(started, false, stderr)
}

// devToken reuses the dev fleet's token or creates one.
func devToken(path string) (string, error) {
	if b, err := os.ReadFile(path); err == nil {
		if t := strings.TrimSpace(string(b)); t != "" {
			return t, nil
		}
	}
	var raw [24]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	token := "fak_" + hex.EncodeToString(raw[:])
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write token: %w", err)
	}
	return token, nil
}
