package node

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/api"
	"github.com/fak-dev/fak/cluster"
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/placement"
)

// The steps the move controller proposes: which nodes may take a session,
// and the FSM command of each step of a move (open, drive, cutover, strand,
// fail), with the stable ids a retry proposes again.

func candidates(views map[string]nodeView, recs []*fsmpb.NodeRecord, load map[string]int) []placement.Candidate {
	out := make([]placement.Candidate, 0, len(recs))
	for _, rec := range recs {
		out = append(out, placement.Candidate{Record: rec, Status: views[rec.Name].status, Load: load[rec.Name]})
	}
	return out
}

func (mv *mover) request(s *fsmpb.Session) placement.Request {
	req := placement.Request{Session: s, ContextTokens: func() uint64 { return mv.contextTokens(s) }}
	if m := s.Move; fsm.MoveOpen(m) {
		req.Target, req.AcceptDegradation = m.Target, m.AcceptDegradation
	}
	if s.EnvelopeId != "" {
		if env, err := mv.n.fsm.Envelope(s.EnvelopeId); err == nil {
			req.Envelope = env
		}
	}
	return req
}

// admissible: some node would admit s now (checked before opening a
// recovery or drain move, so a fleet with nowhere to go does not fill
// journals with failed moves).
func (mv *mover) admissible(s *fsmpb.Session, views map[string]nodeView, recs []*fsmpb.NodeRecord, load map[string]int, stuck map[string]stuckSession) bool {
	_, all, ok := placement.Choose(mv.request(s), candidates(views, recs, load))
	if ok {
		return true
	}
	why := placement.Refusals("", all)
	stuck[s.SessionId] = stuckSession{node: s.GetPlacement().GetNode(), refusals: why}
	mv.stuckMu.Lock()
	logged := mv.stuck[s.SessionId].refusals == why
	mv.stuckMu.Unlock()
	if !logged {
		mv.n.logger.Warn("move controller: no node admits the session; waiting", "session", s.SessionId,
			"node", s.GetPlacement().GetNode(), "refusals", why)
	}
	return false
}

// retryPaused: the session's last move of this cause failed recently.
func (mv *mover) retryPaused(now time.Time, s *fsmpb.Session, cause string) bool {
	m := s.Move
	return m != nil && m.Cause == cause && (m.State == fsm.MoveFailed || m.State == fsm.MoveUnsafe) &&
		now.UnixNano()-m.StateUnixNano < int64(moveRetryPause)
}

// open requests a recovery or drain move of s to wherever it is admitted.
func (mv *mover) open(s *fsmpb.Session, cause string) *step {
	moveID := api.NewID("mov_")
	return &step{s: s, name: "request", requestID: stepID(moveID, "request"),
		cmd: &fsmpb.Command{Body: &fsmpb.Command_RequestMove{RequestMove: &fsmpb.RequestMove{
			SessionId: s.SessionId, MoveId: moveID, Target: &fsmpb.Placement{}, Cause: cause,
		}}},
		done: func() {
			mv.n.logger.Info("move controller: move requested", "session", s.SessionId, "move", moveID, "cause", cause,
				"from", s.GetPlacement().GetNode())
		}}
}

// strand plans marking (or unmarking) a recover=manual session of a dead
// node as stranded. Marking twice is a no-op in the FSM.
func (mv *mover) strand(s *fsmpb.Session, node string, stranded bool) *step {
	return &step{s: s, name: "strand",
		cmd: &fsmpb.Command{Body: &fsmpb.Command_MarkStranded{MarkStranded: &fsmpb.MarkStranded{
			SessionId: s.SessionId, Node: node, Stranded: stranded,
		}}},
		done: func() {
			if stranded {
				mv.n.logger.Warn("move controller: session stranded (recover=manual); move it by hand", "session", s.SessionId, "node", node)
			} else {
				mv.n.logger.Info("move controller: session no longer stranded", "session", s.SessionId, "node", node)
			}
		}}
}

// drive plans the step due for one open move (nil: nothing to do yet).
func (mv *mover) drive(now time.Time, s *fsmpb.Session, views map[string]nodeView, recs []*fsmpb.NodeRecord, load map[string]int) *step {
	m := s.Move
	inState := time.Duration(now.UnixNano() - m.StateUnixNano)
	switch m.State {
	case fsm.MoveSafePointRequested:
		if m.Cause == fsm.MoveCauseRecovery {
			return mv.checkpointRecovery(s)
		}
		timeout := time.Duration(m.SafePointTimeoutNanos)
		if timeout <= 0 {
			timeout = fsm.DefaultSafePointTimeout
		}
		if inState < timeout {
			return nil
		}
		why := fmt.Sprintf("no safe point on %s within %s", m.SourceNode, timeout)
		if s.TurnInputSeq != 0 {
			why += fmt.Sprintf(" (the turn of input #%d is still running)", s.TurnInputSeq)
		}
		return mv.fail(s, why, true)
	case fsm.MoveCheckpointed:
		d, all, ok := placement.Choose(mv.request(s), candidates(views, recs, load))
		if !ok {
			return mv.fail(s, placement.Refusals(m.Target.GetNode(), all), false)
		}
		load[d.Node]++
		return &step{s: s, name: "admit", requestID: stepID(m.MoveId, "admit"),
			cmd: &fsmpb.Command{Body: &fsmpb.Command_MoveAdmit{MoveAdmit: &fsmpb.MoveAdmit{
				SessionId: s.SessionId, MoveId: m.MoveId, Placement: d.Placement, Checks: d.Passed(), Degradation: d.Degradation,
			}}},
			done: func() {
				mv.n.metrics.moveAdmitted(m, time.Now().UnixNano())
				mv.n.logger.Info("move controller: destination admitted", "session", s.SessionId, "move", m.MoveId, "to", d.Node)
			}}
	case fsm.MoveAdmitted:
		dest := m.Admitted.GetNode()
		switch st := views[dest].status; {
		case st != cluster.StatusAlive:
			return mv.fail(s, fmt.Sprintf("destination %s is %s in gossip", dest, st), false)
		case inState >= RestoreTimeout:
			return mv.fail(s, fmt.Sprintf("destination %s did not restore within %s", dest, RestoreTimeout), false)
		}
	case fsm.MoveRestored:
		return mv.cutover(s, m)
	}
	return nil
}

// cutover plans the cutover of s's move m, restored as m says.
func (mv *mover) cutover(s *fsmpb.Session, m *fsmpb.Move) *step {
	return &step{s: s, name: "cutover", requestID: stepID(m.MoveId, "cutover"),
		cmd: &fsmpb.Command{Body: &fsmpb.Command_MoveCutover{MoveCutover: &fsmpb.MoveCutover{
			SessionId: s.SessionId, MoveId: m.MoveId,
		}}},
		done: func() {
			mv.n.metrics.moveEnded(m, "committed", time.Now().UnixNano())
			mv.n.logger.Info("move controller: cutover committed", "session", s.SessionId, "move", m.MoveId,
				"to", m.Admitted.GetNode(), "epoch", m.NewEpoch, "elapsed", time.Duration(time.Now().UnixNano()-m.RequestedUnixNano))
		}}
}

// companions is the controller's companions rule (cluster.Companion): a
// destination's restore of a move the leader holds ADMITTED is proposed
// with that move's cutover right behind it, so the cutover commits in the
// same round instead of one more after the controller sees RESTORED. The
// FSM applies them as two commands: a refused restore makes the cutover
// refused too (the move is not RESTORED), and then the controller's pass
// decides as before. The cutover's request id is the controller's own, so
// the two paths commit it once.
func (mv *mover) companions(cmd *fsmpb.Command) []cluster.Companion {
	r := cmd.GetMoveRestore()
	if r == nil {
		return nil
	}
	s, err := mv.n.fsm.Session(r.SessionId)
	if err != nil || !fsm.MoveOpen(s.Move) || s.Move.MoveId != r.MoveId || s.Move.State != fsm.MoveAdmitted {
		return nil
	}
	// The move as the restore will leave it: what the cutover's metrics
	// and log line read.
	m := proto.Clone(s.Move).(*fsmpb.Move)
	m.State, m.StateUnixNano, m.NewEpoch, m.Transfer = fsm.MoveRestored, cmd.TimeUnixNano, r.NewEpoch, r.Transfer
	st := mv.cutover(s, m)
	st.cmd.RequestId = st.requestID
	return []cluster.Companion{{Cmd: st.cmd, Done: func(res *fsmpb.Result) {
		if fsm.ResultError(res) == nil {
			st.done()
		}
	}}}
}

// checkpointRecovery plans a recovery's checkpoint at the last committed
// address of this (leader) replica: the source is gone, so there is no
// safe point to wait for; a turn it left open is closed as interrupted by
// the destination's runner after cutover.
func (mv *mover) checkpointRecovery(s *fsmpb.Session) *step {
	digest, err := mv.n.fsm.JournalDigest(s.SessionId, s.HeadSeq)
	if err != nil {
		mv.n.logger.Warn("move controller: recovery digest", "session", s.SessionId, "error", err)
		return nil
	}
	m := s.Move
	return &step{s: s, name: "checkpoint", requestID: stepID(m.MoveId, "checkpoint"),
		cmd: &fsmpb.Command{Body: &fsmpb.Command_MoveCheckpoint{MoveCheckpoint: &fsmpb.MoveCheckpoint{
			SessionId: s.SessionId, MoveId: m.MoveId, SourceEpoch: s.Epoch, CheckpointSeq: s.HeadSeq, Digest: digest,
		}}},
		done: func() {
			mv.n.logger.Info("move controller: recovery checkpoint", "session", s.SessionId, "move", m.MoveId, "seq", s.HeadSeq)
		}}
}

// fail plans ending the move before cutover: the source stays current.
func (mv *mover) fail(s *fsmpb.Session, reason string, unsafe bool) *step {
	m := s.Move
	reason = truncateUTF8(reason, fsm.MaxReasonBytes)
	state, outcome := fsm.MoveFailed, "failed"
	if unsafe {
		state, outcome = fsm.MoveUnsafe, "unsafe"
	}
	return &step{s: s, name: "fail", requestID: stepID(m.MoveId, "fail"),
		cmd: &fsmpb.Command{Body: &fsmpb.Command_MoveFail{MoveFail: &fsmpb.MoveFail{
			SessionId: s.SessionId, MoveId: m.MoveId, Reason: reason, Unsafe: unsafe,
		}}},
		done: func() {
			mv.n.metrics.moveEnded(m, outcome, time.Now().UnixNano())
			mv.n.logger.Warn("move controller: move failed; the source stays authoritative", "session", s.SessionId,
				"move", m.MoveId, "state", state, "phase", m.State, "reason", reason)
		}}
}

// applyMoveCommand proposes one controller command on this (leader) node.
// Domain refusals come back as *fsm.Error.
func (n *Node) applyMoveCommand(ctx context.Context, requestID string, cmd *fsmpb.Command) error {
	cmd.RequestId = requestID
	actx, cancel := context.WithTimeout(ctx, moveApplyTime)
	defer cancel()
	res, err := n.cluster.Apply(actx, cmd)
	if err != nil {
		return err
	}
	return fsm.ResultError(res)
}

// stepID is the request id of one controller step of a move: the same on
// every leader, so a step whose outcome was lost with a leader is applied
// once when the next leader repeats it.
func stepID(moveID, step string) string {
	sum := sha256.Sum256([]byte(moveID + "\x00" + step))
	return "mvctl_" + step + "_" + hex.EncodeToString(sum[:20])
}

func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// contextTokens estimates the tokens of s's model context — the text of
// its inputs and outputs since the last reset — at four bytes a token:
// what a new provider conversation is rebuilt from after a move loses the
// old one.
func (mv *mover) contextTokens(s *fsmpb.Session) uint64 {
	var bytes uint64
	from := s.ResetSeq + 1
	for {
		evs, _, err := mv.n.fsm.Events(s.SessionId, from, 1000)
		if err != nil || len(evs) == 0 {
			break
		}
		for _, ev := range evs {
			if ev.Kind == fsm.KindInput || ev.Kind == fsm.KindOutput {
				bytes += uint64(len(ev.Text))
			}
		}
		from = evs[len(evs)-1].Seq + 1
	}
	return (bytes + 3) / 4
}
