package fsm

import (
	"github.com/fak-dev/fak/fsm/fsmpb"
)

// MaxInputBytes bounds one input.
const MaxInputBytes = 64 << 10

// submitInput accepts input from the lease holder into the session's queue.
// The checks run in the order a client can act on: a stopped session first,
// then an external one (its agent reads no input from the fleet), then the
// epoch it targeted, then the lease.
func (a *applier) submitInput(c *fsmpb.Command, cmd *fsmpb.SubmitInput) (*fsmpb.Result, *Error) {
	if cmd.Text == "" {
		return nil, errorf(ReasonInvalidArgument, "input text is required")
	}
	if len(cmd.Text) > MaxInputBytes {
		return nil, errorf(ReasonInvalidArgument, "input longer than %d bytes", MaxInputBytes)
	}
	s, at, err := a.leaseHolderAct(c, cmd.SessionId, cmd.AttachmentId, cmd.ExpectedEpoch, "input")
	if err != nil {
		return nil, err
	}
	ev := newEvent(s, c, KindInput, cmd.Text, fact(inputFact{
		AttachmentID: at.AttachmentId, ClientKind: at.ClientKind, ClientName: at.ClientName, Epoch: s.Epoch,
	}))
	s.QueuedInputs = append(s.QueuedInputs, ev.Seq)
	s.UpdatedUnixNano = c.TimeUnixNano
	a.putEvents(ev)
	a.putSession(s)
	return &fsmpb.Result{Body: &fsmpb.Result_Append{Append: &fsmpb.AppendResult{
		SessionId: s.SessionId, FirstSeq: ev.Seq, LastSeq: ev.Seq,
	}}}, nil
}

// leaseHolderAct runs the checks of an action only the lease holder may
// take (input, an interrupt), in the order a client can act on: a stopped
// session, an external one (its agent takes nothing from the fleet), the
// epoch the action targets, the attachment, the lease.
func (a *applier) leaseHolderAct(c *fsmpb.Command, sessionID, attachmentID string, expectedEpoch uint64, what string) (*fsmpb.Session, *fsmpb.Attachment, *Error) {
	s, err := a.loadSession(sessionID)
	if err != nil {
		return nil, nil, err
	}
	if err := activeSession(s); err != nil {
		return nil, nil, err
	}
	if err := refuseExternal(s, what); err != nil {
		return nil, nil, err
	}
	if err := checkEpoch(s, expectedEpoch, what+" targets"); err != nil {
		return nil, nil, err
	}
	at, err := a.loadAttachment(s.SessionId, attachmentID)
	if err != nil {
		return nil, nil, err
	}
	if LeaseHolder(s, c.TimeUnixNano) != at.AttachmentId {
		return nil, nil, leaseNotHeld(s, c.TimeUnixNano, at.AttachmentId)
	}
	return s, at, nil
}

// answerApproval needs an attachment, not the lease: a phone may answer
// while a terminal types. Answering an answered approval is a typed no-op.
func (a *applier) answerApproval(c *fsmpb.Command, cmd *fsmpb.AnswerApproval) (*fsmpb.Result, *Error) {
	if len(cmd.Note) > MaxReasonBytes {
		return nil, errorf(ReasonInvalidArgument, "note longer than %d bytes", MaxReasonBytes)
	}
	s, err := a.loadSession(cmd.SessionId)
	if err != nil {
		return nil, err
	}
	at, err := a.loadAttachment(s.SessionId, cmd.AttachmentId)
	if err != nil {
		return nil, err
	}
	if ap := s.Approval; ap != nil && ap.ApprovalSeq == cmd.ApprovalSeq && ap.Answered {
		return &fsmpb.Result{NoOp: true, Body: &fsmpb.Result_Session{Session: s}}, nil
	}
	if err := activeSession(s); err != nil {
		return nil, err
	}
	if s.PendingApprovalSeq == 0 || s.PendingApprovalSeq != cmd.ApprovalSeq {
		return nil, errorf(ReasonNoPendingApproval, "no approval pending at seq %d", cmd.ApprovalSeq)
	}
	s.Approval = &fsmpb.Approval{ApprovalSeq: cmd.ApprovalSeq, Answered: true, Approved: cmd.Approved,
		AttachmentId: at.AttachmentId, Note: cmd.Note}
	verdict := "denied"
	if cmd.Approved {
		verdict = "approved"
	}
	s.UpdatedUnixNano = c.TimeUnixNano
	a.putEvents(newEvent(s, c, KindApprovalAnswered, verdict+" by "+at.ClientKind+" "+at.ClientName, fact(approvalFact{
		ApprovalSeq: cmd.ApprovalSeq, Approved: cmd.Approved, AttachmentID: at.AttachmentId,
		ClientKind: at.ClientKind, ClientName: at.ClientName, Note: cmd.Note,
	})))
	a.putSession(s)
	return &fsmpb.Result{Body: &fsmpb.Result_Session{Session: s}}, nil
}

// runnerAppend writes a runner's events, fenced by epoch, and keeps the
// turn bookkeeping: a turn starts on the oldest queued input, output and
// tools happen inside a turn, a tool waiting for approval gets its result
// only after the answer, and completing the turn frees the runner for the
// next input. The whole command is checked before anything is written.
func (a *applier) runnerAppend(c *fsmpb.Command, cmd *fsmpb.RunnerAppend) (*fsmpb.Result, *Error) {
	if len(cmd.Events) == 0 {
		return nil, errorf(ReasonInvalidArgument, "at least one event is required")
	}
	if len(cmd.Events) > MaxEventsPerAppend {
		return nil, errorf(ReasonInvalidArgument, "%d events in one append; the limit is %d", len(cmd.Events), MaxEventsPerAppend)
	}
	for i, ev := range cmd.Events {
		if !runnerKinds[ev.Kind] {
			return nil, errorf(ReasonInvalidArgument, "event %d: kind %q is not written by runners", i, truncate(ev.Kind, MaxKindBytes))
		}
	}
	s, err := a.loadSession(cmd.SessionId)
	if err != nil {
		return nil, err
	}
	if err := checkEpoch(s, cmd.Epoch, "runner of"); err != nil {
		return nil, err
	}
	if err := activeSession(s); err != nil {
		return nil, err
	}
	if b := cmd.Binding; b != nil && (b.Provider == "" || b.ThreadId == "" ||
		len(b.Provider) > MaxPlacementFieldBytes || len(b.ThreadId) > MaxSessionIDBytes) {
		return nil, errorf(ReasonInvalidArgument, "a provider binding needs a provider (1-%d bytes) and a thread id (1-%d bytes)", MaxPlacementFieldBytes, MaxSessionIDBytes)
	}
	first := s.HeadSeq + 1
	res := &fsmpb.AppendResult{SessionId: s.SessionId, FirstSeq: first}
	if cmd.ChargeTurn {
		refused, err := a.chargeTurnStart(c, s, cmd)
		if err != nil {
			return nil, err
		}
		if refused {
			a.putSession(s)
			res.LastSeq, res.TurnRefused = s.HeadSeq, true
			return &fsmpb.Result{Body: &fsmpb.Result_Append{Append: res}}, nil
		}
	}
	events := make([]*fsmpb.Event, 0, len(cmd.Events)+1)
	if ev := bindProviderThread(c, s, cmd.Binding); ev != nil {
		events = append(events, ev)
	}
	for i, in := range cmd.Events {
		inTurn := s.TurnInputSeq != 0
		switch in.Kind {
		case KindTurnStarted:
			if err := canStartTurn(s, i, cmd.StartsInput); err != nil {
				return nil, err
			}
			s.TurnInputSeq = s.QueuedInputs[0]
			s.QueuedInputs = s.QueuedInputs[1:]
			noteTurnStart(c, s)
		case KindApprovalRequested:
			if !inTurn || s.PendingApprovalSeq != 0 {
				return nil, errorf(ReasonTurnOrder, "event %d: approval.requested needs a running turn and no pending approval", i)
			}
		case KindToolResult:
			if !inTurn {
				return nil, errorf(ReasonTurnOrder, "event %d: %s outside a turn", i, in.Kind)
			}
			if s.PendingApprovalSeq != 0 {
				if ap := s.Approval; ap == nil || ap.ApprovalSeq != s.PendingApprovalSeq || !ap.Answered {
					return nil, errorf(ReasonTurnOrder, "event %d: tool.result before approval %d was answered", i, s.PendingApprovalSeq)
				}
				s.PendingApprovalSeq = 0
			}
		case KindTurnCompleted:
			if !inTurn {
				return nil, errorf(ReasonTurnOrder, "event %d: turn.completed outside a turn", i)
			}
		default: // output, tool.call
			if !inTurn {
				return nil, errorf(ReasonTurnOrder, "event %d: %s outside a turn", i, in.Kind)
			}
		}
		ev := newEvent(s, c, in.Kind, in.Text, in.Data)
		var warmed *fsmpb.Event
		switch in.Kind {
		case KindApprovalRequested:
			s.PendingApprovalSeq = ev.Seq
			s.Approval = &fsmpb.Approval{ApprovalSeq: ev.Seq}
		case KindTurnCompleted:
			input := s.TurnInputSeq
			s.TurnInputSeq = 0
			s.PendingApprovalSeq = 0
			s.TurnsCompleted++
			warmed = warmedUp(c, s, input)
		}
		events = append(events, ev)
		if warmed != nil {
			events = append(events, warmed)
		}
	}
	s.UpdatedUnixNano = c.TimeUnixNano
	a.putEvents(events...)
	if cmd.Usage != nil {
		// Refused or not, the append stands: the turn's events happened.
		_, err := a.charge(c, s, cmd.Usage, 0, "")
		res.UsageRefused = err != nil
	}
	a.putSession(s)
	res.LastSeq = s.HeadSeq
	return &fsmpb.Result{Body: &fsmpb.Result_Append{Append: res}}, nil
}

// bindProviderThread records the provider thread a runtime's turn ran on
// as the session's provider binding, journaled (provider.bound) when it
// changes it (the event it returns, nil when unchanged): the next turn, on
// any node, resumes that thread.
func bindProviderThread(c *fsmpb.Command, s *fsmpb.Session, b *fsmpb.ProviderBinding) *fsmpb.Event {
	if b == nil || s.ProviderThread && s.Provider == b.Provider && s.ProviderSessionId == b.ThreadId {
		return nil
	}
	s.Provider, s.ProviderSessionId, s.ProviderThread = b.Provider, b.ThreadId, true
	return newEvent(s, c, KindProviderBound, b.Provider+" "+b.ThreadId, fact(providerFact{
		Provider: b.Provider, Source: "runtime", ProviderSessionID: b.ThreadId, Epoch: s.Epoch,
	}))
}

// canStartTurn checks that event i of a runner's write may start a turn:
// none runs, an input is queued — the one the runner serves (want, when
// not 0): a runner that read a stale replica would otherwise journal a
// turn named after an input it does not serve — and no move is open: the
// source of a move starts no turn until the move ends (its checkpoint is
// the state the destination continues from), and the destination none
// before cutover.
func canStartTurn(s *fsmpb.Session, i int, want uint64) *Error {
	switch {
	case s.TurnInputSeq != 0:
		return errorf(ReasonTurnOrder, "event %d: a turn is already running (input %d)", i, s.TurnInputSeq)
	case len(s.QueuedInputs) == 0:
		return errorf(ReasonTurnOrder, "event %d: no queued input to start a turn on", i)
	case want != 0 && s.QueuedInputs[0] != want:
		return errorf(ReasonTurnOrder, "event %d: the turn would serve input %d, not the oldest queued one (%d)", i, want, s.QueuedInputs[0])
	case MoveOpen(s.Move):
		return errorf(ReasonMoveState, "event %d: no turn starts while move %s is open (%s)", i, s.Move.MoveId, s.Move.State)
	}
	return nil
}

// Refused turns: how the FSM closes a turn whose charge the envelope
// refused.
const (
	StatusRefused   = "refused"
	RefusedTurnText = "refused: turn budget exhausted"
)

// chargeTurnStart charges the turn a runner starts (RunnerAppend with
// charge_turn): one turn and one query, before turn.started, checked
// before anything is written. When the envelope refuses (the refusal
// journaled), it starts the turn and closes it refused, so the queue moves
// on, and reports refused; the caller stores s.
func (a *applier) chargeTurnStart(c *fsmpb.Command, s *fsmpb.Session, cmd *fsmpb.RunnerAppend) (refused bool, _ *Error) {
	if len(cmd.Events) != 1 || cmd.Events[0].Kind != KindTurnStarted {
		return false, errorf(ReasonInvalidArgument, "charge_turn needs exactly one event, turn.started")
	}
	if err := canStartTurn(s, 0, cmd.StartsInput); err != nil {
		return false, err
	}
	charge := &fsmpb.Budget{Turns: 1, Queries: 1}
	if cmd.TurnOnly {
		charge.Queries = 0
	}
	_, err := a.charge(c, s, charge, 0, "")
	if err == nil {
		return false, nil
	}
	if err.Reason != ReasonBudgetExhausted {
		return false, err
	}
	in := cmd.Events[0]
	input := s.QueuedInputs[0]
	s.QueuedInputs = s.QueuedInputs[1:]
	s.TurnsCompleted++
	a.putEvents(newEvent(s, c, in.Kind, in.Text, in.Data),
		newEvent(s, c, KindTurnCompleted, RefusedTurnText, fact(refusedTurnFact{
			Status: StatusRefused, Reason: string(ReasonBudgetExhausted), InputSeq: input,
		})))
	return true, nil
}
