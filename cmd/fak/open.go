package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"

	"github.com/fak-dev/fak/api/apiclient"
	"github.com/fak-dev/fak/client/term"
)

// `fak session open` is the terminal client (client/term); this file is
// its command line: flags, environment, exit codes.

const openUsage = `Usage: fak session open ID [flags]

Open a session in this terminal, as one more client of the same session:
describe it, replay its recent events (each printed at its address, #SEQ),
attach, take the input lease and send each line you type as input. Output,
tool calls, approvals, lease changes and other clients' input appear as they
happen. Ctrl-C while a turn runs interrupts it (a second Ctrl-C within 2 s
detaches); Ctrl-D, or Ctrl-C with no turn running, detaches (releasing the
lease); the session keeps running.

Typed commands:
  /take       take the input lease when nobody holds it
  /steal      take the input lease from its holder
  /release    release the input lease (keep watching)
  /interrupt  interrupt the running turn (as Ctrl-C does); the fleet closes
              it as interrupted by this client
  /fresh      rotate the provider binding (new epoch); the conversation stays
  /reset      reset the agent's context at a reset_boundary; history stays
              readable, queued inputs and a pending approval are dropped
              (refused while a turn runs)
  /clear      stop this session and continue in a new child session that
              shares its budget (/new: the same, recorded as "new")
  /fork [SEQ] branch this session's history up to SEQ (default: the head)
              into a new session; this one keeps running
  /move NODE  move the session's execution to NODE (/move alone: the least
              loaded node the fleet admits); the session, its journal and
              this attachment stay, and input keeps working across the
              cutover (it goes to the new epoch)
  /help       this list
  y or n      answer the pending approval
  //text      send "/text" as input

After /clear, /new and /fork the client follows the new session: it
detaches, describes the child, attaches to it and takes its input lease.
It follows the same way when another client (or the provider, under fak
guard) clears or renews the session it shows.

When stdin is not a terminal, each line is sent as input and its turn is
awaited before the next is sent; at EOF the client waits for the last turn,
detaches and exits 0. Approvals of those turns are answered by --approve.
Empty stdin prints the replay without attaching. Errors exit non-zero.

Flags:
`

const (
	// defaultAPIAddr is the node of a local dev fleet.
	defaultAPIAddr = apiclient.DefaultAddr
	// devTokenFile is where `fak dev` writes its token, relative to the
	// directory it runs in.
	devTokenFile = apiclient.DevTokenFile
	// exitInterrupted is the exit code of a scripted run cut short.
	exitInterrupted = 130
)

// sessionIO is what the command reads and writes, injectable for tests.
type sessionIO struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	// tty: stdin is a terminal, so the client is interactive.
	tty bool
	// interrupts delivers Ctrl-C to an interactive client (term.Config's
	// Interrupts); nil: Ctrl-C ends the run through its context.
	interrupts <-chan struct{}
	getenv     func(string) string
	workDir    string
	// httpClient is nil for a new h2c client.
	httpClient *http.Client
}

// openOptions are the parsed flags of `fak session open`.
type openOptions struct {
	sessionID string
	addr      string
	token     string
	steal     bool
	// from is the first address to replay; 0 means the last
	// term.DefaultReplay events.
	from uint64
	name string
	// approve is ask, yes or no; "" means ask on a terminal, no otherwise.
	approve string
	tls     apiclient.TLSFiles
}

// usageError is a mistake in the command line (exit code 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// parseOpenArgs parses the flags, which may come before or after the ID.
func parseOpenArgs(args []string, stderr io.Writer) (openOptions, error) {
	var o openOptions
	fs := flag.NewFlagSet("fak session open", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), openUsage)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.addr, "addr", "", "`URL` of any fak node (default $FAK_ADDR, else "+defaultAPIAddr+")")
	fs.StringVar(&o.token, "token", "", "API `token` (default $FAK_TOKEN, $FAK_TOKEN_FILE, else "+devTokenFile+")")
	registerClientTLSFlags(fs, &o.tls)
	fs.BoolVar(&o.steal, "steal", false, "take the input lease even when another client holds it")
	fs.Func("from", "replay from this `SEQ` (default: the last "+strconv.Itoa(term.DefaultReplay)+" events)", func(v string) error {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n == 0 {
			return errors.New("must be a sequence number, at least 1")
		}
		o.from = n
		return nil
	})
	fs.StringVar(&o.name, "name", "", "client `NAME` others see (default user@host)")
	fs.Func("approve", "answer approvals of this client's turns: `ask|yes|no` (default ask on a terminal, no otherwise; ask on a pipe reads y or n from the next line)", func(v string) error {
		switch v {
		case "ask", "yes", "no":
			o.approve = v
			return nil
		}
		return errors.New("must be ask, yes or no")
	})
	var positional []string
	rest := args
	for {
		if err := fs.Parse(rest); err != nil {
			return o, err
		}
		left := fs.Args()
		if len(left) == 0 {
			break
		}
		if consumed := len(rest) - len(left); consumed > 0 && rest[consumed-1] == "--" {
			positional = append(positional, left...)
			break
		}
		positional = append(positional, left[0])
		rest = left[1:]
	}
	switch len(positional) {
	case 0:
		return o, usageError{"a session ID is required"}
	case 1:
		o.sessionID = positional[0]
	default:
		return o, usageError{fmt.Sprintf("one session ID expected, got %d arguments", len(positional))}
	}
	if o.sessionID == "" {
		return o, usageError{"a session ID is required"}
	}
	return o, nil
}

// runOpen is `fak session open`: it returns the exit code.
func runOpen(ctx context.Context, args []string, sio sessionIO) int {
	opts, err := parseOpenArgs(args, sio.stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(sio.stderr, "fak session open: %s\nRun 'fak session open -h' for usage.\n", ue.msg)
		}
		return 2 // the flag package has printed its own complaint
	}
	err = openSession(ctx, opts, sio)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, term.ErrInterrupted):
		fmt.Fprintln(sio.stderr, "fak session open: interrupted")
		return exitInterrupted
	case errors.As(err, new(usageError)):
		fmt.Fprintf(sio.stderr, "fak session open: %s\n", term.ErrorLine(err))
		return 2
	}
	fmt.Fprintf(sio.stderr, "fak session open: %s\n", term.ErrorLine(err))
	return 1
}

// openSession resolves the node, its TLS, the token and this client's name
// from the flags and the environment, and runs the client.
func openSession(ctx context.Context, opts openOptions, sio sessionIO) error {
	getenv := sio.getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	base, tlsCfg, err := resolveClient(opts.addr, opts.tls, getenv)
	if err != nil {
		return usageError{err.Error()}
	}
	workDir := sio.workDir
	if workDir == "" {
		if workDir, err = os.Getwd(); err != nil {
			return err
		}
	}
	token, err := apiclient.ResolveToken(opts.token, getenv, workDir)
	if err != nil {
		return err
	}
	httpClient := sio.httpClient
	if httpClient == nil {
		httpClient = apiclient.NewTLSHTTPClient(tlsCfg, nil)
		defer httpClient.CloseIdleConnections()
	}
	name := opts.name
	if name == "" {
		name = apiclient.ClientName(getenv)
	}
	return term.Open(ctx, term.Config{
		SessionID: opts.sessionID, BaseURL: base, HTTPClient: httpClient, Token: token, Name: name,
		Steal: opts.steal, From: opts.from, Approve: opts.approve,
		Stdin: sio.stdin, Stdout: sio.stdout, Stderr: sio.stderr, TTY: sio.tty, Interrupts: sio.interrupts,
	})
}
