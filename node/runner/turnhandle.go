package runner

import (
	"context"
	"fmt"
	"sync"
	"unicode"

	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

// The handle a runtime drives one turn through (Turn): its writes, each
// fenced by the turn's epoch, its charges, its output count and approvals;
// and the journal view runtimes read the session's events from.

// writeError is a write the runner could not make (after retries), as
// opposed to a failure of the agent itself.
type writeError struct{ err error }

func (e writeError) Error() string { return "runner write: " + e.err.Error() }
func (e writeError) Unwrap() error { return e.err }

// turn implements Turn for one turn of one epoch.
type turn struct {
	r         *Runner
	h         *host // records what the turn's writes committed (nil: nothing)
	sessionID string
	epoch     uint64

	inputSeq  uint64
	mu        sync.Mutex
	words     uint64 // words of the output emitted so far
	midWord   bool   // the last output ended inside a word
	chargedOT bool   // the runtime charged output tokens itself (or a gateway meters it)
	binding   *Binding
}

func (t *turn) Bind(provider, threadID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.binding = &Binding{Provider: provider, ThreadID: threadID}
}

func (t *turn) boundThread() *Binding {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.binding
}

func (t *turn) InputSeq() uint64 { return t.inputSeq }

func (t *turn) outputCharged() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.chargedOT
}

// Charge records usage under a request id fixed before the first attempt,
// so a retried charge counts once.
func (t *turn) Charge(ctx context.Context, usage *fsmpb.Budget) error {
	id := newRequestID()
	err := retry(ctx, func(ctx context.Context) error {
		return t.r.cfg.Writer.RecordUsage(ctx, t.sessionID, usage, id)
	})
	switch {
	case err == nil:
		if usage.GetOutputTokens() > 0 {
			t.mu.Lock()
			t.chargedOT = true
			t.mu.Unlock()
		}
		return nil
	case IsTransient(err):
		return writeError{err}
	}
	return err
}

// countOutput counts the words of an output event; a word split across
// two chunks counts once.
func (t *turn) countOutput(text string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range text {
		space := unicode.IsSpace(c)
		if !space && !t.midWord {
			t.words++
		}
		t.midWord = !space
	}
}

func (t *turn) outputWords() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.words
}

func (t *turn) Emit(ctx context.Context, events ...Event) (uint64, error) {
	w, err := t.write(ctx, Append{Events: events})
	if err != nil {
		return 0, err
	}
	for _, ev := range events {
		if ev.Kind == fsm.KindOutput {
			t.countOutput(ev.Text)
		}
	}
	return w.Last, nil
}

// write makes one write of the turn's epoch under a request id fixed
// before its first attempt and notes on the host what it committed.
func (t *turn) write(ctx context.Context, a Append) (Appended, error) {
	a.SessionID, a.Epoch, a.RequestID = t.sessionID, t.epoch, newRequestID()
	var w Appended
	err := retry(ctx, func(ctx context.Context) error {
		var err error
		w, err = t.r.cfg.Writer.AppendRunnerEvents(ctx, a)
		return err
	})
	if err != nil {
		return Appended{}, writeError{err}
	}
	if t.h != nil {
		t.h.wrote(w.Last)
	}
	return w, nil
}

// complete writes the turn's last output (tail: text the runtime streamed
// and left for this write), its turn.completed and its usage in one
// write: the runtime's usage, whose output tokens, when it has none, are
// the words the turn emitted, unless the runtime charged output tokens
// itself. A refused charge is journaled by the FSM and only logged here:
// the turn happened.
func (t *turn) complete(ctx context.Context, tail string, ev Event, usage *fsmpb.Budget) error {
	var events []Event
	if tail != "" {
		t.countOutput(tail)
		for _, piece := range splitText([]byte(tail), outputMaxEvent) {
			events = append(events, Event{Kind: fsm.KindOutput, Text: piece})
		}
	}
	events = append(events, ev)
	if usage != nil {
		usage = proto.Clone(usage).(*fsmpb.Budget)
	}
	if !t.outputCharged() && usage.GetOutputTokens() == 0 {
		if words := t.outputWords(); words > 0 {
			if usage == nil {
				usage = &fsmpb.Budget{}
			}
			usage.OutputTokens = words
		}
	}
	w, err := t.write(ctx, Append{Events: events, Usage: usage, Binding: t.boundThread()})
	if err == nil && w.UsageRefused {
		t.r.logger.Info("the turn's usage was refused by the budget envelope", "session", t.sessionID,
			"input", t.inputSeq, "usage", usage.String())
	}
	return err
}

// AwaitApproval watches the local replica: the answer is a committed
// approval.answered, which every replica applies. It gives up when the
// epoch changes, the session stops or the approval is withdrawn.
func (t *turn) AwaitApproval(ctx context.Context, seq uint64) (bool, error) {
	f := t.r.cfg.FSM
	for {
		changed := f.Changed()
		s, err := f.Session(t.sessionID)
		if err != nil {
			return false, err
		}
		switch ap := s.Approval; {
		case s.Epoch != t.epoch:
			return false, &fsm.Error{Reason: fsm.ReasonStaleEpoch, Message: fmt.Sprintf("epoch %d replaced by %d while awaiting approval %d", t.epoch, s.Epoch, seq)}
		case s.State == fsmpb.SessionState_SESSION_STATE_STOPPED:
			return false, &fsm.Error{Reason: fsm.ReasonSessionStopped, Message: "session stopped while awaiting approval"}
		case ap != nil && ap.ApprovalSeq == seq && ap.Answered:
			return ap.Approved, nil
		case s.HeadSeq >= seq && s.PendingApprovalSeq != seq:
			return false, &fsm.Error{Reason: fsm.ReasonTurnOrder, Message: fmt.Sprintf("approval %d is no longer pending", seq)}
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-changed:
		}
	}
}

// journal reads one session's model context from the local replica: the
// events after the reset boundary at seq after (0: all of them).
type journal struct {
	f     *fsm.FSM
	id    string
	after uint64
}

func (j journal) Events(from uint64, limit int) ([]*fsmpb.Event, error) {
	from = max(from, j.after+1)
	evs, _, err := j.f.Events(j.id, from, limit)
	return evs, err
}
