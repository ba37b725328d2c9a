package fsm

import "github.com/fak-dev/fak/fsm/fsmpb"

// Stranded sessions (DESIGN.md §8). A session whose policy says
// recover=manual is not moved by the recovery machinery when its compute
// node dies: the controller marks it stranded (MarkStranded), and an
// operator moves it by hand. It is unmarked when the node is alive again,
// and a cutover (the operator's move) clears it.

// Policy recover values.
const (
	RecoverAuto   = "auto"
	RecoverManual = "manual"
)

// StrandedReason is the reason a session.stranded event gives for marking.
const StrandedReason = "compute node dead"

// validRecover checks a policy's recover value ("" is auto).
func validRecover(v string) *Error {
	switch v {
	case "", RecoverAuto, RecoverManual:
		return nil
	}
	return errorf(ReasonInvalidArgument, "policy recover must be %s or %s, not %q", RecoverAuto, RecoverManual, truncate(v, MaxKindBytes))
}

// markStranded marks or unmarks a session. Marking needs an active session
// placed on the named node with no move open; marking or unmarking to the
// state the session is already in is a no-op.
func (a *applier) markStranded(c *fsmpb.Command, cmd *fsmpb.MarkStranded) (*fsmpb.Result, *Error) {
	if cmd.Node == "" || len(cmd.Node) > MaxPlacementFieldBytes {
		return nil, errorf(ReasonInvalidArgument, "node must be 1-%d bytes", MaxPlacementFieldBytes)
	}
	s, err := a.loadSession(cmd.SessionId)
	if err != nil {
		return nil, err
	}
	if s.Stranded == cmd.Stranded {
		return &fsmpb.Result{NoOp: true, Body: &fsmpb.Result_Session{Session: s}}, nil
	}
	if err := activeSession(s); err != nil {
		return nil, err
	}
	reason := "compute node alive"
	if cmd.Stranded {
		if node := s.Placement.GetNode(); node != cmd.Node {
			return nil, errorf(ReasonInvalidArgument, "session %s runs on %s, not %s", s.SessionId, node, cmd.Node)
		}
		if MoveOpen(s.Move) {
			return nil, errorf(ReasonBusy, "move %s of session %s is in progress (%s)", s.Move.MoveId, s.SessionId, s.Move.State)
		}
		reason = StrandedReason
		s.StrandedNode = cmd.Node
	} else {
		s.StrandedNode = ""
	}
	s.Stranded = cmd.Stranded
	s.UpdatedUnixNano = c.TimeUnixNano
	a.putEvents(newEvent(s, c, KindSessionStranded, strandedText(cmd.Node, cmd.Stranded, reason),
		fact(strandedFact{Node: cmd.Node, Stranded: cmd.Stranded, Reason: reason})))
	a.putSession(s)
	return &fsmpb.Result{Body: &fsmpb.Result_Session{Session: s}}, nil
}

func strandedText(node string, stranded bool, reason string) string {
	if stranded {
		return "stranded: " + reason + " (" + node + ")"
	}
	return "no longer stranded: " + reason + " (" + node + ")"
}

// unstrandAtCutover clears the mark of a session a move took off its dead
// node, with its session.stranded event (appended before the cutover's).
func (a *applier) unstrandAtCutover(c *fsmpb.Command, s *fsmpb.Session) {
	if !s.Stranded {
		return
	}
	node := s.StrandedNode
	s.Stranded, s.StrandedNode = false, ""
	a.putEvents(newEvent(s, c, KindSessionStranded, strandedText(node, false, "moved"),
		fact(strandedFact{Node: node, Reason: "moved"})))
}
