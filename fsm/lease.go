package fsm

import (
	"fmt"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// The input lease (DESIGN.md §7): at most one attachment may submit input.
// Expiry is judged against the leader-stamped time of the command being
// applied, so every replica agrees on who holds the lease at every log
// position.

// LeaseHolder returns the attachment holding s's lease at time now, or "".
func LeaseHolder(s *fsmpb.Session, now int64) string {
	if s.Lease == nil || s.Lease.AttachmentId == "" || s.Lease.ExpiresUnixNano <= now {
		return ""
	}
	return s.Lease.AttachmentId
}

func describeHolder(l *fsmpb.Lease) string {
	name := l.ClientKind
	if l.ClientName != "" {
		name += " " + l.ClientName
	}
	return fmt.Sprintf("%s (attachment %s)", name, l.AttachmentId)
}

func (a *applier) takeLease(c *fsmpb.Command, cmd *fsmpb.TakeLease) (*fsmpb.Result, *Error) {
	if err := validTTL(cmd.TtlNanos); err != nil {
		return nil, err
	}
	s, err := a.loadSession(cmd.SessionId)
	if err != nil {
		return nil, err
	}
	if err := activeSession(s); err != nil {
		return nil, err
	}
	at, err := a.loadAttachment(s.SessionId, cmd.AttachmentId)
	if err != nil {
		return nil, err
	}
	holder := LeaseHolder(s, c.TimeUnixNano)
	if holder == at.AttachmentId {
		s.Lease.ExpiresUnixNano = c.TimeUnixNano + cmd.TtlNanos
		a.putSession(s)
		return &fsmpb.Result{NoOp: true, Body: &fsmpb.Result_Session{Session: s}}, nil
	}
	if holder != "" && !cmd.Steal {
		return nil, errorf(ReasonLeaseHeld, "the input lease is held by %s; take it with steal", describeHolder(s.Lease))
	}
	f := leaseFact{AttachmentID: at.AttachmentId, ClientKind: at.ClientKind, ClientName: at.ClientName,
		ExpiresUnixNs: c.TimeUnixNano + cmd.TtlNanos}
	text := "lease taken by " + at.ClientKind + " " + at.ClientName
	if holder != "" {
		f.StolenFrom, f.StolenFromName = holder, s.Lease.ClientKind+" "+s.Lease.ClientName
		text = "lease stolen from " + describeHolder(s.Lease) + " by " + at.ClientKind + " " + at.ClientName
	}
	s.Lease = &fsmpb.Lease{AttachmentId: at.AttachmentId, ClientKind: at.ClientKind, ClientName: at.ClientName,
		TakenUnixNano: c.TimeUnixNano, ExpiresUnixNano: c.TimeUnixNano + cmd.TtlNanos}
	s.UpdatedUnixNano = c.TimeUnixNano
	a.putEvents(newEvent(s, c, KindLeaseTaken, text, fact(f)))
	a.putSession(s)
	return &fsmpb.Result{Body: &fsmpb.Result_Session{Session: s}}, nil
}

func (a *applier) renewLease(c *fsmpb.Command, cmd *fsmpb.RenewLease) (*fsmpb.Result, *Error) {
	if err := validTTL(cmd.TtlNanos); err != nil {
		return nil, err
	}
	s, err := a.loadSession(cmd.SessionId)
	if err != nil {
		return nil, err
	}
	if err := validAttachmentID(cmd.AttachmentId); err != nil {
		return nil, err
	}
	if LeaseHolder(s, c.TimeUnixNano) != cmd.AttachmentId {
		return nil, leaseNotHeld(s, c.TimeUnixNano, cmd.AttachmentId)
	}
	s.Lease.ExpiresUnixNano = c.TimeUnixNano + cmd.TtlNanos
	a.putSession(s)
	return &fsmpb.Result{Body: &fsmpb.Result_Session{Session: s}}, nil
}

func leaseNotHeld(s *fsmpb.Session, now int64, attachmentID string) *Error {
	if h := LeaseHolder(s, now); h != "" {
		return errorf(ReasonLeaseNotHeld, "attachment %s does not hold the input lease; %s does", attachmentID, describeHolder(s.Lease))
	}
	return errorf(ReasonLeaseNotHeld, "attachment %s does not hold the input lease; nobody does (take it first)", attachmentID)
}

// LeaseExpired is the reason of the leader reaper's ReleaseLease.
const LeaseExpired = "expired"

func (a *applier) releaseLease(c *fsmpb.Command, cmd *fsmpb.ReleaseLease) (*fsmpb.Result, *Error) {
	if len(cmd.Reason) > MaxReasonBytes {
		return nil, errorf(ReasonInvalidArgument, "reason longer than %d bytes", MaxReasonBytes)
	}
	s, err := a.loadSession(cmd.SessionId)
	if err != nil {
		return nil, err
	}
	if s.Lease == nil || s.Lease.AttachmentId == "" {
		return &fsmpb.Result{NoOp: true, Body: &fsmpb.Result_Session{Session: s}}, nil
	}
	reason := cmd.Reason
	switch {
	case cmd.AttachmentId == "":
		// The reaper: only a lapsed lease is cleared.
		if reason != LeaseExpired || LeaseHolder(s, c.TimeUnixNano) != "" {
			return &fsmpb.Result{NoOp: true, Body: &fsmpb.Result_Session{Session: s}}, nil
		}
	case s.Lease.AttachmentId != cmd.AttachmentId:
		return &fsmpb.Result{NoOp: true, Body: &fsmpb.Result_Session{Session: s}}, nil
	}
	if reason == "" {
		reason = "released"
	}
	l := s.Lease
	s.Lease = nil
	s.UpdatedUnixNano = c.TimeUnixNano
	a.putEvents(newEvent(s, c, KindLeaseReleased, "lease released by "+l.ClientKind+" "+l.ClientName+": "+reason, fact(leaseFact{
		AttachmentID: l.AttachmentId, ClientKind: l.ClientKind, ClientName: l.ClientName, Reason: reason,
	})))
	a.putSession(s)
	return &fsmpb.Result{Body: &fsmpb.Result_Session{Session: s}}, nil
}
