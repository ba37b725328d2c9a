// Command fakctl is the operator CLI for a fak fleet: it inspects the
// cluster and the fleet, reads and writes sessions (the reset ledger, usage,
// moves), drains nodes, saves and restores snapshots, changes the Raft
// configuration, checks replay equivalence, manages ACL tokens and
// benchmarks appends. It speaks only the public API.
//
// Usage follows the HashiCorp convention of "fakctl <noun> <verb> [options]";
// run "fakctl help" for the list of commands, or read docs/fakctl.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the command ran and failed
	exitUsage = 2 // the command line was wrong
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one fakctl invocation and returns its exit code. SIGINT and
// SIGTERM cancel the context, which is how "session log --follow" ends.
func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runContext(ctx, args, stdout, stderr)
}

// runContext is run with the context supplied by the caller, so tests can
// interrupt long-running commands without sending signals.
func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCLI(stdout, stderr)
	defer c.close()

	// Global options may come before the noun and again before the verb.
	rest, err := c.parseGlobals(args)
	if errors.Is(err, errHelp) {
		printUsage(stdout)
		return exitOK
	}
	if err != nil {
		return c.usageFailure(err, printUsage)
	}
	if len(rest) == 0 {
		printUsage(stderr)
		return exitUsage
	}
	if rest[0] == "help" {
		return c.help(rest[1:])
	}

	noun := rest[0]
	if !isNoun(noun) {
		return c.usageFailure(usageErrorf("unknown command %q", noun), printUsage)
	}
	if cmd := nounCommand(noun, rest[1:]); cmd != nil {
		return c.runCommand(ctx, cmd, rest[1:])
	}
	printNoun := func(w io.Writer) { printNounUsage(w, noun) }
	rest, err = c.parseGlobals(rest[1:])
	if errors.Is(err, errHelp) {
		printNoun(stdout)
		return exitOK
	}
	if err != nil {
		return c.usageFailure(err, printNoun)
	}
	if len(rest) == 0 {
		return c.usageFailure(usageErrorf("%s: missing subcommand", noun), printNoun)
	}
	if rest[0] == "help" {
		printNoun(stdout)
		return exitOK
	}
	cmd, words := matchCommand(noun, rest)
	if cmd == nil {
		return c.usageFailure(usageErrorf("unknown command \"%s %s\"", noun, rest[0]), printNoun)
	}
	return c.runCommand(ctx, cmd, rest[words:])
}

// runCommand parses the command's flags and arguments, connects and runs it.
func (c *cli) runCommand(ctx context.Context, cmd *command, args []string) int {
	fs := newFlagSet(cmd.path(), &c.opts)
	runFn := cmd.setup(fs)
	printHelp := func(w io.Writer) { printCommandHelp(w, cmd) }

	positional, err := parseInterspersed(fs, args)
	if errors.Is(err, errHelp) {
		printHelp(c.stdout)
		return exitOK
	}
	if err == nil {
		err = checkArgs(cmd, positional)
	}
	if err == nil && cmd.output != nil {
		if oerr := cmd.output(c.opts.output); oerr != nil {
			err = usageErrorf("%v", oerr)
		}
	} else if err == nil {
		err = c.opts.validate()
	}
	if err != nil {
		return c.usageFailure(err, printHelp)
	}

	err = c.connect()
	if err == nil {
		err = runFn(ctx, c, positional)
	}
	var usageErr *usageError
	switch {
	case errors.As(err, &usageErr):
		return c.usageFailure(err, printHelp)
	case err != nil:
		fmt.Fprintln(c.stderr, formatError(err)+c.transportHint(err))
		return exitError
	}
	return exitOK
}

// help implements "fakctl help [noun [verb]]".
func (c *cli) help(topic []string) int {
	switch len(topic) {
	case 0:
		printUsage(c.stdout)
		return exitOK
	case 1:
		if isNoun(topic[0]) {
			printNounUsage(c.stdout, topic[0])
			return exitOK
		}
	default:
		if cmd, n := matchCommand(topic[0], topic[1:]); cmd != nil && n == len(topic)-1 {
			printCommandHelp(c.stdout, cmd)
			return exitOK
		}
	}
	return c.usageFailure(usageErrorf("no help for unknown command %q", joinArgs(topic)), printUsage)
}

// usageFailure reports a usage error with the relevant usage text and
// returns the usage exit code.
func (c *cli) usageFailure(err error, printUsage func(io.Writer)) int {
	fmt.Fprintln(c.stderr, formatError(err))
	fmt.Fprintln(c.stderr)
	printUsage(c.stderr)
	return exitUsage
}
