// Command fak runs fak nodes: `fak agent` (one node of a fleet) and `fak dev`
// (a whole local fleet in one process, for trying fak out). It also carries
// the terminal client (`fak session open`), `fak guard` and its hook
// commands, `fak health`, `fak tls init` and `fak keygen`. Reference:
// docs/fakctl.md. It only parses flags and wires packages together: the
// terminal client is client/term.
package main

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/fak-dev/fak/guard"
	"github.com/fak-dev/fak/node"
)

const usage = `Usage: fak <command> [flags]

Commands:
  agent   Run one fak node (server) of a fleet (flags, or --config FILE)
  dev     Run a local fleet of N nodes on loopback (default 3)
  session Open a session in this terminal (fak session open ID)
  guard   Run a coding agent bound to a fak session (fak guard -- claude)
  guard-sessionstart, guard-sessionend
          The provider hooks fak guard injects (hook JSON on stdin)
  health  Check the node at --addr is alive, or ready with --ready (exit 0/1)
  tls init
          Create a dev CA and node and client certificates for mutual TLS
  keygen  Print a new gossip encryption key (for agent --gossip-key)
  version Print the version

Run 'fak <command> -h' for the flags of a command.
`

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// defaultGCPercent trades heap headroom for CPU: a node's live heap is small
// (journals live in bbolt, not the heap), while the append path allocates a
// lot per request; at Go's default of 100 the collector took a large share
// of a 2-core host under load. GOGC in the environment still wins.
const defaultGCPercent = 400

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
	if version != "dev" {
		node.Version = version // fak_build_info reports what the binary says
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "agent":
		return runAgent(args[1:], stdout, stderr)
	case "dev":
		return runDev(args[1:], stdout, stderr)
	case "session":
		return runSession(args[1:], stdout, stderr)
	case "guard":
		return runGuard(args[1:], stdout, stderr)
	case "guard-sessionstart":
		return runGuardHook(guard.EventSessionStart, args[1:], stderr)
	case "guard-sessionend":
		return runGuardHook(guard.EventSessionEnd, args[1:], stderr)
	case "health":
		return runHealth(args[1:], stdout, stderr)
	case "tls":
		return runTLS(args[1:], stdout, stderr)
	case "keygen":
		return runKeygen(args[1:], stdout, stderr)
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, "fak", version)
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "fak: unknown command %q\n\n%s", args[0], usage)
	return 2
}
