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
		// SIGTERM ends the run through its context, so the client detaches
		// before it exits. So does Ctrl-C, but for an interactive client,
		// which gets it instead: while a turn runs, it interrupts the turn.
		tty := term.IsTerminal(int(os.Stdin.Fd()))
		sigs := []os.Signal{syscall.SIGTERM}
		var interrupts chan struct{}
		if tty {
			interrupts = make(chan struct{}, 1)
			ch := make(chan os.Signal, 1)
			signal.Notify(ch, os.Interrupt)
			defer signal.Stop(ch)
			go func() {
				for range ch {
					select {
					case interrupts <- struct{}{}:
					default: // one is pending already
					}
				}
			}()
		} else {
			sigs = append(sigs, os.Interrupt)
		}
		ctx, stop := signal.NotifyContext(context.Background(), sigs...)
		defer stop()
		return runOpen(ctx, args[1:], sessionIO{
			stdin: os.Stdin, stdout: stdout, stderr: stderr,
			tty: tty, interrupts: interrupts,
			getenv: os.Getenv,
		})
	case "help", "-h", "--help":
		fmt.Fprint(stdout, sessionUsage)
		return 0
	}
	fmt.Fprintf(stderr, "fak session: unknown command %q\n\n%s", args[0], sessionUsage)
	return 2
}
