package fsm

import (
	"github.com/fak-dev/fak/fsm/fsmpb"
)

// The capability set: what a caller may do to a session now, control by
// control, and for each control it may not use, why (a Reason) and what
// would unblock it (the handoff: another control, "attach", or a fakctl
// command). Clients draw their controls from it instead of guessing the
// rules. It is a pure function of the session record, the caller's
// attachment and a time; where a command would be refused, the control
// names the command's reason (NOT_ATTACHED, ALREADY_HELD and
// NOT_HELD_BY_OTHER exist only here). Names, reasons, messages and
// handoffs are the wire form clients and the browser page read: change
// them only with CapabilityVersion.

// CapabilityVersion is bumped when controls are added or change meaning.
const CapabilityVersion = 3

// Control names, as clients see them in the capability set.
const (
	ControlInputText      = "input.text"
	ControlLeaseTake      = "lease.take"
	ControlLeaseRelease   = "lease.release"
	ControlLeaseSteal     = "lease.steal"
	ControlApprovalAnswer = "approval.answer"
	ControlSessionStop    = "session.stop"
	ControlDetach         = "detach"
	// The reset ledger (DESIGN.md §5).
	ControlSessionFresh = "session.fresh"
	ControlSessionReset = "session.reset"
	ControlSessionClear = "session.clear"
	ControlSessionNew   = "session.new"
	ControlSessionFork  = "session.fork"
	// Moving the session to another node or placement (DESIGN.md §8).
	ControlSessionMove = "session.move"
)

// HandoffAttach is the handoff of a control that needs an attachment.
const HandoffAttach = "attach"

// Capability is one control's availability for one caller. An unavailable
// control carries its reason, a message for a person, and the handoff (may
// be empty).
type Capability struct {
	Control   string
	Available bool
	Reason    Reason
	Message   string
	Handoff   string
}

// Capabilities lists every control, in a fixed order, with its
// availability for the caller whose attachment is at (nil: an observer that
// has not attached, or whose attachment is gone). Lease expiry is judged at
// now.
func Capabilities(s *fsmpb.Session, at *fsmpb.Attachment, now int64) []Capability {
	attachmentID := ""
	if at != nil {
		attachmentID = at.AttachmentId
	}
	active := s.State == fsmpb.SessionState_SESSION_STATE_ACTIVE
	holder := LeaseHolder(s, now)
	heldByOther := holder != "" && holder != attachmentID
	holderName := ""
	if holder != "" {
		holderName = s.Lease.ClientKind + " " + s.Lease.ClientName
	}
	on := func(name string) Capability { return Capability{Control: name, Available: true} }
	off := func(name string, reason Reason, msg, handoff string) Capability {
		return Capability{Control: name, Reason: reason, Message: msg, Handoff: handoff}
	}
	stopped := func(name string) Capability {
		return off(name, ReasonSessionStopped, "the session is stopped ("+s.StopReason+")", "fakctl session describe "+s.SessionId)
	}
	notAttached := func(name string) Capability {
		return off(name, ReasonNotAttached, "attach to the session first", HandoffAttach)
	}
	var cs []Capability
	// input.text
	switch {
	case !active:
		cs = append(cs, stopped(ControlInputText))
	case attachmentID == "":
		cs = append(cs, notAttached(ControlInputText))
	case holder == attachmentID:
		cs = append(cs, on(ControlInputText))
	case heldByOther:
		cs = append(cs, off(ControlInputText, ReasonLeaseNotHeld, "the input lease is held by "+holderName, ControlLeaseSteal))
	default:
		cs = append(cs, off(ControlInputText, ReasonLeaseNotHeld, "take the input lease first", ControlLeaseTake))
	}
	// lease.take
	switch {
	case !active:
		cs = append(cs, stopped(ControlLeaseTake))
	case attachmentID == "":
		cs = append(cs, notAttached(ControlLeaseTake))
	case holder == attachmentID:
		cs = append(cs, off(ControlLeaseTake, ReasonAlreadyHeld, "this attachment holds the lease", ControlLeaseRelease))
	case heldByOther:
		cs = append(cs, off(ControlLeaseTake, ReasonLeaseHeld, "the input lease is held by "+holderName, ControlLeaseSteal))
	default:
		cs = append(cs, on(ControlLeaseTake))
	}
	// lease.release
	switch {
	case attachmentID == "":
		cs = append(cs, notAttached(ControlLeaseRelease))
	case holder == attachmentID:
		cs = append(cs, on(ControlLeaseRelease))
	default:
		cs = append(cs, off(ControlLeaseRelease, ReasonLeaseNotHeld, "this attachment does not hold the lease", ControlLeaseTake))
	}
	// lease.steal
	switch {
	case !active:
		cs = append(cs, stopped(ControlLeaseSteal))
	case attachmentID == "":
		cs = append(cs, notAttached(ControlLeaseSteal))
	case heldByOther:
		cs = append(cs, on(ControlLeaseSteal))
	default:
		cs = append(cs, off(ControlLeaseSteal, ReasonNotHeldByOther, "no other attachment holds the lease", ControlLeaseTake))
	}
	// approval.answer
	switch {
	case attachmentID == "":
		cs = append(cs, notAttached(ControlApprovalAnswer))
	case s.PendingApprovalSeq != 0 && (s.Approval == nil || !s.Approval.Answered):
		cs = append(cs, on(ControlApprovalAnswer))
	default:
		cs = append(cs, off(ControlApprovalAnswer, ReasonNoPendingApproval, "no approval is pending", ""))
	}
	// session.stop
	if active {
		cs = append(cs, on(ControlSessionStop))
	} else {
		cs = append(cs, stopped(ControlSessionStop))
	}
	// The ledger: fresh, clear, new and fork need an active session; reset
	// also needs no turn in flight. Fork works on stopped sessions too (a
	// branch from an audited record).
	for _, name := range []string{ControlSessionFresh, ControlSessionReset, ControlSessionClear, ControlSessionNew} {
		switch {
		case !active:
			cs = append(cs, stopped(name))
		case name == ControlSessionReset && s.TurnInputSeq != 0:
			cs = append(cs, off(name, ReasonBusy, "a turn is in flight; reset when it completes", ""))
		default:
			cs = append(cs, on(name))
		}
	}
	cs = append(cs, on(ControlSessionFork))
	// session.move: one move at a time, on an active session.
	switch {
	case !active:
		cs = append(cs, stopped(ControlSessionMove))
	case MoveOpen(s.Move):
		cs = append(cs, off(ControlSessionMove, ReasonBusy,
			"move "+s.Move.MoveId+" is in progress ("+s.Move.State+")", "fakctl session move-status "+s.SessionId))
	default:
		cs = append(cs, on(ControlSessionMove))
	}
	// detach
	if attachmentID != "" {
		cs = append(cs, on(ControlDetach))
	} else {
		cs = append(cs, notAttached(ControlDetach))
	}
	return cs
}
