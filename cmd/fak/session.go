package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/term"
)

const sessionUsage = `Usage: fak session <command> [flags]

Commands:
  open    Open a session in this terminal: replay, attach, send input

Run 'fak session <command> -h' for the flags of a command.
`

// runSession routes `fak session <command>`.
func runSession(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, sessionUsage)
		return 2
	}
	switch args[0] {
	case "open":
		// Ctrl-C (and SIGTERM) end the run through its context, so the
		// client detaches before it exits.
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return runOpen(ctx, args[1:], sessionIO{
			stdin: os.Stdin, stdout: stdout, stderr: stderr,
			tty:    term.IsTerminal(int(os.Stdin.Fd())),
			getenv: os.Getenv,
		})
	case "help", "-h", "--help":
		fmt.Fprint(stdout, sessionUsage)
		return 0
	}
	fmt.Fprintf(stderr, "fak session: unknown command %q\n\n%s", args[0], sessionUsage)
	return 2
}
