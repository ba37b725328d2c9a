package fsm

import (
	"github.com/fak-dev/fak/fsm/fsmpb"
)

// The capability set: what a caller may do to a session now, control by
// control, and for each control it may not use, why (a Reason) and what
// would unblock it (the handoff: another control, "attach", or a fakctl
// command). Clients draw their controls from it instead of guessing the
// rules. It is a pure function of the session record, the caller's
// attachment, the caller's token role and a time; where a call would be
// refused, the control names the refusal's reason, in the order the
// refusals come: the role first (the API refuses a call its token may not
// make before anything else, PERMISSION_DENIED), then the command's own
// checks (NOT_ATTACHED, ALREADY_HELD and NOT_HELD_BY_OTHER exist only
// here). Names, reasons, messages and handoffs are the wire form clients
// and the browser page read: change them only with CapabilityVersion.

// CapabilityVersion is bumped when controls are added or change meaning.
// 4: turn.interrupt; EXTERNAL_RUNTIME; PERMISSION_DENIED by the caller's
// role; approval.answer is SESSION_STOPPED on a stopped session.
// 5: approval.answer is RUNTIME_DECIDES on a runtime that decides
// approvals by its own policy.
const CapabilityVersion = 5

// Control names, as clients see them in the capability set.
const (
	ControlInputText      = "input.text"
	ControlTurnInterrupt  = "turn.interrupt"
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

// Role is a caller's token role as the capability set judges it: the
// API's roles, lowest first — RoleRead < RoleAgent < RoleOperator — by
// the names a token carries (acl.go). Any other value ranks below read.
type Role string

func (r Role) rank() int {
	switch r {
	case RoleRead:
		return 1
	case RoleAgent:
		return 2
	case RoleOperator:
		return 3
	}
	return 0
}

// Covers reports whether a token of role r may do what role need may.
func (r Role) Covers(need Role) bool { return r.rank() >= need.rank() }

// controls lists every control in the capability set's order, with the
// least role that may use it — the role of the API procedure that acts on
// it (api/roles.go; api's tests check the two agree) — and what it does,
// for the refusal's message ("a read token cannot send input").
var controls = []struct {
	name string
	role Role
	verb string
}{
	{ControlInputText, RoleAgent, "send input"},
	{ControlTurnInterrupt, RoleAgent, "interrupt a turn"},
	{ControlLeaseTake, RoleAgent, "take the input lease"},
	{ControlLeaseRelease, RoleAgent, "release the input lease"},
	{ControlLeaseSteal, RoleAgent, "steal the input lease"},
	{ControlApprovalAnswer, RoleAgent, "answer an approval"},
	{ControlSessionStop, RoleAgent, "stop the session"},
	{ControlSessionFresh, RoleAgent, "renew the provider binding"},
	{ControlSessionReset, RoleAgent, "reset the session"},
	{ControlSessionClear, RoleAgent, "clear the session"},
	{ControlSessionNew, RoleAgent, "start a new session"},
	{ControlSessionFork, RoleAgent, "fork the session"},
	{ControlSessionMove, RoleOperator, "move the session"},
	{ControlDetach, RoleAgent, "detach"},
}

// Controls returns every control, in the order a capability set lists
// them.
func Controls() []string {
	out := make([]string, len(controls))
	for i, c := range controls {
		out[i] = c.name
	}
	return out
}

// ControlRole returns the least role that may use control ("" for a
// control that does not exist).
func ControlRole(control string) Role {
	for _, c := range controls {
		if c.name == control {
			return c.role
		}
	}
	return ""
}

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

// Capabilities lists every control, in a fixed order (Controls), with its
// availability for the caller whose attachment is at (nil: an observer that
// has not attached, or whose attachment is gone) and whose token has role.
// Lease expiry is judged at now.
func Capabilities(s *fsmpb.Session, at *fsmpb.Attachment, role Role, now int64) []Capability {
	byState := sessionCapabilities(s, at, now)
	cs := make([]Capability, len(controls))
	for i, c := range controls {
		if !role.Covers(c.role) {
			who := "a " + string(role)
			switch role {
			case "":
				who = "this"
			case RoleAgent, RoleOperator:
				who = "an " + string(role)
			}
			cs[i] = Capability{Control: c.name, Reason: ReasonPermissionDenied,
				Message: who + " token cannot " + c.verb + " (the " + string(c.role) + " role can)"}
			continue
		}
		cs[i] = byState[c.name]
		cs[i].Control = c.name
	}
	return cs
}

// sessionCapabilities is the availability of every control by the
// session's state and the caller's attachment, whatever the caller's role.
func sessionCapabilities(s *fsmpb.Session, at *fsmpb.Attachment, now int64) map[string]Capability {
	attachmentID := ""
	if at != nil {
		attachmentID = at.AttachmentId
	}
	active := s.State == fsmpb.SessionState_SESSION_STATE_ACTIVE
	external := IsExternal(s.Placement)
	holder := LeaseHolder(s, now)
	heldByOther := holder != "" && holder != attachmentID
	holderName := ""
	if holder != "" {
		holderName = s.Lease.ClientKind + " " + s.Lease.ClientName
	}
	on := Capability{Available: true}
	off := func(reason Reason, msg, handoff string) Capability {
		return Capability{Reason: reason, Message: msg, Handoff: handoff}
	}
	stopped := off(ReasonSessionStopped, "the session is stopped ("+s.StopReason+")", "fakctl session describe "+s.SessionId)
	notAttached := off(ReasonNotAttached, "attach to the session first", HandoffAttach)
	// What the fleet cannot do for an agent it does not run, and where
	// to turn instead.
	elsewhere := off(ReasonExternalRuntime, externalWhere(s.Placement)+"; the fleet does not run it", "fakctl launch describe "+s.Placement.GetLaunchId())
	// The lease holder's controls (input, interrupt) before their own
	// condition: where the lease is.
	leaseGate := func() (Capability, bool) {
		switch {
		case !active:
			return stopped, false
		case external:
			return elsewhere, false
		case attachmentID == "":
			return notAttached, false
		case heldByOther:
			return off(ReasonLeaseNotHeld, "the input lease is held by "+holderName, ControlLeaseSteal), false
		case holder != attachmentID:
			return off(ReasonLeaseNotHeld, "take the input lease first", ControlLeaseTake), false
		}
		return on, true
	}
	cs := map[string]Capability{}
	cs[ControlInputText], _ = leaseGate()
	if c, ok := leaseGate(); !ok {
		cs[ControlTurnInterrupt] = c
	} else if s.TurnInputSeq == 0 {
		cs[ControlTurnInterrupt] = off(ReasonNoTurnRunning, "no turn is running", "")
	} else {
		cs[ControlTurnInterrupt] = on
	}
	switch {
	case !active:
		cs[ControlLeaseTake] = stopped
	case attachmentID == "":
		cs[ControlLeaseTake] = notAttached
	case holder == attachmentID:
		cs[ControlLeaseTake] = off(ReasonAlreadyHeld, "this attachment holds the lease", ControlLeaseRelease)
	case heldByOther:
		cs[ControlLeaseTake] = off(ReasonLeaseHeld, "the input lease is held by "+holderName, ControlLeaseSteal)
	default:
		cs[ControlLeaseTake] = on
	}
	switch {
	case attachmentID == "":
		cs[ControlLeaseRelease] = notAttached
	case holder == attachmentID:
		cs[ControlLeaseRelease] = on
	default:
		cs[ControlLeaseRelease] = off(ReasonLeaseNotHeld, "this attachment does not hold the lease", ControlLeaseTake)
	}
	switch {
	case !active:
		cs[ControlLeaseSteal] = stopped
	case attachmentID == "":
		cs[ControlLeaseSteal] = notAttached
	case heldByOther:
		cs[ControlLeaseSteal] = on
	default:
		cs[ControlLeaseSteal] = off(ReasonNotHeldByOther, "no other attachment holds the lease", ControlLeaseTake)
	}
	// approval.answer needs an attachment, not the lease, on an active
	// session (the command refuses a stopped one).
	switch {
	case attachmentID == "":
		cs[ControlApprovalAnswer] = notAttached
	case !active:
		cs[ControlApprovalAnswer] = stopped
	case s.Placement.GetApprovals() != "":
		// The runtime decides by its own policy: no client is ever asked.
		cs[ControlApprovalAnswer] = off(ReasonRuntimeDecides, "runtime "+s.Placement.GetRuntimeAdapter()+
			" decides approvals itself ("+s.Placement.GetApprovals()+"); fak does not offer them", "")
	case s.PendingApprovalSeq != 0 && (s.Approval == nil || !s.Approval.Answered):
		cs[ControlApprovalAnswer] = on
	default:
		cs[ControlApprovalAnswer] = off(ReasonNoPendingApproval, "no approval is pending", "")
	}
	cs[ControlSessionStop] = on
	if !active {
		cs[ControlSessionStop] = stopped
	}
	// The ledger: fresh, clear, new and fork need an active session; reset
	// also needs no turn in flight. Fork works on stopped sessions too (a
	// branch from an audited record).
	for _, name := range []string{ControlSessionFresh, ControlSessionReset, ControlSessionClear, ControlSessionNew} {
		switch {
		case !active:
			cs[name] = stopped
		case name == ControlSessionReset && s.TurnInputSeq != 0:
			cs[name] = off(ReasonBusy, "a turn is in flight; reset when it completes", "")
		default:
			cs[name] = on
		}
	}
	cs[ControlSessionFork] = on
	// session.move: one move at a time, on an active session the fleet runs.
	switch {
	case !active:
		cs[ControlSessionMove] = stopped
	case external:
		cs[ControlSessionMove] = elsewhere
	case MoveOpen(s.Move):
		cs[ControlSessionMove] = off(ReasonBusy,
			"move "+s.Move.MoveId+" is in progress ("+s.Move.State+")", "fakctl session move-status "+s.SessionId)
	default:
		cs[ControlSessionMove] = on
	}
	cs[ControlDetach] = on
	if attachmentID == "" {
		cs[ControlDetach] = notAttached
	}
	return cs
}
