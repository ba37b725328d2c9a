package fsm

import (
	"bytes"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// Limits on session metadata. They are rules of the state machine, identical
// on every replica.
const (
	MaxSessionIDBytes = 128
	MaxTitleBytes     = 512
	MaxObjectiveBytes = 16 << 10
	MaxReasonBytes    = 512
	MaxKindBytes      = 64
	// MaxWorkspaceDigestBytes bounds a checkpoint's workspace digest
	// ("sha256:" and 64 hex digits, with room).
	MaxWorkspaceDigestBytes = 128
	// MaxEventsPerAppend bounds one AppendEvents command.
	MaxEventsPerAppend = 1000
)

// DefaultStopReason is recorded when a stop names no reason.
const DefaultStopReason = "OPERATOR_STOP"

func validSessionID(id string) *Error {
	switch {
	case id == "":
		return errorf(ReasonInvalidArgument, "session id is required")
	case len(id) > MaxSessionIDBytes:
		return errorf(ReasonInvalidArgument, "session id longer than %d bytes", MaxSessionIDBytes)
	case strings.IndexByte(id, 0) >= 0:
		return errorf(ReasonInvalidArgument, "session id contains a NUL byte")
	}
	return nil
}

func (a *applier) loadSession(id string) (*fsmpb.Session, *Error) {
	if err := validSessionID(id); err != nil {
		return nil, err
	}
	raw := a.sessions.Get([]byte(id))
	if raw == nil {
		return nil, errorf(ReasonNotFound, "session %s not found", id)
	}
	var s fsmpb.Session
	if err := proto.Unmarshal(raw, &s); err != nil {
		panic("fsm: corrupt session record " + id + ": " + err.Error())
	}
	return &s, nil
}

func (a *applier) putSession(s *fsmpb.Session) {
	buf, err := proto.Marshal(s)
	if err != nil {
		panic("fsm: marshal session: " + err.Error())
	}
	a.must(a.sessions.Put([]byte(s.SessionId), buf))
	a.touched.add(s, !a.ownWrite)
}

func (a *applier) createSession(c *fsmpb.Command, cmd *fsmpb.CreateSession) (*fsmpb.Result, *Error) {
	if err := validSessionID(cmd.SessionId); err != nil {
		return nil, err
	}
	if len(cmd.Title) > MaxTitleBytes {
		return nil, errorf(ReasonInvalidArgument, "title longer than %d bytes", MaxTitleBytes)
	}
	if len(cmd.Objective) > MaxObjectiveBytes {
		return nil, errorf(ReasonInvalidArgument, "objective longer than %d bytes", MaxObjectiveBytes)
	}
	if a.sessions.Get([]byte(cmd.SessionId)) != nil {
		return nil, errorf(ReasonAlreadyExists, "session %s already exists", cmd.SessionId)
	}
	placement := cmd.Placement
	if placement == nil {
		placement = &fsmpb.Placement{}
	}
	if placement.RuntimeAdapter == "" {
		placement.RuntimeAdapter = DefaultRuntimeAdapter
	}
	if err := validPlacement(placement); err != nil {
		return nil, err
	}
	if err := a.checkPlacement(placement); err != nil {
		return nil, err
	}
	a.stampApprovals(placement)
	if err := validRecover(cmd.Policy.GetRecover()); err != nil {
		return nil, err
	}
	s := &fsmpb.Session{
		SessionId:       cmd.SessionId,
		Title:           cmd.Title,
		Objective:       cmd.Objective,
		State:           fsmpb.SessionState_SESSION_STATE_ACTIVE,
		CreatedUnixNano: c.TimeUnixNano,
		UpdatedUnixNano: c.TimeUnixNano,
		Epoch:           1,
		Placement:       placement,
		EnvelopeId:      cmd.SessionId,
		ContextCap:      cmd.Policy.GetContextCap(),
		Provider:        placement.Provider,
		RecoverManual:   cmd.Policy.GetRecover() == RecoverManual,
	}
	a.newEnvelope(c, s.EnvelopeId, cmd.Policy)
	a.putEvents(
		newEvent(s, c, KindSessionCreated, cmd.Title, nil),
		newEvent(s, c, KindEpochChanged, epochText(1, placement), fact(epochFact{Epoch: 1, Placement: placementFactOf(placement)})),
	)
	a.putSession(s)
	return &fsmpb.Result{Body: &fsmpb.Result_Session{Session: s}}, nil
}

func (a *applier) stopSession(c *fsmpb.Command, cmd *fsmpb.StopSession) (*fsmpb.Result, *Error) {
	if len(cmd.Reason) > MaxReasonBytes {
		return nil, errorf(ReasonInvalidArgument, "reason longer than %d bytes", MaxReasonBytes)
	}
	s, err := a.loadSession(cmd.SessionId)
	if err != nil {
		return nil, err
	}
	if s.State == fsmpb.SessionState_SESSION_STATE_STOPPED {
		// Stopping twice is a no-op: the first reason stands.
		return &fsmpb.Result{Body: &fsmpb.Result_Session{Session: s}}, nil
	}
	reason := cmd.Reason
	if reason == "" {
		reason = DefaultStopReason
	}
	a.endOpenMove(c, s, "session stopped ("+reason+")")
	s.State = fsmpb.SessionState_SESSION_STATE_STOPPED
	s.StopReason = reason
	s.UpdatedUnixNano, s.StoppedUnixNano = c.TimeUnixNano, c.TimeUnixNano
	a.putEvents(newEvent(s, c, KindSessionStopped, reason, nil))
	a.putSession(s)
	return &fsmpb.Result{Body: &fsmpb.Result_Session{Session: s}}, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return string(bytes.ToValidUTF8([]byte(s[:n]), nil)) + "…"
}

// activeSession refuses a stopped session: SESSION_STOPPED, with its reason.
func activeSession(s *fsmpb.Session) *Error {
	if s.State == fsmpb.SessionState_SESSION_STATE_STOPPED {
		return errorf(ReasonSessionStopped, "session %s is stopped (%s)", s.SessionId, s.StopReason)
	}
	return nil
}
