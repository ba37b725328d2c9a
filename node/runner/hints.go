package runner

import (
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

// Hints: what reaches a runner before its replica applies it (a committed
// input, a move step), so a turn or a step starts at once.

// Hint acts on a runner hint (cluster.RunnerHint): the input at inputSeq
// of session id, epoch epoch, committed and starts the session's next
// turn. When the local replica is exactly one event behind it — that
// input — and the session runs here, a worker starts the turn now, on the
// session as it will be (fsm.WithInput), instead of when the replica
// applies the input. Anything else is ignored: the change feed brings the
// input soon anyway. Every write the worker makes is fenced by the FSM.
func (r *Runner) Hint(id string, epoch, inputSeq uint64) {
	s, err := r.cfg.FSM.Session(id)
	if err != nil || !r.ours(s) {
		return
	}
	view, ok := fsm.WithInput(s, epoch, inputSeq)
	if !ok {
		return
	}
	r.considerView(view, view)
}

// HintMoveStep acts on a move-step hint (cluster.RunnerHint with a view):
// view is the session as the leader applied a move's request (this node
// the source) or admission (this node the destination). When the local
// replica lacks exactly that one event, a worker takes the step now, from
// the view, instead of when the replica applies it. Anything else is
// ignored: the change feed brings the step soon anyway. The step's write
// is fenced by the FSM like any other (move id, state, epoch).
//
// A view that comes while the replica still lacks an earlier event too
// (the destination learns the checkpoint's commit only with the
// admission's entry) is kept until the replica applies it.
func (r *Runner) HintMoveStep(view *fsmpb.Session) {
	s, err := r.cfg.FSM.Session(view.SessionId)
	switch {
	case err != nil:
	case stepAhead(s, view, r.cfg.Node):
		r.considerView(view, view)
	case s.Epoch == view.Epoch && s.HeadSeq+1 < view.HeadSeq:
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.early == nil {
			r.early = make(map[string]*fsmpb.Session)
		}
		if len(r.early) < maxEarlyViews {
			r.early[view.SessionId] = view
		}
	}
}

// maxEarlyViews bounds the views kept for replicas that were behind.
const maxEarlyViews = 1024

// takeEarly returns the view kept for s's session when s is now exactly
// one event behind it, and forgets views s has caught up with.
func (r *Runner) takeEarly(s *fsmpb.Session) *fsmpb.Session {
	r.mu.Lock()
	defer r.mu.Unlock()
	view := r.early[s.SessionId]
	switch {
	case view == nil:
		return nil
	case stepAhead(s, view, r.cfg.Node):
		delete(r.early, s.SessionId)
		return view
	case s.Epoch != view.Epoch || s.HeadSeq >= view.HeadSeq:
		delete(r.early, s.SessionId)
	}
	return nil
}

// stepAhead: view is s and one event more, that event being the one that
// asks node's runner for a move step (fsm.RunnerMoveStep).
func stepAhead(s, view *fsmpb.Session, node string) bool {
	if s.Epoch != view.Epoch || s.HeadSeq+1 != view.HeadSeq || fsm.RunnerMoveStep(view) != node {
		return false
	}
	switch m := view.Move; m.State {
	case fsm.MoveSafePointRequested:
		return !fsm.MoveOpen(s.Move)
	case fsm.MoveAdmitted:
		return s.Move.GetMoveId() == m.MoveId && s.Move.State == fsm.MoveCheckpointed
	}
	return false
}

// reconsider re-reads the given sessions (each once) and starts the
// workers they need. It returns the earliest time a paused one may be
