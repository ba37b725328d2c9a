package term

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/client/journal"
)

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
		case <-o.ctrlC:
			if o.onCtrlC(ctx, time.Now()) {
				return nil
			}
		}
	}
}

// command acts on one typed line and reports whether to quit; an error
// ends the client (following a new session failed). A line that triggers a
// control goes ahead only when the session's capability set, described
// afresh, says the control is available; otherwise its reason and handoff
// are printed (allowed).
func (o *opener) command(ctx context.Context, line string) (quit bool, err error) {
	word := strings.TrimSpace(line)
	switch word {
	case "":
		return false, nil
	case "/help", "/?":
		o.out.notice("/take, /steal, /release the input lease; /interrupt (or Ctrl-C) interrupts the running turn; /fresh, /reset, /clear, /new, /fork [SEQ] the session; /move [NODE] its execution; /stop [REASON] ends it; y or n answers a pending approval; //text sends /text; /controls lists the controls; /detach, Ctrl-D, or Ctrl-C with no turn running detaches")
		return false, nil
	case "/quit", "/exit":
		return true, nil
	case "/controls":
		o.showControls(ctx)
		return false, nil
	}
	control := trigger(word, o.tr.answerable())
	switch control {
	case "":
		o.out.notice("unknown command %s (type /help; //text sends /text as input)", strings.Fields(word)[0])
	case "input.text":
		if strings.HasPrefix(word, "//") {
			line = strings.Replace(line, "//", "/", 1)
		}
		o.sendInteractive(ctx, line)
	case "turn.interrupt":
		o.interruptTurn(ctx, word)
	case "approval.answer":
		if o.allowed(ctx, control, "not answered") {
			o.answer(ctx, o.tr.approval, isYes(word), "")
		}
	case "lease.take", "lease.steal":
		if !o.allowed(ctx, control, "not done: "+word) {
			break
		}
		resp, err := o.conn.takeLease(ctx, control == "lease.steal")
		switch {
		case reasonOf(err) == reasonLeaseHeld:
			o.out.notice("the input lease is held by %s; type /steal to take it", o.tr.holderName())
		case err != nil:
			o.out.notice("could not take the input lease: %s", ErrorLine(err))
		case resp.GetAlreadyHeld():
			o.out.notice("you already hold the input lease")
		}
	case "lease.release":
		if !o.allowed(ctx, control, "not done: "+word) {
			break
		}
		resp, err := o.conn.releaseLease(ctx)
		switch {
		case err != nil:
			o.out.notice("could not release the input lease: %s", ErrorLine(err))
		case resp.GetNoOp():
			o.out.notice("you do not hold the input lease")
		}
	case "session.stop":
		o.stop(ctx, strings.TrimSpace(strings.TrimPrefix(word, "/stop")))
	case "session.fresh", "session.reset", "session.clear", "session.new", "session.fork":
		if err := o.ledger(ctx, strings.Fields(word)); err != nil {
			return true, err
		}
	case "session.move":
		o.move(ctx, strings.Fields(word)[1:])
	case "detach":
		return o.allowed(ctx, control, "not done: "+word), nil
	}
	return false, nil
}

func (o *opener) sendInteractive(ctx context.Context, text string) {
	if !o.allowed(ctx, "input.text", "not sent") {
		return
	}
	_, err := o.send(ctx, text)
	switch reasonOf(err) {
	case "":
		if err != nil {
			o.out.notice("not sent: %s", ErrorLine(err))
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
		o.out.notice("not sent: %s", ErrorLine(err))
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
			return ErrInterrupted
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
		fact, _ := journal.Decode(ev)
		switch ev.GetKind() {
		case journal.KindLeaseTaken:
			f, _ := fact.(journal.Lease)
			o.conn.setLease(o.conn.isSelf(f.AttachmentID))
		case journal.KindLeaseReleased:
			if f, _ := fact.(journal.Lease); o.conn.isSelf(f.AttachmentID) {
				o.conn.setLease(false)
			}
		case journal.KindMoveCutover:
			f, _ := fact.(journal.Move)
			o.out.notice("the session now runs on %s as epoch %d; this client stays attached and sends to epoch %d", f.To, f.NewEpoch, o.tr.epoch)
		case journal.KindApprovalRequested:
			if !o.mine[o.tr.approvalTurn] {
				continue
			}
			switch {
			case o.cfg.Approve == "yes":
				o.out.notice("approving #%d (--approve yes)", ev.GetSeq())
				o.answer(ctx, ev.GetSeq(), true, "--approve yes")
			case o.cfg.Approve == "no":
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
		o.out.notice("could not answer approval #%d: %s", approvalSeq, ErrorLine(err))
	case resp.GetAlreadyAnswered():
		o.out.notice("approval #%d was already answered", approvalSeq)
	}
}

func isYes(s string) bool { s = strings.ToLower(s); return s == "y" || s == "yes" }

func isNo(s string) bool { s = strings.ToLower(s); return s == "n" || s == "no" }

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
