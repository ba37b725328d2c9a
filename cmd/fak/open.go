package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/fak-dev/fak/api/apiclient"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
)

const openUsage = `Usage: fak session open ID [flags]

Open a session in this terminal, as one more client of the same session:
describe it, replay its recent events (each printed at its address, #SEQ),
attach, take the input lease and send each line you type as input. Output,
tool calls, approvals, lease changes and other clients' input appear as they
happen. Ctrl-D or Ctrl-C detaches (releasing the lease); the session keeps
running.

Typed commands:
  /take       take the input lease when nobody holds it
  /steal      take the input lease from its holder
  /release    release the input lease (keep watching)
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
	// clientKind is how this client attaches.
	clientKind = "terminal"
	// defaultReplay is how many events are replayed without --from.
	defaultReplay = 50
	// replayPage is the largest page ReadEvents allows.
	replayPage = 1000
	// exitInterrupted is the exit code of a scripted run cut short.
	exitInterrupted = 130
)

// clientCapabilities are the controls this client can render and use.
var clientCapabilities = []string{"input.text", "lease.take", "lease.release", "lease.steal", "approval.answer", "detach",
	"session.fresh", "session.reset", "session.clear", "session.new", "session.fork", "session.move"}

// sessionIO is what the command reads and writes, injectable for tests.
type sessionIO struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	// tty: stdin is a terminal, so the client is interactive.
	tty     bool
	getenv  func(string) string
	workDir string
	// httpClient is nil for a new h2c client.
	httpClient *http.Client
}

// openOptions are the parsed flags of `fak session open`.
type openOptions struct {
	sessionID string
	addr      string
	token     string
	steal     bool
	// from is the first address to replay; 0 means the last defaultReplay
	// events.
	from uint64
	name string
	// approve is ask, yes or no; "" means ask on a terminal, no otherwise.
	approve string
	tls     apiclient.TLSFiles
}

var errInterrupted = errors.New("interrupted")

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
	fs.Func("from", "replay from this `SEQ` (default: the last "+strconv.Itoa(defaultReplay)+" events)", func(v string) error {
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
	o := &opener{opts: opts, io: sio}
	err = o.run(ctx)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errInterrupted):
		fmt.Fprintln(sio.stderr, "fak session open: interrupted")
		return exitInterrupted
	case errors.As(err, new(usageError)):
		fmt.Fprintf(sio.stderr, "fak session open: %s\n", singleLine(err.Error()))
		return 2
	}
	fmt.Fprintf(sio.stderr, "fak session open: %s\n", errorLine(err))
	return 1
}

// opener is one run of `fak session open`.
type opener struct {
	opts openOptions
	io   sessionIO
	out  *transcript
	conn *sessionConn
	tr   tracker
	// approve is the resolved --approve.
	approve string
	// mine holds the addresses of the inputs this client sent.
	mine map[uint64]bool
	// shown is the last address printed of the current session; the watch
	// of the current attachment delivers results, and loop runs it.
	shown   uint64
	results <-chan watchResult
	loop    *attachLoop
	// view titles the controls: "as terminal NAME".
	view string
}

// attachLoop is what runs while the client is attached to a session: the
// keep-alive and lease renewals, and the watch.
type attachLoop struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (o *opener) run(ctx context.Context) error {
	getenv := o.io.getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	base, tlsCfg, err := resolveClient(o.opts.addr, o.opts.tls, getenv)
	if err != nil {
		return usageError{err.Error()}
	}
	workDir := o.io.workDir
	if workDir == "" {
		if workDir, err = os.Getwd(); err != nil {
			return err
		}
	}
	token, err := resolveAPIToken(o.opts.token, getenv, workDir)
	if err != nil {
		return err
	}
	httpClient := o.io.httpClient
	if httpClient == nil {
		httpClient = apiclient.NewTLSHTTPClient(tlsCfg, nil)
		defer httpClient.CloseIdleConnections()
	}
	var clientOpts []connect.ClientOption
	if token != "" {
		clientOpts = append(clientOpts, connect.WithInterceptors(apiclient.Bearer(token)))
	}
	name := o.opts.name
	if name == "" {
		name = defaultClientName(getenv)
	}
	o.approve = o.opts.approve
	if o.approve == "" {
		o.approve = "no"
		if o.io.tty {
			o.approve = "ask"
		}
	}
	o.mine = make(map[uint64]bool)
	o.out = newTranscript(o.io.stdout, clientKind)
	defer o.out.finish()
	scheme := "http"
	if strings.HasPrefix(base, "https://") {
		scheme = "https"
	}
	o.conn = &sessionConn{
		httpClient: httpClient, clientOpts: clientOpts, scheme: scheme,
		sessionID: o.opts.sessionID, kind: clientKind, name: name, caps: clientCapabilities,
		out: o.out, notices: o.stderrNotice,
		endpoints: []string{base}, clients: make(map[string]fakv1connect.SessionServiceClient),
		self: make(map[string]bool), keepAlive: 10 * time.Second, leaseTTL: 15 * time.Second,
	}

	// Describe, then replay up to the head it reported: the tracker starts
	// from the descriptor's pending state, which is the state at that head.
	d, err := o.conn.describe(ctx, "")
	if err != nil {
		if reasonOf(err) == reasonNotFound {
			return fmt.Errorf("session %s not found", o.opts.sessionID)
		}
		return fmt.Errorf("describe %s: %w", o.opts.sessionID, err)
	}
	// Learn the other endpoints now, while this one answers, so a watch or
	// a call can move to another node if it goes away.
	_ = o.conn.discover(ctx)
	head := d.GetSession().GetHeadSeq()
	o.tr.init(d, time.Now())
	o.out.raw(header(d, time.Now()))
	from := o.opts.from
	if from == 0 {
		from = 1
		if head > defaultReplay {
			from = head - defaultReplay + 1
		}
	}
	if from <= head {
		hint := ""
		if o.opts.from == 0 && from > 1 {
			hint = fmt.Sprintf(" (the last %d events; --from SEQ for earlier ones)", defaultReplay)
		}
		o.out.notice("replay #%d..#%d%s", from, head, hint)
		if err := o.replay(ctx, from, head); err != nil {
			return fmt.Errorf("replay: %w", err)
		}
	}

	done := make(chan struct{})
	defer close(done)
	lines := readLines(o.io.stdin, done)
	var first string
	if !o.io.tty {
		// A script with nothing to say only observes: no attachment, no
		// lease, nothing written to the journal.
		var ok bool
		if first, ok = nextInputLine(ctx, lines); !ok {
			if ctx.Err() != nil {
				return errInterrupted
			}
			o.out.raw(controls(d.GetCapabilities(), "not attached: stdin had no input"))
			return nil
		}
	}

	defer o.leave()
	o.view = "as " + clientKind + " " + name
	if err := o.join(ctx, d, head, o.opts.steal); err != nil {
		return err
	}
	if o.io.tty {
		return o.interactive(ctx, lines)
	}
	return o.scripted(ctx, lines, first)
}

// join attaches to the current session (described as d, replayed up to
// head), starts the keep-alive and lease renewals, takes the input lease,
// prints the controls and starts watching after head. A script fails when
// it cannot take the lease; a terminal watches read-only.
func (o *opener) join(ctx context.Context, d *fakv1.DescribeSessionResponse, head uint64, steal bool) error {
	view := o.view
	if _, err := o.conn.attach(ctx); err != nil {
		return fmt.Errorf("attach: %w", err)
	}
	loopCtx, cancel := context.WithCancel(ctx)
	loop := &attachLoop{cancel: cancel}
	o.loop = loop
	conn := o.conn
	loop.wg.Go(func() { conn.keepAliveLoop(loopCtx) })
	loop.wg.Go(func() { conn.renewLoop(loopCtx) })

	_, leaseErr := o.conn.takeLease(ctx, steal)
	if d2, err := o.conn.describe(ctx, o.conn.attachment()); err == nil {
		d = d2
	}
	if leaseErr != nil {
		holder := "another client"
		if l := d.GetSession().GetLease(); l.GetAttachmentId() != "" {
			holder = joinNonEmpty(" ", l.GetClientKind(), l.GetClientName())
		}
		switch {
		case !o.io.tty && reasonOf(leaseErr) == reasonLeaseHeld:
			return fmt.Errorf("the input lease is held by %s; rerun with --steal to take it", holder)
		case !o.io.tty:
			return fmt.Errorf("take the input lease: %w", leaseErr)
		case reasonOf(leaseErr) == reasonLeaseHeld:
			o.out.raw(controls(d.GetCapabilities(), view))
			o.out.notice("the input lease is held by %s; watching read-only (type /steal to take it, or rerun with --steal)", holder)
		default:
			o.out.raw(controls(d.GetCapabilities(), view))
			o.out.notice("could not take the input lease (%s); watching read-only", errorLine(leaseErr))
		}
	} else {
		o.out.raw(controls(d.GetCapabilities(), view))
	}

	results := make(chan watchResult)
	o.results = results
	o.shown = head
	loop.wg.Go(func() { conn.watch(loopCtx, head, results) })
	return nil
}

// leave stops the watch and the renewals and detaches (the fleet releases
// the lease with the attachment). Nothing happens when not attached.
func (o *opener) leave() {
	loop := o.loop
	if loop == nil {
		return
	}
	o.loop = nil
	loop.cancel()
	loop.wg.Wait()
	if err := o.conn.detach(); err != nil {
		o.stderrNotice("detach: %s", errorLine(err))
	}
}

// ledger runs a typed ledger command (/fresh, /reset, /clear, /new,
// /fork [SEQ]) on the current session. A refusal is a notice; the error it
// returns (following the child failed) ends the client.
func (o *opener) ledger(ctx context.Context, words []string) error {
	verb := strings.TrimPrefix(words[0], "/")
	var at uint64
	if verb == "fork" && len(words) > 1 {
		n, err := strconv.ParseUint(strings.TrimPrefix(words[1], "#"), 10, 64)
		if err != nil || n == 0 || len(words) > 2 {
			o.out.notice("usage: /fork [SEQ] (fork at address SEQ, default the head)")
			return nil
		}
		at = n
	}
	id, rid := o.conn.sessionID, newRequestID()
	var b *fakv1.Boundary
	err := o.conn.call(ctx, func(ctx context.Context, cl fakv1connect.SessionServiceClient) error {
		var err error
		switch verb {
		case "fresh":
			var r *connect.Response[fakv1.FreshSessionResponse]
			if r, err = cl.FreshSession(ctx, connect.NewRequest(&fakv1.FreshSessionRequest{SessionId: id, RequestId: rid})); err == nil {
				b = r.Msg.GetBoundary()
			}
		case "reset":
			var r *connect.Response[fakv1.ResetSessionResponse]
			if r, err = cl.ResetSession(ctx, connect.NewRequest(&fakv1.ResetSessionRequest{SessionId: id, RequestId: rid})); err == nil {
				b = r.Msg.GetBoundary()
			}
		case "clear":
			var r *connect.Response[fakv1.ClearSessionResponse]
			if r, err = cl.ClearSession(ctx, connect.NewRequest(&fakv1.ClearSessionRequest{SessionId: id, RequestId: rid})); err == nil {
				b = r.Msg.GetBoundary()
			}
		case "new":
			var r *connect.Response[fakv1.NewSessionResponse]
			if r, err = cl.NewSession(ctx, connect.NewRequest(&fakv1.NewSessionRequest{SessionId: id, RequestId: rid})); err == nil {
				b = r.Msg.GetBoundary()
			}
		case "fork":
			var r *connect.Response[fakv1.ForkSessionResponse]
			if r, err = cl.ForkSession(ctx, connect.NewRequest(&fakv1.ForkSessionRequest{SessionId: id, AtSeq: at, RequestId: rid})); err == nil {
				b = r.Msg.GetBoundary()
			}
		}
		return err
	})
	if err != nil {
		o.out.notice("not done: /%s: %s", verb, errorLine(err))
		return nil
	}
	s := b.GetSession()
	switch verb {
	case "fresh":
		o.tr.epoch = max(o.tr.epoch, s.GetEpoch())
		o.out.notice("fresh: epoch %d, provider session %s, %s pruned (0 is normal)", s.GetEpoch(), s.GetProviderSessionId(), plural(uint64(b.GetPruned()), "cached provider entry"))
		return nil
	case "reset":
		o.out.notice("context reset at #%d: the agent starts from a fresh context; the history above stays", s.GetResetSeq())
		return nil
	}
	how := verb + " of " + id
	if verb == "fork" {
		how += fmt.Sprintf(" at #%d", s.GetForkAddress())
	}
	return o.follow(ctx, s.GetSessionId(), how)
}

// move asks the fleet to move the session's execution to a node (the
// least loaded admitted one when none is named). The client stays
// attached: the move.* events show the progress, and the epoch.changed of
// the cutover sets the epoch the next input is sent against.
func (o *opener) move(ctx context.Context, args []string) {
	if len(args) > 1 {
		o.out.notice("usage: /move [NODE] (default: the least loaded node the fleet admits)")
		return
	}
	to := ""
	if len(args) == 1 {
		to = args[0]
	}
	id, rid := o.conn.sessionID, newRequestID()
	var mv *fakv1.Move
	err := o.conn.call(ctx, func(ctx context.Context, cl fakv1connect.SessionServiceClient) error {
		r, err := cl.MoveSession(ctx, connect.NewRequest(&fakv1.MoveSessionRequest{SessionId: id, ToNode: to, RequestId: rid}))
		if err == nil {
			mv = r.Msg.GetMove()
		}
		return err
	})
	if err != nil {
		o.out.notice("not done: /move %s: %s", to, errorLine(err))
		return
	}
	if to == "" {
		to = "the least loaded node the fleet admits"
	}
	o.out.notice("moving to %s (move %s); keep typing: input waits in the journal for whichever epoch is current", to, mv.GetMoveId())
}

// follow moves the client to another session (the child of a clear, new
// or fork): it leaves the current one, prints what happened there since
// the last event shown, then describes the child, replays it, attaches,
// takes its input lease and watches it.
func (o *opener) follow(ctx context.Context, child, how string) error {
	o.leave()
	if err := o.printTail(ctx); err != nil {
		o.out.notice("could not read the end of %s: %s", o.conn.sessionID, errorLine(err))
	}
	o.out.notice("now in %s (%s)", child, how)
	o.conn = o.conn.forSession(child)
	o.mine = make(map[uint64]bool)
	d, err := o.conn.describe(ctx, "")
	if err != nil {
		return fmt.Errorf("describe %s: %w", child, err)
	}
	now := time.Now()
	o.tr = tracker{}
	o.tr.init(d, now)
	o.out.raw(header(d, now))
	head := d.GetSession().GetHeadSeq()
	// A fork's history up to the fork address is the source's, at the same
	// addresses, already on screen.
	from := max(d.GetSession().GetForkAddress()+1, 1)
	if head >= defaultReplay && head-defaultReplay+1 > from {
		from = head - defaultReplay + 1
	}
	if from <= head {
		o.out.notice("replay #%d..#%d", from, head)
		if err := o.replay(ctx, from, head); err != nil {
			return fmt.Errorf("replay %s: %w", child, err)
		}
	}
	return o.join(ctx, d, head, false)
}

// printTail prints the events of the current session after the last one
// shown, up to its head: after a clear, its stop and this client's leaving.
func (o *opener) printTail(ctx context.Context) error {
	d, err := o.conn.describe(ctx, "")
	if err != nil {
		return err
	}
	if head := d.GetSession().GetHeadSeq(); head > o.shown {
		return o.replay(ctx, o.shown+1, head)
	}
	return nil
}

// replay prints the events from..to (the head the descriptor reported).
func (o *opener) replay(ctx context.Context, from, to uint64) error {
	for from <= to {
		var events []*fakv1.Event
		err := o.conn.call(ctx, func(ctx context.Context, cl fakv1connect.SessionServiceClient) error {
			r, err := cl.ReadEvents(ctx, connect.NewRequest(&fakv1.ReadEventsRequest{
				SessionId: o.conn.sessionID, FromSeq: from, Limit: uint32(min(to-from+1, replayPage)),
			}))
			if err == nil {
				events = r.Msg.GetEvents()
			}
			return err
		})
		if err != nil {
			return err
		}
		if len(events) == 0 {
			return nil
		}
		for _, ev := range events {
			if ev.GetSeq() > to {
				return nil
			}
			o.out.event(ev)
			o.tr.replayed(ev)
		}
		from = events[len(events)-1].GetSeq() + 1
	}
	return nil
}

// interactive is the terminal loop: render what happens, act on each typed
// line, until Ctrl-D, Ctrl-C, /quit or the session stops.
func (o *opener) interactive(ctx context.Context, lines <-chan string) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case r := <-o.results:
			if r.err != nil {
				return fmt.Errorf("watch: %w", r.err)
			}
			o.handleEvents(ctx, r.events, nil)
			if o.tr.stopped && o.tr.child != "" {
				// Cleared or renewed by another client or the provider: the
				// conversation continues in the child.
				how := joinNonEmpty(" ", o.tr.childSource, "of", o.conn.sessionID)
				o.out.notice("%s was stopped elsewhere (%s) and continues as %s; following it", o.conn.sessionID, singleLine(o.tr.stopReason), o.tr.child)
				if err := o.follow(ctx, o.tr.child, how); err != nil {
					return err
				}
				continue
			}
			if o.tr.stopped {
				o.out.notice("the session is stopped; detaching")
				return nil
			}
		case line, ok := <-lines:
			if !ok {
				return nil
			}
			quit, err := o.command(ctx, line)
			if err != nil {
				return err
			}
			if quit {
				return nil
			}
		}
	}
}

// command acts on one typed line and reports whether to quit; an error
// ends the client (following a new session failed).
func (o *opener) command(ctx context.Context, line string) (quit bool, err error) {
	word := strings.TrimSpace(line)
	switch {
	case word == "":
	case o.tr.answerable() && (isYes(word) || isNo(word)):
		o.answer(ctx, o.tr.approval, isYes(word), "")
	case word == "/take" || word == "/steal":
		resp, err := o.conn.takeLease(ctx, word == "/steal")
		switch {
		case reasonOf(err) == reasonLeaseHeld:
			o.out.notice("the input lease is held by %s; type /steal to take it", o.tr.holderName())
		case err != nil:
			o.out.notice("could not take the input lease: %s", errorLine(err))
		case resp.GetAlreadyHeld():
			o.out.notice("you already hold the input lease")
		}
	case word == "/release":
		resp, err := o.conn.releaseLease(ctx)
		switch {
		case err != nil:
			o.out.notice("could not release the input lease: %s", errorLine(err))
		case resp.GetNoOp():
			o.out.notice("you do not hold the input lease")
		}
	case word == "/fresh" || word == "/reset" || word == "/clear" || word == "/new" || strings.HasPrefix(word, "/fork") && (len(word) == 5 || word[5] == ' '):
		if err := o.ledger(ctx, strings.Fields(word)); err != nil {
			return true, err
		}
	case word == "/move" || strings.HasPrefix(word, "/move "):
		o.move(ctx, strings.Fields(word)[1:])
	case word == "/help" || word == "/?":
		o.out.notice("/take, /steal, /release the input lease; /fresh, /reset, /clear, /new, /fork [SEQ] the session; /move [NODE] its execution; y or n answers a pending approval; //text sends /text; Ctrl-D detaches")
	case word == "/quit" || word == "/exit" || word == "/detach":
		return true, nil
	case strings.HasPrefix(word, "//"):
		o.sendInteractive(ctx, strings.Replace(line, "//", "/", 1))
	case strings.HasPrefix(word, "/"):
		o.out.notice("unknown command %s (type /help; //text sends /text as input)", strings.Fields(word)[0])
	default:
		o.sendInteractive(ctx, line)
	}
	return false, nil
}

func (o *opener) sendInteractive(ctx context.Context, text string) {
	_, err := o.send(ctx, text)
	switch reasonOf(err) {
	case "":
		if err != nil {
			o.out.notice("not sent: %s", errorLine(err))
		}
	case reasonLeaseNotHeld:
		if o.tr.lease.id != "" && !o.conn.isSelf(o.tr.lease.id) {
			o.out.notice("not sent: the input lease is held by %s; type /steal to take it (or rerun with --steal)", o.tr.holderName())
		} else {
			o.out.notice("not sent: you do not hold the input lease; type /take to take it")
		}
	case reasonSessionStopped:
		o.out.notice("not sent: the session is stopped")
	default:
		o.out.notice("not sent: %s", errorLine(err))
	}
}

// send submits one input against the epoch the client knows; on
// STALE_EPOCH it describes the session again and retries once.
func (o *opener) send(ctx context.Context, text string) (uint64, error) {
	seq, err := o.conn.act(ctx, text, o.tr.epoch, newRequestID())
	if reasonOf(err) == reasonStaleEpoch {
		d, derr := o.conn.describe(ctx, o.conn.attachment())
		if derr != nil {
			return 0, err
		}
		o.tr.epoch = max(o.tr.epoch, d.GetSession().GetEpoch())
		seq, err = o.conn.act(ctx, text, o.tr.epoch, newRequestID())
	}
	if err == nil {
		o.mine[seq] = true
	}
	return seq, err
}

// scripted is the loop when stdin is not a terminal: send a line, wait for
// its turn to complete, send the next; at EOF wait for the last turn.
func (o *opener) scripted(ctx context.Context, lines <-chan string, first string) error {
	next, haveNext := first, true
	var waiting uint64    // the input whose turn has not completed yet
	var needAnswer uint64 // an approval awaiting its answer from stdin (--approve ask)
	eof := false
	for {
		if waiting == 0 && needAnswer == 0 {
			if haveNext {
				haveNext = false
				seq, err := o.send(ctx, next)
				if err != nil {
					return o.scriptedSendError(err)
				}
				waiting = seq
				continue
			}
			if eof {
				return nil
			}
		}
		var in <-chan string
		if !eof && (waiting == 0 || needAnswer != 0) {
			in = lines
		}
		select {
		case <-ctx.Done():
			return errInterrupted
		case r := <-o.results:
			if r.err != nil {
				return fmt.Errorf("watch: %w", r.err)
			}
			o.handleEvents(ctx, r.events, func(approvalSeq uint64) { needAnswer = approvalSeq })
			if how, ok := o.tr.completed[waiting]; waiting != 0 && ok {
				if how != "completed" {
					return fmt.Errorf("the turn of input #%d did not complete: %s", waiting, singleLine(how))
				}
				waiting = 0
			}
			if needAnswer != 0 && (o.tr.approval != needAnswer || !o.tr.answerable()) {
				needAnswer = 0 // answered by another client
			}
			if o.tr.stopped {
				if waiting != 0 || haveNext {
					return fmt.Errorf("the session stopped (%s) before input #%d was answered", singleLine(o.tr.stopReason), waiting)
				}
				return nil
			}
		case line, ok := <-in:
			switch {
			case !ok:
				eof = true
				if needAnswer != 0 {
					o.out.notice("no answer on stdin for approval #%d; denying it", needAnswer)
					o.answer(ctx, needAnswer, false, "no answer on stdin")
					needAnswer = 0
				}
			case needAnswer != 0:
				word := strings.TrimSpace(line)
				approved := isYes(word)
				if !approved && !isNo(word) {
					o.out.notice("expected y or n for approval #%d, got %q; denying it", needAnswer, word)
				}
				o.answer(ctx, needAnswer, approved, "")
				needAnswer = 0
			case strings.TrimSpace(line) != "":
				next, haveNext = line, true
			}
		}
	}
}

func (o *opener) scriptedSendError(err error) error {
	switch reasonOf(err) {
	case reasonLeaseNotHeld:
		return fmt.Errorf("input not sent: this client no longer holds the input lease (held by %s); rerun with --steal to take it", o.tr.holderName())
	case reasonSessionStopped:
		return fmt.Errorf("input not sent: the session is stopped")
	}
	return fmt.Errorf("send input: %w", err)
}

// handleEvents renders a batch, advances the tracker and reacts: it follows
// the lease and answers approvals of this client's turns per --approve
// (ask hands the approval to askAnswer, when the caller reads answers).
func (o *opener) handleEvents(ctx context.Context, events []*fakv1.Event, askAnswer func(uint64)) {
	for _, ev := range events {
		o.out.event(ev)
		o.shown = max(o.shown, ev.GetSeq())
		o.tr.apply(ev)
		f, _ := factsOf(ev)
		switch ev.GetKind() {
		case evLeaseTaken:
			o.conn.setLease(o.conn.isSelf(f.AttachmentID))
		case evLeaseReleased:
			if o.conn.isSelf(f.AttachmentID) {
				o.conn.setLease(false)
			}
		case evMoveCutover:
			o.out.notice("the session now runs on %s as epoch %d; this client stays attached and sends to epoch %d", f.To, f.NewEpoch, o.tr.epoch)
		case evApprovalRequested:
			if !o.mine[o.tr.approvalTurn] {
				continue
			}
			switch {
			case o.approve == "yes":
				o.out.notice("approving #%d (--approve yes)", ev.GetSeq())
				o.answer(ctx, ev.GetSeq(), true, "--approve yes")
			case o.approve == "no":
				o.out.notice("denying #%d (--approve no)", ev.GetSeq())
				o.answer(ctx, ev.GetSeq(), false, "--approve no")
			case askAnswer != nil:
				askAnswer(ev.GetSeq())
			}
		}
	}
}

func (o *opener) answer(ctx context.Context, approvalSeq uint64, approved bool, note string) {
	resp, err := o.conn.answer(ctx, approvalSeq, approved, note)
	switch {
	case err != nil:
		o.out.notice("could not answer approval #%d: %s", approvalSeq, errorLine(err))
	case resp.GetAlreadyAnswered():
		o.out.notice("approval #%d was already answered", approvalSeq)
	}
}

func (o *opener) stderrNotice(format string, args ...any) {
	fmt.Fprintf(o.io.stderr, "fak session open: %s\n", singleLine(fmt.Sprintf(format, args...)))
}

// tracker follows the session's interaction state through the journal,
// from the descriptor's state at its head: the epoch, queued inputs and the
// running turn (turns take queued inputs oldest first), the pending
// approval, the lease holder and whether the session stopped.
type tracker struct {
	epoch uint64
	queue []uint64
	// turn is the input whose turn is running (0: none); completed holds
	// the inputs whose turns ended since the client started, with how
	// ("completed", "failed: ...", "interrupted", "cleared by a reset").
	turn      uint64
	completed map[uint64]string
	// approval is the pending approval.requested (0: none), asked by the
	// turn of input approvalTurn.
	approval     uint64
	approvalTurn uint64
	answered     bool
	lease        struct{ id, kind, name string }
	stopped      bool
	stopReason   string
	// child and childSource: the session a clear or new continued in.
	child, childSource string
}

func (t *tracker) init(d *fakv1.DescribeSessionResponse, now time.Time) {
	s := d.GetSession()
	t.epoch = s.GetEpoch()
	t.queue = slices.Clone(s.GetPending().GetQueuedInputs())
	t.turn = s.GetPending().GetTurnInputSeq()
	t.completed = make(map[uint64]string)
	t.approval = s.GetPending().GetApprovalSeq()
	t.approvalTurn = t.turn
	if l := s.GetLease(); l.GetAttachmentId() != "" && l.GetExpiresUnixNano() > now.UnixNano() {
		t.lease.id, t.lease.kind, t.lease.name = l.GetAttachmentId(), l.GetClientKind(), l.GetClientName()
	}
	t.stopped = s.GetState() == fakv1.SessionState_SESSION_STATE_STOPPED
	t.stopReason = s.GetStopReason()
}

// replayed notes what a replayed event (at or before the descriptor's
// head) says about the state init took from the descriptor: whether the
// pending approval was already answered.
func (t *tracker) replayed(ev *fakv1.Event) {
	if ev.GetKind() == evApprovalAnswered {
		if f, ok := factsOf(ev); ok && f.ApprovalSeq == t.approval {
			t.answered = true
		}
	}
}

// apply advances the state past one event after the descriptor's head.
func (t *tracker) apply(ev *fakv1.Event) {
	f, _ := factsOf(ev)
	switch ev.GetKind() {
	case evEpochChanged:
		t.epoch = max(t.epoch, f.Epoch)
	case evInput:
		t.queue = append(t.queue, ev.GetSeq())
	case evTurnStarted:
		in := uint64(0)
		if i := slices.Index(t.queue, f.InputSeq); f.InputSeq != 0 && i >= 0 {
			in = f.InputSeq
			t.queue = slices.Delete(t.queue, i, i+1)
		} else if len(t.queue) > 0 {
			in = t.queue[0]
			t.queue = t.queue[1:]
		}
		t.turn = in
	case evTurnCompleted:
		in := t.turn
		if f.InputSeq != 0 {
			in = f.InputSeq
		}
		if in != 0 {
			switch f.Status {
			case "", "completed":
				t.completed[in] = "completed"
			case "failed":
				why := f.Error
				if why == "" {
					why = strings.TrimPrefix(ev.GetText(), "failed: ")
				}
				t.completed[in] = "failed: " + why
			default:
				t.completed[in] = f.Status
			}
		}
		t.turn, t.approval, t.approvalTurn, t.answered = 0, 0, 0, false
	case evResetBoundary:
		// A context reset drops the queued inputs and the pending approval.
		for _, in := range t.queue {
			t.completed[in] = "cleared by a context reset before its turn"
		}
		t.queue = nil
		t.approval, t.approvalTurn, t.answered = 0, 0, false
	case evApprovalRequested:
		t.approval, t.approvalTurn, t.answered = ev.GetSeq(), t.turn, false
	case evApprovalAnswered:
		if f.ApprovalSeq == t.approval {
			t.answered = true
		}
	case evToolResult:
		if t.answered {
			t.approval, t.approvalTurn, t.answered = 0, 0, false
		}
	case evLeaseTaken:
		t.lease.id, t.lease.kind, t.lease.name = f.AttachmentID, f.ClientKind, f.ClientName
	case evLeaseReleased:
		if f.AttachmentID == "" || f.AttachmentID == t.lease.id {
			t.lease.id, t.lease.kind, t.lease.name = "", "", ""
		}
	case evSessionStopped:
		t.stopped, t.stopReason = true, ev.GetText()
		t.child, t.childSource = f.Child, f.Source
	}
}

// answerable reports whether an approval awaits an answer.
func (t *tracker) answerable() bool { return t.approval != 0 && !t.answered }

func (t *tracker) holderName() string {
	if t.lease.id == "" {
		return "nobody"
	}
	if n := joinNonEmpty(" ", t.lease.kind, t.lease.name); n != "" {
		return n
	}
	return t.lease.id
}

func isYes(s string) bool { s = strings.ToLower(s); return s == "y" || s == "yes" }
func isNo(s string) bool  { s = strings.ToLower(s); return s == "n" || s == "no" }

// readLines delivers stdin line by line (without the line break) until EOF
// or a read error, then closes the channel. done stops it early.
func readLines(r io.Reader, done <-chan struct{}) <-chan string {
	ch := make(chan string)
	go func() {
		defer close(ch)
		br := bufio.NewReader(r)
		for {
			line, err := br.ReadString('\n')
			if line != "" {
				select {
				case ch <- strings.TrimRight(line, "\r\n"):
				case <-done:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return ch
}

// nextInputLine waits for the next non-blank line; ok is false at EOF or
// when ctx ends.
func nextInputLine(ctx context.Context, lines <-chan string) (string, bool) {
	for {
		select {
		case <-ctx.Done():
			return "", false
		case line, ok := <-lines:
			if !ok {
				return "", false
			}
			if strings.TrimSpace(line) != "" {
				return line, true
			}
		}
	}
}

// defaultClientName is user@host.
func defaultClientName(getenv func(string) string) string {
	name := getenv("USER")
	if name == "" {
		if u, err := user.Current(); err == nil {
			name = u.Username
		}
	}
	if name == "" {
		name = "user"
	}
	if host, err := os.Hostname(); err == nil && host != "" {
		name += "@" + host
	}
	return name
}

func newRequestID() string {
	var b [12]byte
	rand.Read(b[:])
	return "term_" + hex.EncodeToString(b[:])
}
