package fsm

import (
	"github.com/fak-dev/fak/fsm/fsmpb"
)

// Interrupting a turn (DESIGN.md §7). The FSM closes the running turn
// itself, in the entry that decides it: a turn.completed with status
// interrupted naming who interrupted, exactly as the runner's own
// turn.completed would close it (the turn's input, a pending approval,
// the count of turns). The runner learns it from the session — the turn it
// runs is no longer the session's — and stops the runtime; its later
// writes for that turn are refused with TURN_ORDER, so a turn is closed
// once whoever closes it. turn.completed thus has two writers, the
// runner of the current epoch and the FSM, and the FSM's always says
// status interrupted and by whom.

// StatusInterrupted is the status of a turn closed before it finished.
const StatusInterrupted = "interrupted"

// interruptTurn is the lease holder's interrupt. The checks run in the
// order a client can act on, as for input: a stopped session, an external
// one, the epoch, the attachment, the lease, then whether a turn runs.
func (a *applier) interruptTurn(c *fsmpb.Command, cmd *fsmpb.InterruptTurn) (*fsmpb.Result, *Error) {
	s, at, err := a.leaseHolderAct(c, cmd.SessionId, cmd.AttachmentId, cmd.ExpectedEpoch, "an interrupt")
	if err != nil {
		return nil, err
	}
	if s.TurnInputSeq == 0 {
		return nil, errorf(ReasonNoTurnRunning, "no turn is running in session %s", s.SessionId)
	}
	ev := a.closeTurnInterrupted(c, s, at.ClientKind+" "+at.ClientName, interruptByFact{
		AttachmentID: at.AttachmentId, ClientKind: at.ClientKind, ClientName: at.ClientName,
	})
	a.putSession(s)
	return &fsmpb.Result{Body: &fsmpb.Result_Append{Append: &fsmpb.AppendResult{
		SessionId: s.SessionId, FirstSeq: ev.Seq, LastSeq: ev.Seq,
	}}}, nil
}

// closeTurnInterrupted closes s's running turn as interrupted by who (its
// name in the event's text, "terminal alice" or "move mov_1") and stores
// the event; the caller stores s. The bookkeeping is the runner's
// turn.completed's (runnerAppend).
func (a *applier) closeTurnInterrupted(c *fsmpb.Command, s *fsmpb.Session, who string, by interruptByFact) *fsmpb.Event {
	ev := newEvent(s, c, KindTurnCompleted, "interrupted by "+who, fact(interruptFact{
		Status: StatusInterrupted, InputSeq: s.TurnInputSeq, By: by,
	}))
	s.TurnInputSeq = 0
	s.PendingApprovalSeq = 0
	s.TurnsCompleted++
	s.UpdatedUnixNano = c.TimeUnixNano
	a.putEvents(ev)
	return ev
}
