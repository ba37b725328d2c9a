// Package term is fak's terminal client, the engine of `fak session open`:
// one more client of a session, like the browser page. It describes the
// session, replays its recent events (each printed at its address, #SEQ,
// with the words client/journal gives every client), attaches, takes the
// input lease and sends each line typed as input, following the session
// across nodes, moves and the child sessions of a clear, new or fork.
// It presents every control of the session's capability set (Controls)
// and checks a control is available before triggering it, printing the
// fleet's reason and handoff when it is not; client/conformance checks
// both against the same corpus as the browser page.
//
// The files: term.go (a run: join, leave), session.go (the ledger commands,
// /move, following a child, replay), input.go (the interactive and the
// scripted loop), tracker.go (the session's interaction state from the
// journal), conn.go (endpoints, calls, the attachment), lease.go (the input
// lease and the keep-alive), watch.go (the event stream), render.go and
// header.go (what is printed), controls.go (the controls it presents and
// the commands that trigger them).
package term

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/fak-dev/fak/api/apiclient"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
)

const (
	// clientKind is how this client attaches.
	clientKind = "terminal"
	// DefaultReplay is how many events are replayed without Config.From.
	DefaultReplay = 50
	// replayPage is the largest page ReadEvents allows.
	replayPage = 1000
)

// ErrInterrupted ends a scripted run cut short (its context ended).
var ErrInterrupted = errors.New("interrupted")

// Config is one run of the client, resolved from the command line.
type Config struct {
	SessionID string
	// BaseURL is the node to start from (any node of the fleet), and
	// HTTPClient the client that reaches it and the others (h2c or TLS).
	BaseURL    string
	HTTPClient *http.Client
	// Token is the API bearer token; "" sends none.
	Token string
	// Name is what other clients see of this one ("user@host").
	Name string
	// Steal takes the input lease even when another client holds it.
	Steal bool
	// From is the first address to replay; 0 means the last DefaultReplay
	// events.
	From uint64
	// Approve answers the approvals of this client's turns: ask, yes or no.
	Approve string

	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// TTY: stdin is a terminal, so the client is interactive. Otherwise
	// each line is sent as input and its turn awaited before the next.
	TTY bool
	// Interrupts delivers Ctrl-C presses. While the client is interactive
	// and a turn runs, Ctrl-C interrupts the turn, and a second one within
	// 2 s detaches; otherwise it ends the run, as a canceled context does.
	// nil: Ctrl-C is the caller's (it cancels the context).
	Interrupts <-chan struct{}
}

// opener is one run of the client.
type opener struct {
	cfg  Config
	out  *transcript
	conn *sessionConn
	tr   tracker
	// mine holds the addresses of the inputs this client sent.
	mine map[uint64]bool
	// shown is the last address printed of the current session; the watch
	// of the current attachment delivers results, and loop runs it.
	shown   uint64
	results <-chan watchResult
	loop    *attachLoop
	// view titles the controls: "as terminal NAME".
	view string
	// ctrlC delivers Ctrl-C presses to the interactive loop (see
	// Config.Interrupts); lastCtrlC is when one last interrupted a turn.
	ctrlC     chan struct{}
	lastCtrlC time.Time
	// interactiveOn tells watchInterrupts the interactive loop runs.
	interactiveOn func()
}

// attachLoop is what runs while the client is attached to a session: the
// keep-alive and lease renewals, and the watch.
type attachLoop struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Open runs the client until the user detaches (Ctrl-D, /quit), ctx ends,
// the session stops, or, for a script, its input is done. Errors are the
// run's failures, for the caller to print (ErrorLine).
func Open(ctx context.Context, cfg Config) error {
	if cfg.Approve == "" {
		cfg.Approve = "no"
		if cfg.TTY {
			cfg.Approve = "ask"
		}
	}
	o := &opener{cfg: cfg}
	return o.run(ctx)
}

func (o *opener) run(ctx context.Context) error {
	ctx, stop := o.watchInterrupts(ctx)
	defer stop()
	var clientOpts []connect.ClientOption
	if o.cfg.Token != "" {
		clientOpts = append(clientOpts, connect.WithInterceptors(apiclient.Bearer(o.cfg.Token)))
	}
	base, name := o.cfg.BaseURL, o.cfg.Name
	o.mine = make(map[uint64]bool)
	o.out = newTranscript(o.cfg.Stdout)
	defer o.out.finish()
	scheme := "http"
	if strings.HasPrefix(base, "https://") {
		scheme = "https"
	}
	o.conn = &sessionConn{
		httpClient: o.cfg.HTTPClient, clientOpts: clientOpts, scheme: scheme,
		sessionID: o.cfg.SessionID, kind: clientKind, name: name, caps: Capabilities,
		out: o.out, notices: o.stderrNotice,
		endpoints: []string{base}, clients: make(map[string]fakv1connect.SessionServiceClient),
		self: make(map[string]bool), keepAlive: 10 * time.Second, leaseTTL: 15 * time.Second,
	}

	// Describe, then replay up to the head it reported: the tracker starts
	// from the descriptor's pending state, which is the state at that head.
	d, err := o.conn.describe(ctx, "")
	if err != nil {
		if reasonOf(err) == reasonNotFound {
			return fmt.Errorf("session %s not found", o.cfg.SessionID)
		}
		return fmt.Errorf("describe %s: %w", o.cfg.SessionID, err)
	}
	// Learn the other endpoints now, while this one answers, so a watch or
	// a call can move to another node if it goes away.
	_ = o.conn.discover(ctx)
	head := d.GetSession().GetHeadSeq()
	o.tr.init(d, time.Now())
	o.out.raw(header(d, time.Now()))
	from := o.cfg.From
	if from == 0 {
		from = 1
		if head > DefaultReplay {
			from = head - DefaultReplay + 1
		}
	}
	if from <= head {
		hint := ""
		if o.cfg.From == 0 && from > 1 {
			hint = fmt.Sprintf(" (the last %d events; --from SEQ for earlier ones)", DefaultReplay)
		}
		o.out.notice("replay #%d..#%d%s", from, head, hint)
		if err := o.replay(ctx, from, head); err != nil {
			return fmt.Errorf("replay: %w", err)
		}
	}

	done := make(chan struct{})
	defer close(done)
	lines := readLines(o.cfg.Stdin, done)
	var first string
	if !o.cfg.TTY {
		// A script with nothing to say only observes: no attachment, no
		// lease, nothing written to the journal.
		var ok bool
		if first, ok = nextInputLine(ctx, lines); !ok {
			if ctx.Err() != nil {
				return ErrInterrupted
			}
			o.out.raw(controls(d.GetCapabilities(), "not attached: stdin had no input"))
			return nil
		}
	}

	defer o.leave()
	o.view = "as " + clientKind + " " + name
	if err := o.join(ctx, d, head, o.cfg.Steal); err != nil {
		return err
	}
	if o.cfg.TTY {
		if o.interactiveOn != nil {
			o.interactiveOn()
		}
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
		case !o.cfg.TTY && reasonOf(leaseErr) == reasonLeaseHeld:
			return fmt.Errorf("the input lease is held by %s; rerun with --steal to take it", holder)
		case !o.cfg.TTY:
			return fmt.Errorf("take the input lease: %w", leaseErr)
		case reasonOf(leaseErr) == reasonLeaseHeld:
			o.out.raw(controls(d.GetCapabilities(), view))
			o.out.notice("the input lease is held by %s; watching read-only (type /steal to take it, or rerun with --steal)", holder)
		default:
			o.out.raw(controls(d.GetCapabilities(), view))
			o.out.notice("could not take the input lease (%s); watching read-only", ErrorLine(leaseErr))
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
		o.stderrNotice("detach: %s", ErrorLine(err))
	}
}

func (o *opener) stderrNotice(format string, args ...any) {
	fmt.Fprintf(o.cfg.Stderr, "fak session open: %s\n", singleLine(fmt.Sprintf(format, args...)))
}

func newRequestID() string {
	var b [12]byte
	rand.Read(b[:])
	return "term_" + hex.EncodeToString(b[:])
}
