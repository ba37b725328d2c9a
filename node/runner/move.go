package runner

import (
	"context"
	"errors"
	"fmt"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

// The runner's part of a move (DESIGN.md §8). The controller on the leader
// drives the move; the runners take the two steps only they can take:
//
//   - the source (the node running the current epoch) starts no new turn
//     while a move is open, lets the turn in flight finish and then commits
//     the checkpoint: the head address and the digest of the journal up to
//     it, computed from its replica after a read barrier, and the digest
//     of its workspace's snapshot;
//   - the destination (the node the move admitted) recomputes the digest
//     over the same addresses of its own replica, makes its workspace the
//     checkpointed one (workspace_move.go), rebuilds the runtime from the
//     journal up to the checkpoint, and commits RESTORED as the next
//     epoch, or fails the move with DIGEST_MISMATCH (or
//     WORKSPACE_DIGEST_MISMATCH, WORKSPACE_REFUSED).
//
// After cutover the destination's runner hosts the session like any other:
// inputs queued during the move run in journal order. The source's runner
// sees the session leave and retires its runtime; a write it still makes
// carries the old epoch and is refused (STALE_EPOCH).

// checkpointDue: this node runs s's current epoch and an open move asks it
// for a safe point. A recovery's checkpoint is the controller's: its
// source is gone.
func (r *Runner) checkpointDue(s *fsmpb.Session) bool {
	m := s.Move
	return r.ours(s) && fsm.MoveOpen(m) && m.State == fsm.MoveSafePointRequested && m.Cause != fsm.MoveCauseRecovery
}

// restoreDue: an open move admitted this node as the session's destination.
func (r *Runner) restoreDue(s *fsmpb.Session) bool {
	m := s.Move
	return s.State == fsmpb.SessionState_SESSION_STATE_ACTIVE && fsm.MoveOpen(m) &&
		m.State == fsm.MoveAdmitted && m.Admitted.GetNode() == r.cfg.Node
}

// checkpoint commits the source's safe point: no turn is in flight (the
// caller checked, after a read barrier, and only this worker starts turns
// of the epoch), so the journal up to the head is what a successor needs.
// The head is at, the last event the replica holds: s may be a hint's
// view one event ahead, that event being the move's request (nothing a
// successor restores).
func (r *Runner) checkpoint(ctx context.Context, s *fsmpb.Session, h *host, at uint64) error {
	if h.runtime != nil {
		if err := h.runtime.SafePoint(ctx); err != nil {
			return fmt.Errorf("runtime safe point: %w", err)
		}
	}
	at = min(at, s.HeadSeq)
	digest, err := r.cfg.FSM.JournalDigest(s.SessionId, at)
	if err != nil {
		return err
	}
	m := s.Move
	var ws *fsmpb.Workspace
	if r.movesWorkspaces() {
		if ws, err = r.snapshotWorkspace(s); err != nil {
			var mr moveRefusal
			if errors.As(err, &mr) {
				return r.failMove(ctx, s, h, string(mr))
			}
			return err
		}
	}
	err = retry(ctx, func(ctx context.Context) error {
		head, err := r.cfg.Writer.CommitCheckpoint(ctx, s.SessionId, m.MoveId, s.Epoch, at, digest, ws)
		h.wrote(head)
		return err
	})
	if err != nil {
		return moveStepError{err}
	}
	r.logger.Info("move: checkpoint committed", "session", s.SessionId, "move", m.MoveId, "epoch", s.Epoch, "seq", at,
		"workspace", ws.GetDigest(), "workspace_bytes", ws.GetBytes())
	return nil
}

// restore verifies the checkpoint on this node's replica and commits the
// next epoch. The runtime is rebuilt from the journal up to the checkpoint
// to prove the adapter can continue from it, then stopped: it keeps nothing
// the journal does not have, so the epoch's first turn after cutover
// starts it again from the journal (after the last reset boundary, with
// the inputs queued during the move).
func (r *Runner) restore(ctx context.Context, s *fsmpb.Session, h *host) error {
	m := s.Move
	if s.HeadSeq < m.CheckpointSeq {
		return fmt.Errorf("replica head #%d is before the checkpoint #%d", s.HeadSeq, m.CheckpointSeq)
	}
	digest, err := r.cfg.FSM.JournalDigest(s.SessionId, m.CheckpointSeq)
	if err != nil {
		return err
	}
	if digest != m.Digest {
		r.logger.Error("move: journal digest mismatch; failing the move", "session", s.SessionId, "move", m.MoveId,
			"checkpoint", m.CheckpointSeq, "want", m.Digest, "have", digest)
		return r.failMove(ctx, s, h, fmt.Sprintf("%s: the journal up to #%d on %s has digest %s, the checkpoint's is %s",
			fsm.ReasonDigestMismatch, m.CheckpointSeq, r.cfg.Node, digest, m.Digest))
	}
	var transfer *fsmpb.WorkspaceTransfer
	if m.WorkspaceReset && r.movesWorkspaces() {
		if err := r.resetWorkspace(s); err != nil {
			return fmt.Errorf("empty the workspace for the recovery: %w", err)
		}
	}
	if w := m.Workspace; w.GetDigest() != "" && r.movesWorkspaces() {
		var err error
		if transfer, err = r.pullWorkspace(ctx, s, w); err != nil {
			var mr moveRefusal
			if errors.As(err, &mr) {
				r.logger.Error("move: the workspace cannot be restored; failing the move", "session", s.SessionId, "move", m.MoveId, "why", string(mr))
				return r.failMove(ctx, s, h, string(mr))
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("restore the workspace from %s: %w", m.SourceNode, err)
		}
	}
	name := m.Admitted.GetRuntimeAdapter()
	if name == "" {
		name = fsm.DefaultRuntimeAdapter
	}
	r.mu.Lock()
	a := r.adapters[name]
	r.mu.Unlock()
	if a == nil {
		return r.failMove(ctx, s, h, fmt.Sprintf("node %s has no runtime adapter %q", r.cfg.Node, name))
	}
	next := fsm.NextEpoch(s)
	ep, err := r.epoch(s, next, m.Admitted)
	if err == nil {
		var rt Runtime
		if rt, err = a.Start(ctx, ep, upTo{journal{f: r.cfg.FSM, id: s.SessionId, after: s.ResetSeq}, m.CheckpointSeq}); err == nil {
			if err := rt.Stop(); err != nil {
				r.logger.Warn("stopping the restored runtime", "session", s.SessionId, "error", err)
			}
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return r.failMove(ctx, s, h, fmt.Sprintf("restore on %s: start %s runtime: %v", r.cfg.Node, name, err))
	}
	err = retry(ctx, func(ctx context.Context) error {
		head, err := r.cfg.Writer.CommitRestore(ctx, s.SessionId, m.MoveId, next, digest, transfer)
		h.wrote(head)
		return err
	})
	if err != nil {
		return moveStepError{err}
	}
	r.logger.Info("move: restored", "session", s.SessionId, "move", m.MoveId, "epoch", next, "checkpoint", m.CheckpointSeq)
	return nil
}

func (r *Runner) failMove(ctx context.Context, s *fsmpb.Session, h *host, reason string) error {
	if len(reason) > fsm.MaxReasonBytes {
		reason = reason[:fsm.MaxReasonBytes]
	}
	err := retry(ctx, func(ctx context.Context) error {
		head, err := r.cfg.Writer.FailMove(ctx, s.SessionId, s.Move.MoveId, reason)
		h.wrote(head)
		return err
	})
	if err != nil {
		return moveStepError{err}
	}
	return nil
}

// moveStepError is a move step the FSM refused or the runner could not
// make. A refusal (the move ended or moved on meanwhile, the epoch
// changed) only means the runner's view was old: the next pass re-reads.
type moveStepError struct{ err error }

func (e moveStepError) Error() string { return "move step: " + e.err.Error() }
func (e moveStepError) Unwrap() error { return e.err }

// refused reports whether err is the FSM refusing a move step.
func (e moveStepError) refused() bool {
	var fe *fsm.Error
	return errors.As(e.err, &fe)
}

// upTo is a journal that ends at a checkpoint.
type upTo struct {
	j   Journal
	max uint64
}

func (u upTo) Events(from uint64, limit int) ([]*fsmpb.Event, error) {
	if from > u.max {
		return nil, nil
	}
	limit = int(min(uint64(limit), u.max-from+1))
	evs, err := u.j.Events(from, limit)
	// The journal may start later than from (after a reset boundary).
	for i, ev := range evs {
		if ev.Seq > u.max {
			return evs[:i], err
		}
	}
	return evs, err
}
