package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/fak-dev/fak/api/apiclient"
	"github.com/fak-dev/fak/guard"
)

const guardUsage = `Usage: fak guard [flags] [--] CMD [ARGS...]

Runs a coding agent (CMD: claude, codex, gemini or any harness) as a child
bound to a launch session in the fak cluster. The child's SessionStart and
SessionEnd hooks report to the guard over a private unix socket, and the
guard commits them: a /clear (or Codex /new) stops the old session with
reason PROVIDER_SESSION_CLEAR and moves the launch to a child session that
keeps the budget envelope; resume and compact keep the session.

For claude, codex and gemini the hooks are injected into the provider's own
configuration (a --settings file, -c overrides trusting exactly the injected
hook, a Gemini system defaults copy), next to the user's and project's hooks.
Any other harness runs 'fak guard-sessionstart --provider NAME' (and
optionally 'fak guard-sessionend') itself with the hook JSON on stdin.

The child gets FAK_GUARD_SOCKET, FAK_GUARD_TOKEN, FAK_SESSION_ID (the launch
session at start), FAK_LAUNCH_ID and FAK_ADDR; stdio is passed through,
signals are forwarded and the child's exit code is returned.

Flags:
`

// runGuard is `fak guard`.
func runGuard(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fak guard", flag.ContinueOnError)
	fs.SetOutput(stderr)
	provider := fs.String("provider", "", "provider `NAME`: claude, codex, gemini, or a harness's own (default: CMD's base name)")
	session := fs.String("session", "", "bind the launch to this session `ID` (default: create one titled \"PROVIDER in CWD\")")
	addr := fs.String("addr", "", "fak node to talk to, as `URL` or host:port (env FAK_ADDR; default "+guard.DefaultAddr+")")
	token := fs.String("token", "", "API `TOKEN` (env FAK_TOKEN; else the file named by FAK_TOKEN_FILE; else ./"+guard.DevTokenFile+")")
	noMeter := fs.Bool("no-meter", false, "leave the provider's model calls alone (default: point claude, codex and gemini at the node's metering gateway, charged to the launch's session)")
	var tlsFiles apiclient.TLSFiles
	registerClientTLSFlags(fs, &tlsFiles)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), guardUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "fak guard: a command to run is required (fak guard [flags] -- CMD [ARGS...])")
		return 2
	}
	baseURL, tlsCfg, err := resolveClient(*addr, tlsFiles, os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "fak guard: %v\n", err)
		return 2
	}
	cwd, err := os.Getwd()
	if err != nil {
		fmt.Fprintf(stderr, "fak guard: %v\n", err)
		return 1
	}
	apiToken, err := guard.ResolveToken(*token, os.Getenv, cwd)
	if err != nil {
		fmt.Fprintf(stderr, "fak guard: %v\n", err)
		return 1
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "fak guard: locate the fak binary for the hooks: %v\n", err)
		return 1
	}
	code, err := guard.Run(context.Background(), guard.Options{
		Provider: *provider, SessionID: *session, Addr: baseURL, Token: apiToken, TLS: tlsCfg,
		Command: fs.Args(), Exe: exe, Cwd: cwd, Environ: os.Environ(), NoMeter: *noMeter,
		Stdin: os.Stdin, Stdout: stdout, Stderr: stderr,
	})
	if err != nil {
		fmt.Fprintf(stderr, "fak guard: %v\n", err)
		return 1
	}
	return code
}

// runGuardHook is `fak guard-sessionstart` and `fak guard-sessionend`: the
// hook a provider runs. It always exits 0 (fail-open).
func runGuardHook(event string, args []string, stderr io.Writer) int {
	return guard.RunHook(event, args, os.Stdin, stderr, os.Getenv)
}
