package runner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

// maxFencedPasses bounds how often in a row a worker re-reads a session
// after the FSM refused its write as out of date (the session moved,
// stopped, or its turn state changed): normally the next pass sees why.
const maxFencedPasses = 3

// work owns one session until it has nothing left to do here.
func (r *Runner) work(id string, h *host, view *fsmpb.Session) {
	defer r.wg.Done()
	err := r.serve(id, h, view)
	r.mu.Lock()
	h.busy = false
	if err != nil && r.ctx.Err() == nil {
		h.retryAt = time.Now().Add(failurePause)
		r.logger.Warn("session worker failed; retrying later", "session", id, "error", err)
	}
	r.mu.Unlock()
	r.kickSession(id)
}

// serve runs the session's turns one after another. Each pass decides on
// the local replica (close an orphaned turn, start the oldest queued
// input, a move's step, stop) once it holds every write this runner made
// for the session. A replica behind the cluster by others' writes is safe
// to decide on: only this worker writes the epoch's turns, the FSM fences
// every write (epoch, turn order, move state) and runTurn re-reads when
// its turn.started was not the next write after what it read. What is not
// safe is closing a turn found open on a replica behind writes of this
// session's runner that this worker does not know of — a previous
// process's before a restart — where the turn that process started may
// look like one long finished: so before closing an orphaned turn when
// this host has no write of its own to wait for, and after a fenced
// write, a pass takes a read barrier, to decide on state at least as new
// as the cluster's.
//
// view, when not nil, is the session as a runner hint rebuilt or sent it,
// one event ahead of the replica: the first pass decides on it unless the
// replica has caught up or moved on meanwhile.
func (r *Runner) serve(id string, h *host, view *fsmpb.Session) error {
	ctx := r.ctx
	fenced, needFresh := 0, false
	for {
		fresh := fenced > 0 || needFresh
		needFresh = false
		if fresh {
			if err := r.barrier(ctx, id); err != nil {
				return err
			}
		} else if err := r.awaitLocal(ctx, id, h.lastWritten()); errors.Is(err, errLocalBehind) {
			// The replica never reached our writes: a restored
			// snapshot rewound the journal past them. Forget them; the
			// barrier awaitLocal took makes this pass exact.
			h.written.Store(0)
		} else if err != nil {
			return err
		}
		s, err := r.cfg.FSM.Session(id)
		if err != nil {
			return err
		}
		// at: the journal address this pass's replica holds up to.
		at := s.HeadSeq
		if view != nil && s.HeadSeq+1 == view.HeadSeq {
			s = view
		}
		view = nil
		ours := r.ours(s)
		if restores := r.cfg.FSM.Restores(); h.stale(s, ours, restores) {
			// A restored journal may not hold what the runtime saw: it
			// gets no safe point, like a reset's.
			r.retire(ctx, id, h, ours && h.epoch == s.Epoch || h.restores != restores)
		}
		switch {
		case r.restoreDue(s) && !fresh && !r.caughtUp():
			// A restore replaces this node's workspace of the session: it
			// must not act on a replica still replaying an old move (a
			// restarted node), which would put back the tree of a move
			// long cut over over the live one. Read the cluster first.
			needFresh = true
			continue
		case r.restoreDue(s):
			err = r.restore(ctx, s, h)
		case !ours:
			return nil
		case s.TurnInputSeq != 0 && !fresh && h.lastWritten() == 0:
			needFresh = true // see above: read the cluster's state first
			continue
		case s.TurnInputSeq != 0:
			// Not ours to finish: this worker never leaves a pass with its
			// own turn open, so the turn belongs to a runner that died or
			// gave up (a restart, a crash, an outage longer than the retry
			// budget).
			err = r.closeInterrupted(ctx, s, h)
		case r.checkpointDue(s):
			err = r.checkpoint(ctx, s, h, at)
		case fsm.MoveOpen(s.Move):
			return nil // no new turn while the session moves
		case len(s.QueuedInputs) > 0:
			a := r.adapter(s)
			if a == nil {
				return nil
			}
			err = r.runTurn(ctx, s, a, h)
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

// localWait bounds how long a worker waits for the local replica to
// apply what it knows committed (its own acknowledged writes, a hinted
// input): a follower learns a commit with the leader's next
// AppendEntries, within milliseconds. Past it the worker takes a read
// barrier instead, which fails the same way when the node cannot reach
// the leader.
const localWait = 2 * time.Second

// errLocalBehind: the local replica did not reach the seq awaited within
// localWait; a read barrier was taken instead.
var errLocalBehind = errors.New("the local replica did not reach the seq awaited")

// awaitLocal returns once the local replica's journal of the session
// reaches seq: a pass waits for every write this runner made for the
// session (the last seq acknowledged), so it does not take its own last
// turn for an orphaned one; a hinted turn waits for its input. Past
// localWait it takes a read barrier and, when that succeeds, returns
// errLocalBehind.
func (r *Runner) awaitLocal(ctx context.Context, id string, want uint64) error {
	if want == 0 {
		return nil
	}
	f := r.cfg.FSM
	deadline := time.NewTimer(localWait)
	defer deadline.Stop()
	for {
		changed := f.Changed()
		s, err := f.Session(id)
		if err != nil || s.HeadSeq >= want {
			return nil // a missing session is the pass's to find
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			if err := r.barrier(ctx, id); err != nil {
				return err
			}
			return errLocalBehind
		case <-changed:
		}
	}
}

// barrier makes the local replica at least as new as the cluster.
func (r *Runner) barrier(ctx context.Context, id string) error {
	restores := r.cfg.FSM.Restores()
	if err := retry(ctx, func(ctx context.Context) error { return r.cfg.Writer.Sync(ctx, id) }); err != nil {
		return fmt.Errorf("read barrier: %w", err)
	}
	r.synced.Store(restores + 1)
	return nil
}

// caughtUp: a read barrier succeeded since this process started (and
// since the last snapshot restore), so the local replica holds everything
// committed before the process started: it no longer replays old state.
func (r *Runner) caughtUp() bool {
	return r.synced.Load() == r.cfg.FSM.Restores()+1
}

// isFenced: the FSM refused a write because the runner's view was out of
// date, not because the write was malformed.
func isFenced(err error) bool {
	switch fsm.ReasonOf(err) {
	case fsm.ReasonStaleEpoch, fsm.ReasonSessionStopped, fsm.ReasonTurnOrder, fsm.ReasonMoveState:
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

// retire stops h's runtime. A runtime retired by a reset gets no safe
// point: its successor starts from an empty context, not from it.
func (r *Runner) retire(ctx context.Context, id string, h *host, reset bool) {
	if !reset {
		if err := h.runtime.SafePoint(ctx); err != nil {
			r.logger.Warn("runtime safe point", "session", id, "epoch", h.epoch, "error", err)
		}
	}
	if err := h.runtime.Stop(); err != nil {
		r.logger.Warn("stopping runtime", "session", id, "epoch", h.epoch, "error", err)
	}
	r.logger.Debug("retired runtime", "session", id, "epoch", h.epoch, "reset_seq", h.resetSeq, "reset", reset)
	h.runtime = nil
}

// ensureRuntime makes h's runtime serve s's current context: the epoch's
// journal after its last reset boundary. A runtime of an older context is
// retired first; a new one is started lazily, here, when a turn needs it.
func (r *Runner) ensureRuntime(ctx context.Context, s *fsmpb.Session, a Adapter, h *host) error {
	if h.runtime != nil {
		if !h.stale(s, true, r.cfg.FSM.Restores()) {
			return nil
		}
		r.retire(ctx, s.SessionId, h, h.epoch == s.Epoch)
	}
	restores := r.cfg.FSM.Restores()
	ep, err := r.epoch(s, s.Epoch, s.Placement)
	if err != nil {
		return err
	}
	rt, err := a.Start(ctx, ep, journal{f: r.cfg.FSM, id: s.SessionId, after: s.ResetSeq})
	if err != nil {
		return fmt.Errorf("start %s runtime: %w", a.Name(), err)
	}
	h.runtime, h.epoch, h.resetSeq, h.restores = rt, s.Epoch, s.ResetSeq, restores
	return nil
}

// epoch describes what a runtime serves: epoch n of s on placement p, in
// the session's workspace on this node.
func (r *Runner) epoch(s *fsmpb.Session, n uint64, p *fsmpb.Placement) (Epoch, error) {
	ep := Epoch{SessionID: s.SessionId, Epoch: n, Placement: p, ResetSeq: s.ResetSeq, Addr: r.cfg.Addr}
	if s.ProviderThread {
		ep.Provider, ep.ThreadID = s.Provider, s.ProviderSessionId
	}
	if r.cfg.WorkspaceRoot != "" {
		dir, err := Workspace(r.cfg.WorkspaceRoot, s.SessionId)
		if err != nil {
			return Epoch{}, err
		}
		ep.Workspace = dir
	}
	return ep, nil
}

func (r *Runner) closeInterrupted(ctx context.Context, s *fsmpb.Session, h *host) error {
	t := &turn{r: r, h: h, sessionID: s.SessionId, epoch: s.Epoch}
	_, err := t.Emit(ctx, Event{Kind: fsm.KindTurnCompleted, Text: "interrupted",
		Data: turnData(turnFact{Status: "interrupted", InputSeq: s.TurnInputSeq}, nil)})
	if err == nil {
		r.logger.Info("closed an interrupted turn", "session", s.SessionId, "epoch", s.Epoch, "input", s.TurnInputSeq)
	}
	return err
}

func (r *Runner) startedEvent(adapter string, inputSeq uint64) Event {
	return Event{Kind: fsm.KindTurnStarted, Text: adapter + " on " + r.cfg.Node,
		Data: turnData(turnFact{InputSeq: inputSeq, Node: r.cfg.Node, Adapter: adapter}, nil)}
}

// runTurn runs the turn of the oldest queued input: turn.started with one
// turn and one query charged to the session's budget envelope in the same
// write (the FSM pops the oldest queued input, or, when the envelope
// refuses, closes the turn as refused so the queue moves on), the
// runtime's events, then turn.completed with the turn's usage (its output
// tokens, or what the runtime reported) charged in the same write.
func (r *Runner) runTurn(ctx context.Context, s *fsmpb.Session, a Adapter, h *host) error {
	id, inputSeq := s.SessionId, s.QueuedInputs[0]
	t := &turn{r: r, h: h, sessionID: id, epoch: s.Epoch}
	metered := false
	if m, ok := a.(Metered); ok {
		metered = m.MeteredByGateway()
	}
	w, err := t.write(ctx, Append{Events: []Event{r.startedEvent(a.Name(), inputSeq)}, ChargeTurn: true, StartsInput: inputSeq, TurnOnly: metered})
	if err != nil {
		return err
	}
	if w.TurnRefused {
		r.logger.Info("turn refused by the budget envelope", "session", id, "input", inputSeq)
		return nil
	}
	// The FSM started the turn on inputSeq or refused the write
	// (StartsInput): the input read is the oldest queued, so no reset came
	// after it, and the context read (s.ResetSeq) is the turn's. Once the
	// turn runs no reset can come (BUSY) until turn.completed.
	started := w.Last
	t.inputSeq = inputSeq
	// A hinted turn starts before the replica applied its input; by now
	// it has, or is about to (turn.started's replication carries the
	// input's commit).
	if err := r.awaitLocal(ctx, id, inputSeq); err != nil && !errors.Is(err, errLocalBehind) {
		return err
	}
	in, err := r.inputEvent(id, inputSeq)
	if err != nil {
		return r.completeFailed(ctx, t, id, a.Name(), inputSeq, err)
	}
	if err := r.ensureRuntime(ctx, s, a, h); err != nil {
		return r.completeFailed(ctx, t, id, a.Name(), inputSeq, err)
	}
	tctx, cancel := context.WithCancelCause(ctx)
	stopWatch := r.watchTurn(tctx, cancel, id, s.Epoch, inputSeq, started)
	if metered {
		t.chargedOT = true // the gateway charged the model calls
	}
	res, terr := h.runtime.Turn(tctx, in, t)
	stopWatch()
	cause := context.Cause(tctx)
	cancel(nil)
	var we writeError
	var closed turnClosedError
	switch {
	case errors.As(cause, &closed):
		// Someone else closed the turn (an interrupt, a move that
		// induced its safe point) or retired the epoch: the runtime was
		// cancelled and its remaining writes would be refused.
		r.logger.Info("turn ended by the cluster", "session", id, "input", inputSeq, "why", closed.why)
		if !t.outputCharged() && closed.interrupted {
			r.chargeOutput(ctx, id, inputSeq, t.outputWords())
		}
		return nil
	case terr == nil:
		if res.Summary == "" {
			res.Summary = "completed"
		}
		err := t.complete(ctx, res.Tail, Event{Kind: fsm.KindTurnCompleted, Text: res.Summary,
			Data: turnData(turnFact{Status: "completed", InputSeq: inputSeq}, res.Facts)}, res.Usage)
		if err == nil {
			r.copyAfterTurn(s, inputSeq)
		}
		return err
	case ctx.Err() != nil, errors.As(terr, &we), isFenced(terr):
		return terr
	}
	return r.completeFailed(ctx, t, id, a.Name(), inputSeq, terr)
}

// turnClosedError is the cause a turn's context is cancelled with when the
// cluster ended the turn: the FSM closed it (interrupted), or the epoch
// was retired (a move, a stop).
type turnClosedError struct {
	why         string
	interrupted bool
}

func (e turnClosedError) Error() string { return "turn ended by the cluster: " + e.why }

// watchTurn cancels a running turn once the local replica shows that it is
// no longer running: interrupted (the session's turn input changed after
// turn.started, at seq started, was applied here), its epoch retired or
// the session stopped. The runtime's context ends, which kills an agent's
// process group or cancels a model stream. The returned func stops the
// watch.
func (r *Runner) watchTurn(ctx context.Context, cancel context.CancelCauseFunc, id string, epoch, inputSeq, started uint64) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		f := r.cfg.FSM
		for {
			changed := f.Changed()
			s, err := f.Session(id)
			switch {
			case err != nil && fsm.ReasonOf(err) == fsm.ReasonNotFound:
				cancel(turnClosedError{why: "the session no longer exists"})
				return
			case err != nil:
			case s.Epoch != epoch:
				cancel(turnClosedError{why: fmt.Sprintf("epoch %d retired (now %d)", epoch, s.Epoch)})
				return
			case s.State == fsmpb.SessionState_SESSION_STATE_STOPPED:
				cancel(turnClosedError{why: "the session stopped"})
				return
			case s.HeadSeq >= started && s.TurnInputSeq != inputSeq:
				cancel(turnClosedError{why: "the turn was interrupted", interrupted: true})
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-done:
				return
			case <-changed:
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// completeFailed closes a turn the agent failed (or whose runtime could
// not start).
func (r *Runner) completeFailed(ctx context.Context, t *turn, id, adapter string, inputSeq uint64, terr error) error {
	r.logger.Warn("turn failed", "session", id, "adapter", adapter, "input", inputSeq, "error", terr)
	reason := string(fsm.ReasonOf(terr))
	var te *TurnError
	if errors.As(terr, &te) {
		reason = te.Reason
	}
	return t.complete(ctx, "", Event{Kind: fsm.KindTurnCompleted, Text: "failed: " + terr.Error(),
		Data: turnData(turnFact{Status: "failed", Reason: reason, InputSeq: inputSeq, Error: terr.Error()}, nil)}, nil)
}

// inputEvent reads the input event at seq from the local replica.
func (r *Runner) inputEvent(id string, seq uint64) (*fsmpb.Event, error) {
	evs, _, err := r.cfg.FSM.Events(id, seq, 1)
	if err != nil {
		return nil, err
	}
	if len(evs) == 0 || evs[0].Seq != seq || evs[0].Kind != fsm.KindInput {
		return nil, fmt.Errorf("queued input %d is not an input event of the journal", seq)
	}
	return evs[0], nil
}

// chargeOutput charges the output tokens (the words it emitted) of a turn
// the cluster closed, best effort: the output exists, and a refusal is
// journaled by the FSM.
func (r *Runner) chargeOutput(ctx context.Context, id string, inputSeq, words uint64) {
	if words == 0 {
		return
	}
	r.chargeAfterTurn(ctx, id, inputSeq, "run_output_", &fsmpb.Budget{OutputTokens: words})
}

// chargeAfterTurn charges usage once a turn has ended, under a request id
// derived from the input and what is charged (prefix), so a repeated pass
// charges it once. A refusal is journaled by the FSM and only logged here.
func (r *Runner) chargeAfterTurn(ctx context.Context, id string, inputSeq uint64, prefix string, usage *fsmpb.Budget) {
	reqID := turnRequestID(prefix, id, inputSeq)
	err := retry(ctx, func(ctx context.Context) error {
		return r.cfg.Writer.RecordUsage(ctx, id, usage, reqID)
	})
	switch {
	case err == nil, ctx.Err() != nil:
	case fsm.ReasonOf(err) == fsm.ReasonBudgetExhausted, fsm.ReasonOf(err) == fsm.ReasonSessionStopped:
		r.logger.Info("usage not charged", "session", id, "input", inputSeq, "usage", usage.String(), "error", err)
	default:
		r.logger.Warn("charging usage after the turn", "session", id, "input", inputSeq, "usage", usage.String(), "error", err)
	}
}
