package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

// maxFencedPasses bounds how often in a row a worker re-reads a session
// after the FSM refused its write as out of date (the session moved,
// stopped, or its turn state changed): normally the next pass sees why.
const maxFencedPasses = 3

// work owns one session until it has nothing left to do here.
func (r *Runner) work(id string, h *host) {
	defer r.wg.Done()
	err := r.serve(id, h)
	r.mu.Lock()
	h.busy = false
	if err != nil && r.ctx.Err() == nil {
		h.retryAt = time.Now().Add(failurePause)
		r.logger.Warn("session worker failed; retrying later", "session", id, "error", err)
	}
	r.mu.Unlock()
	r.kickScan()
}

// serve runs the session's turns one after another. Each pass starts with a
// read barrier, so the decision it takes (close an orphaned turn, start the
// oldest queued input, stop) is taken on state at least as new as the
// cluster's: only this worker starts turns of the epoch, so the decision
// stays right until the epoch changes, which fences our writes.
func (r *Runner) serve(id string, h *host) error {
	ctx := r.ctx
	fenced := 0
	for {
		if err := retry(ctx, func(ctx context.Context) error { return r.cfg.Writer.Sync(ctx, id) }); err != nil {
			return fmt.Errorf("read barrier: %w", err)
		}
		s, err := r.cfg.FSM.Session(id)
		if err != nil {
			return err
		}
		ours := r.ours(s)
		if h.runtime != nil && (!ours || h.epoch != s.Epoch) {
			r.retire(ctx, id, h)
		}
		switch {
		case r.restoreDue(s):
			err = r.restore(ctx, s)
		case !ours:
			return nil
		case s.TurnInputSeq != 0:
			// Not ours to finish: this worker never leaves a pass with its
			// own turn open, so the turn belongs to a runner that died or
			// gave up (a restart, a crash, an outage longer than the retry
			// budget).
			err = r.closeInterrupted(ctx, s)
		case r.checkpointDue(s):
			err = r.checkpoint(ctx, s, h)
		case fsm.MoveOpen(s.Move):
			return nil // no new turn while the session moves
		case len(s.QueuedInputs) > 0:
			a := r.adapter(s)
			if a == nil {
				return nil
			}
			if h.runtime == nil {
				rt, err := a.Start(ctx, Epoch{SessionID: id, Epoch: s.Epoch, Placement: s.Placement}, journal{r.cfg.FSM, id})
				if err != nil {
					return fmt.Errorf("start %s runtime: %w", a.Name(), err)
				}
				h.runtime, h.epoch = rt, s.Epoch
			}
			err = r.runTurn(ctx, s, a.Name(), h.runtime, s.QueuedInputs[0])
		default:
			return nil
		}
		switch {
		case err == nil:
			fenced = 0
		case ctx.Err() != nil:
			return nil // shutting down; the turn stays open for the next runner
		case (isFenced(err) || refusedMoveStep(err)) && fenced < maxFencedPasses:
			fenced++
			r.logger.Debug("write fenced; re-reading the session", "session", id, "error", err)
		default:
			return err
		}
	}
}

// isFenced: the FSM refused a write because the runner's view was out of
// date, not because the write was malformed.
func isFenced(err error) bool {
	switch fsm.ReasonOf(err) {
	case fsm.ReasonStaleEpoch, fsm.ReasonSessionStopped, fsm.ReasonTurnOrder:
		return true
	}
	return false
}

// refusedMoveStep: the FSM refused a checkpoint, restore or failure report
// (the move ended or moved on, the epoch changed): the next pass re-reads.
func refusedMoveStep(err error) bool {
	var me moveStepError
	return errors.As(err, &me) && me.refused()
}

func (r *Runner) retire(ctx context.Context, id string, h *host) {
	if err := h.runtime.SafePoint(ctx); err != nil {
		r.logger.Warn("runtime safe point", "session", id, "epoch", h.epoch, "error", err)
	}
	if err := h.runtime.Stop(); err != nil {
		r.logger.Warn("stopping runtime", "session", id, "epoch", h.epoch, "error", err)
	}
	r.logger.Debug("retired runtime", "session", id, "epoch", h.epoch)
	h.runtime = nil
}

type turnFact struct {
	Status   string `json:"status,omitempty"`
	InputSeq uint64 `json:"input_seq"`
	Node     string `json:"node,omitempty"`
	Adapter  string `json:"adapter,omitempty"`
	Error    string `json:"error,omitempty"`
}

func turnData(f turnFact) []byte {
	b, _ := json.Marshal(f)
	return b
}

func (r *Runner) closeInterrupted(ctx context.Context, s *fsmpb.Session) error {
	t := &turn{r: r, sessionID: s.SessionId, epoch: s.Epoch}
	_, err := t.Emit(ctx, Event{Kind: fsm.KindTurnCompleted, Text: "interrupted",
		Data: turnData(turnFact{Status: "interrupted", InputSeq: s.TurnInputSeq})})
	if err == nil {
		r.logger.Info("closed an interrupted turn", "session", s.SessionId, "epoch", s.Epoch, "input", s.TurnInputSeq)
	}
	return err
}

// runTurn runs the turn of the queued input at inputSeq: turn.started (the
// FSM pops that input, the oldest), the runtime's events, turn.completed.
func (r *Runner) runTurn(ctx context.Context, s *fsmpb.Session, adapter string, rt Runtime, inputSeq uint64) error {
	evs, _, err := r.cfg.FSM.Events(s.SessionId, inputSeq, 1)
	if err != nil {
		return err
	}
	if len(evs) == 0 || evs[0].Seq != inputSeq || evs[0].Kind != fsm.KindInput {
		return fmt.Errorf("queued input %d is not an input event of the journal", inputSeq)
	}
	t := &turn{r: r, sessionID: s.SessionId, epoch: s.Epoch}
	if _, err := t.Emit(ctx, Event{Kind: fsm.KindTurnStarted, Text: adapter + " on " + r.cfg.Node,
		Data: turnData(turnFact{InputSeq: inputSeq, Node: r.cfg.Node, Adapter: adapter})}); err != nil {
		return err
	}
	summary, terr := rt.Turn(ctx, evs[0], t)
	var we writeError
	switch {
	case terr == nil:
		if summary == "" {
			summary = "completed"
		}
		_, err = t.Emit(ctx, Event{Kind: fsm.KindTurnCompleted, Text: summary,
			Data: turnData(turnFact{Status: "completed", InputSeq: inputSeq})})
		return err
	case ctx.Err() != nil, errors.As(terr, &we), isFenced(terr):
		return terr
	}
	r.logger.Warn("turn failed", "session", s.SessionId, "adapter", adapter, "input", inputSeq, "error", terr)
	_, err = t.Emit(ctx, Event{Kind: fsm.KindTurnCompleted, Text: "failed: " + terr.Error(),
		Data: turnData(turnFact{Status: "failed", InputSeq: inputSeq, Error: terr.Error()})})
	return err
}

// writeError is a write the runner could not make (after retries), as
// opposed to a failure of the agent itself.
type writeError struct{ err error }

func (e writeError) Error() string { return "runner write: " + e.err.Error() }
func (e writeError) Unwrap() error { return e.err }

// turn implements Turn for one turn of one epoch.
type turn struct {
	r         *Runner
	sessionID string
	epoch     uint64
}

func (t *turn) Emit(ctx context.Context, events ...Event) (uint64, error) {
	id := newRequestID()
	var last uint64
	err := retry(ctx, func(ctx context.Context) error {
		var err error
		_, last, err = t.r.cfg.Writer.AppendRunnerEvents(ctx, t.sessionID, t.epoch, events, id)
		return err
	})
	if err != nil {
		return 0, writeError{err}
	}
	return last, nil
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

// journal reads one session's events from the local replica.
type journal struct {
	f  *fsm.FSM
	id string
}

func (j journal) Events(from uint64, limit int) ([]*fsmpb.Event, error) {
	evs, _, err := j.f.Events(j.id, from, limit)
	return evs, err
}
